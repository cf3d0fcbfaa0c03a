package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// TestEarlyKillsOnlyInTheCurrentSandbox: of the kills of a container
// being started, only one in the pod's current sandbox is early; one in an
// older sandbox is left to stop before that sandbox does, and with a new
// sandbox or a pod being killed nothing is early.
func TestEarlyKillsOnlyInTheCurrentSandbox(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	current := &engine.Container{ID: "cur", Name: "a", SandboxID: "new", State: engine.StateRunning}
	older := &engine.Container{ID: "old", Name: "a", SandboxID: "old", State: engine.StateRunning}
	created := &engine.Container{ID: "made", Name: "a", SandboxID: "new", State: engine.StateCreated, Attempt: 1}
	kills := []killTarget{{Container: older, Reason: "container of an older sandbox"}, {Container: current, Reason: "superseded by a newer attempt"}}

	a := &podActions{SandboxID: "new", Kill: kills, StartCreated: []*engine.Container{created}}
	now, early := splitKills(a)
	if len(now) != 1 || now[0].Container != older {
		t.Errorf("kills to do now: %+v, want the older sandbox's", now)
	}
	if len(early) != 1 || early[0].Container != current {
		t.Errorf("early kills: %+v, want the current sandbox's", early)
	}

	for _, a := range []*podActions{
		{SandboxID: "new", Kill: kills, StartCreated: []*engine.Container{created}, KillPod: true},
		{SandboxID: "new", Kill: kills, StartApps: []*v1.Container{&pod.Spec.Containers[0]}, CreateSandbox: true},
	} {
		if now, early := splitKills(a); len(now) != 2 || early != nil {
			t.Errorf("KillPod %v, CreateSandbox %v: %d kills now and %d early, want all now", a.KillPod, a.CreateSandbox, len(now), len(early))
		}
	}
}
