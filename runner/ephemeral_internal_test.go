package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// TestComputeEphemeralActions: an ephemeral container is started once,
// while the pod's sandbox runs (even before initialisation is done), never
// again once the runtime holds it in any state, is not stopped as a
// container outside the spec while it runs, and changes no hash.
func TestComputeEphemeralActions(t *testing.T) {
	podWith := func(policy v1.RestartPolicy, inits []string) *v1.Pod {
		p := testPod(policy, inits, "a")
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img:1"},
			TargetContainerName:      "a",
		}}
		return p
	}
	tests := []struct {
		name  string
		pod   *v1.Pod
		state func(*v1.Pod) *podState
		start bool
	}{
		{"added to a running pod: started", podWith(v1.RestartPolicyAlways, nil), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).build()
		}, true},
		{"while an init container runs: started", podWith(v1.RestartPolicyAlways, []string{"i"}), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i", 0, engine.StateRunning, 0).build()
		}, true},
		{"running: left alone", podWith(v1.RestartPolicyAlways, nil), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).
				container("s", "debug", 0, engine.StateRunning, 0).build()
		}, false},
		{"exited 0 under Always: not restarted", podWith(v1.RestartPolicyAlways, nil), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).
				container("s", "debug", 0, engine.StateExited, 0).build()
		}, false},
		{"failed under OnFailure: not restarted", podWith(v1.RestartPolicyOnFailure, nil), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).
				container("s", "debug", 0, engine.StateExited, 1).build()
		}, false},
		{"ran in an older sandbox: not run in the new one", podWith(v1.RestartPolicyAlways, nil), func(p *v1.Pod) *podState {
			return newState(p).sandbox("s0", 0, engine.StateExited).container("s0", "debug", 0, engine.StateExited, 137).
				sandbox("s1", 1, engine.StateRunning).container("s1", "a", 1, engine.StateRunning, 0).build()
		}, false},
		{"not with a sandbox to make", podWith(v1.RestartPolicyAlways, nil), func(p *v1.Pod) *podState {
			return newState(p).build()
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state(tc.pod)
			a := computePodActions(tc.pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			if got := len(a.StartEphemeral) == 1 && a.StartEphemeral[0].Name == "debug"; got != tc.start {
				t.Errorf("started = %v, want %v (%v)", got, tc.start, names(a.StartEphemeral))
			}
			for _, k := range a.Kill {
				if k.Container.Name == "debug" {
					t.Errorf("the ephemeral container is stopped: %s", k.Reason)
				}
			}
			if len(a.StartApps) > 0 && !a.CreateSandbox {
				t.Errorf("an app container started: %v", names(a.StartApps))
			}
		})
	}

	plain := testPod(v1.RestartPolicyAlways, nil, "a")
	debug := podWith(v1.RestartPolicyAlways, nil)
	if SandboxHash(plain) != SandboxHash(debug) || ContainerHash(&plain.Spec.Containers[0]) != ContainerHash(&debug.Spec.Containers[0]) {
		t.Error("an ephemeral container changes the sandbox's or the app's hash")
	}
}

// TestFinishedPodStopsEphemeralContainer: a pod whose apps are done for
// good stops a running ephemeral container with its sandbox, and starts
// none.
func TestFinishedPodStopsEphemeralContainer(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, nil, "a")
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img:1"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "late", Image: "img:1"}},
	}
	st := newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateExited, 0).
		container("s", "debug", 0, engine.StateRunning, 0).build()
	for _, c := range st.Containers {
		if c.Name == "debug" {
			c.Type = engine.ContainerTypeEphemeral
		}
	}
	a := computePodActions(pod, st, newBackoff(testclock.NewFakeClock(t0)), nil)
	if !a.StopSandbox || len(a.StartEphemeral) != 0 || !eq(killNames(a.Kill), []string{"debug-0"}) {
		t.Errorf("stop sandbox %v, start %v, kill %v; want the sandbox and debug stopped, nothing started",
			a.StopSandbox, names(a.StartEphemeral), killNames(a.Kill))
	}
}
