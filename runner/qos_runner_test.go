package runner_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podrun/podrun/runner"
)

// qosPods are a Guaranteed, a Burstable (1/16 of the node's memory) and a
// BestEffort pod.
func qosPods() []*v1.Pod {
	guaranteed := newPod("ug", "g-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: l, Limits: l}
	burstable := newPod("ub", "b-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	bestEffort := newPod("ue", "e-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	return []*v1.Pod{guaranteed, burstable, bestEffort}
}

// TestQOSClassAndOOMScoreAdj: the runner reports each pod's QoS class in
// its status (and keeps it with the sandbox, for ps without a daemon), and
// gives its containers and sandbox the kubelet's oom_score_adj; where podrun
// may not lower scores, the negative ones are raised to the floor, below
// every Burstable and BestEffort score, and every pod still starts.
func TestQOSClassAndOOMScoreAdj(t *testing.T) {
	floor := 0
	for _, tc := range []struct {
		name  string
		floor *int
		want  map[string]int // by pod UID; "sandbox" for the sandboxes
	}{
		{"may lower", nil, map[string]int{"ug": -997, "ub": 938, "ue": 1000, "sandbox": -998}},
		{"may not lower", &floor, map[string]int{"ug": 0, "ub": 938, "ue": 1000, "sandbox": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			h := start(t, fake, func(c *runner.Config) {
				c.NodeMemory = 16 << 30
				c.OOMScoreAdjFloor = tc.floor
			})
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: qosPods()}
			classes := map[string]v1.PodQOSClass{"ug": v1.PodQOSGuaranteed, "ub": v1.PodQOSBurstable, "ue": v1.PodQOSBestEffort}
			for uid, class := range classes {
				p := h.waitStatus(uid, "running", allRunning)
				if p.Status.QOSClass != class {
					t.Errorf("%s: status QoS class %q, want %q", uid, p.Status.QOSClass, class)
				}
				for _, c := range h.containers(uid) {
					if got := fake.ContainerConfig(c.ID).OOMScoreAdj; got != tc.want[uid] {
						t.Errorf("%s: container oom_score_adj %d, want %d", uid, got, tc.want[uid])
					}
				}
			}
			sbs, err := fake.ListSandboxes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) != 3 {
				t.Fatalf("%d sandboxes, want 3", len(sbs))
			}
			for _, sb := range sbs {
				if got := fake.SandboxConfig(sb.ID).OOMScoreAdj; got != tc.want["sandbox"] {
					t.Errorf("sandbox of %s: oom_score_adj %d, want %d", sb.Pod.UID, got, tc.want["sandbox"])
				}
			}
			// Without the manifests, the class kept with the sandbox.
			pods, err := runner.ObserveWithClock(context.Background(), fake, "fake", h.clk)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if want := classes[string(p.UID)]; p.Status.QOSClass != want {
					t.Errorf("observed %s: QoS class %q, want %q", p.UID, p.Status.QOSClass, want)
				}
			}
		})
	}
}
