package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// TestInitContainerReadyWhenDone: as the kubelet's prober manager sets it,
// a (non-sidecar) init container is ready once it exited 0, and not while
// it runs or after it failed; a sidecar is ready while it runs (no
// readiness probe). Kubernetes' node conformance checks it.
func TestInitContainerReadyWhenDone(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyNever, []string{"done", "failed", "running", "sidecar"}, "app")
	pod.Spec.InitContainers[3].RestartPolicy = &always
	st := &podState{
		Sandboxes: []*engine.Sandbox{{ID: "sb", State: engine.StateRunning, CreatedAt: t0}},
		Containers: []*engine.Container{
			{ID: "c1", SandboxID: "sb", Name: "done", Type: engine.ContainerTypeInit, State: engine.StateExited, ExitCode: 0},
			{ID: "c2", SandboxID: "sb", Name: "failed", Type: engine.ContainerTypeInit, State: engine.StateExited, ExitCode: 1},
			{ID: "c3", SandboxID: "sb", Name: "running", Type: engine.ContainerTypeInit, State: engine.StateRunning},
			{ID: "c4", SandboxID: "sb", Name: "sidecar", Type: engine.ContainerTypeInit, State: engine.StateRunning},
		},
	}
	s := computePodStatus(statusInput{Pod: pod, State: st, Now: t0})
	want := map[string]bool{"done": true, "failed": false, "running": false, "sidecar": true}
	for _, cs := range s.InitContainerStatuses {
		if cs.Ready != want[cs.Name] {
			t.Errorf("init container %s: ready %v, want %v", cs.Name, cs.Ready, want[cs.Name])
		}
	}
	if len(s.InitContainerStatuses) != len(want) {
		t.Errorf("%d init container statuses, want %d", len(s.InitContainerStatuses), len(want))
	}
}

// TestWaitingReasonBeforeFirstRun: as the kubelet's default, a container
// that has not run yet waits with PodInitializing in a pod with init
// containers (init and app containers alike), else ContainerCreating.
func TestWaitingReasonBeforeFirstRun(t *testing.T) {
	for _, c := range []struct {
		inits []string
		want  string
	}{{[]string{"init"}, "PodInitializing"}, {nil, "ContainerCreating"}} {
		pod := testPod(v1.RestartPolicyAlways, c.inits, "app")
		s := computePodStatus(statusInput{Pod: pod, State: &podState{}, Now: t0})
		for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
			if w := cs.State.Waiting; w == nil || w.Reason != c.want {
				t.Errorf("inits %v: %s waits with %+v, want %s", c.inits, cs.Name, w, c.want)
			}
		}
	}
}

// TestPodNotSetUpWaitsWithTheDefaultReason: a pod that cannot be set up
// yet (its service account token not given) shows the kubelet's default
// waiting reason, PodInitializing in a pod with init containers (for
// every container), with why as the message; never ContainerCreating
// there (the InitContainer conformance specs watch every update).
func TestPodNotSetUpWaitsWithTheDefaultReason(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, []string{"init1", "init2"}, "run1")
	notSetUp := waiting{Reason: reasonContainerCreating, Message: `volume "kube-api-access-x1": no token yet`}
	errs := map[string]waiting{"init1": notSetUp, "init2": notSetUp, "run1": notSetUp}
	s := computePodStatus(statusInput{Pod: pod, State: &podState{}, Errors: errs, Now: t0})
	for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		if w := cs.State.Waiting; w == nil || w.Reason != "PodInitializing" || w.Message != notSetUp.Message {
			t.Errorf("%s waits with %+v, want PodInitializing with the error", cs.Name, w)
		}
	}
	pod.Spec.InitContainers = nil
	s = computePodStatus(statusInput{Pod: pod, State: &podState{}, Errors: errs, Now: t0})
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Errorf("without init containers run1 waits with %+v, want ContainerCreating", w)
	}
}

// TestInitContainerFailedNeverRestarts: the end state the InitContainer
// conformance spec expects of a RestartNever pod whose second init
// container failed: Failed (from the statuses alone, with no reason, as
// the kubelet's getPhase), Initialized False with the kubelet's reason and
// message, the app container still waiting as PodInitializing.
func TestInitContainerFailedNeverRestarts(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, []string{"init1", "init2"}, "run1")
	st := &podState{
		Sandboxes: []*engine.Sandbox{{ID: "sb", State: engine.StateRunning, CreatedAt: t0}},
		Containers: []*engine.Container{
			{ID: "c1", SandboxID: "sb", Name: "init1", Type: engine.ContainerTypeInit, State: engine.StateExited, ExitCode: 0},
			{ID: "c2", SandboxID: "sb", Name: "init2", Type: engine.ContainerTypeInit, State: engine.StateExited, ExitCode: 1},
		},
	}
	s := computePodStatus(statusInput{Pod: pod, State: st, Now: t0})
	if s.Phase != v1.PodFailed || s.Reason != "" {
		t.Errorf("phase %s reason %q, want Failed with no reason", s.Phase, s.Reason)
	}
	var init *v1.PodCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == v1.PodInitialized {
			init = &s.Conditions[i]
		}
	}
	if init == nil || init.Status != v1.ConditionFalse || init.Reason != "ContainersNotInitialized" ||
		init.Message != "containers with incomplete status: [init2]" {
		t.Errorf("Initialized = %+v", init)
	}
	if len(s.InitContainerStatuses) != 2 {
		t.Errorf("%d init container statuses, want 2", len(s.InitContainerStatuses))
	}
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
		t.Errorf("run1 waits with %+v, want PodInitializing", w)
	}
}
