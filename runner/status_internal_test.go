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
