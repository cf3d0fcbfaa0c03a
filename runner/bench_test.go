package runner

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// BenchmarkComputePodActions is the sync core's decision for one pod, in
// the states a sync most often sees.
func BenchmarkComputePodActions(b *testing.B) {
	always := v1.RestartPolicyAlways
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(*v1.Pod) *podState
	}{
		{"new pod", testPod(always, nil, "a"), func(p *v1.Pod) *podState { return newState(p).build() }},
		{"steady 1 container", testPod(always, nil, "a"), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).build()
		}},
		{"steady kubeadm-like 1 init 4 apps", testPod(always, []string{"init"}, "a", "b", "c", "d"), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "init", 0, engine.StateExited, 0).
				container("s", "a", 0, engine.StateRunning, 0).container("s", "b", 0, engine.StateRunning, 0).
				container("s", "c", 0, engine.StateRunning, 0).container("s", "d", 0, engine.StateRunning, 0).build()
		}},
		{"crash loop, 5 dead attempts", testPod(always, nil, "a"), func(p *v1.Pod) *podState {
			sb := newState(p).sandbox("s", 0, engine.StateRunning)
			for i := 0; i < 5; i++ {
				sb.container("s", "a", i, engine.StateExited, 1)
			}
			return sb.build()
		}},
		{"changed spec", testPod(always, nil, "a", "b"), func(p *v1.Pod) *podState {
			st := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).
				container("s", "b", 0, engine.StateRunning, 0).build()
			st.Containers[0].Hash = "old"
			return st
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			st := tc.state(tc.pod)
			bo := newBackoff(testclock.NewFakeClock(t0.Add(time.Hour)))
			b.ReportAllocs()
			for b.Loop() {
				computePodActions(tc.pod, st, bo, nil)
			}
		})
	}
}

// BenchmarkListPodsGrouping is the cache's grouping of a relist into pod
// states, for a node of n pods (its cost is O(n) per full relist).
func BenchmarkListPodsGrouping(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("%d pods", n), func(b *testing.B) {
			var sbs []*engine.Sandbox
			var cs []*engine.Container
			for i := 0; i < n; i++ {
				ref := engine.PodRef{UID: fmt.Sprintf("uid-%d", i), Name: fmt.Sprintf("p%d", i), Namespace: "default"}
				sbs = append(sbs, &engine.Sandbox{ID: fmt.Sprintf("s%d", i), Pod: ref, State: engine.StateRunning})
				cs = append(cs, &engine.Container{ID: fmt.Sprintf("c%d", i), Pod: ref, Name: "app", State: engine.StateRunning})
			}
			b.ReportAllocs()
			for b.Loop() {
				groupPods(sbs, cs)
			}
		})
	}
}
