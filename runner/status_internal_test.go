package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// TestLastTerminationOnlyOfARunThatEnded: while an edit's successor is
// made and its predecessor still stops, the successor's status has no
// last termination (the older run has not ended); once the older run has
// exited, it is the last termination.
func TestLastTerminationOnlyOfARunThatEnded(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	old := &engine.Container{ID: "old", Name: "a", Attempt: 0, SandboxID: "sb", State: engine.StateRunning, StartedAt: t0}
	successor := &engine.Container{ID: "new", Name: "a", Attempt: 1, SandboxID: "sb", State: engine.StateCreated}
	st := &podState{Sandboxes: []*engine.Sandbox{{ID: "sb", State: engine.StateRunning}}, Containers: []*engine.Container{successor, old}}

	cs := containerStatus(statusInput{Pod: pod, State: st, Now: t0}, &pod.Spec.Containers[0], "sb")
	if cs.State.Waiting == nil || cs.LastTerminationState.Terminated != nil {
		t.Fatalf("predecessor still running: state %+v, last termination %+v; want waiting, none", cs.State, cs.LastTerminationState)
	}

	old.State, old.ExitCode, old.FinishedAt = engine.StateExited, 137, t0.Add(8*time.Second)
	cs = containerStatus(statusInput{Pod: pod, State: st, Now: t0}, &pod.Spec.Containers[0], "sb")
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Fatalf("predecessor exited: last termination %+v, want its exit code 137", term)
	}
}

// TestLastTerminationOfAFinishedContainer: as the kubelet's status (the
// second newest run is the last termination, whatever the newest's state),
// a container that failed and then succeeded under OnFailure shows its
// success as its state and the failure as its last termination, which
// `kubectl logs --previous` reads.
func TestLastTerminationOfAFinishedContainer(t *testing.T) {
	pod := testPod(v1.RestartPolicyOnFailure, nil, "a")
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).
		container("sb", "a", 0, engine.StateExited, 1).container("sb", "a", 1, engine.StateExited, 0).build()
	cs := containerStatus(statusInput{Pod: pod, State: st, Now: t0, Runtime: "docker"}, &pod.Spec.Containers[0], "sb")
	if term := cs.State.Terminated; term == nil || term.ExitCode != 0 {
		t.Fatalf("state %+v, want terminated with exit 0", cs.State)
	}
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 1 || term.ContainerID != "docker://a-0" {
		t.Fatalf("last termination %+v, want the failed run a-0, exit 1", cs.LastTerminationState)
	}
}
