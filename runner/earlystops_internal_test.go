package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// TestBeginStopsOnlyInTheCurrentSandbox: of the kills of a container
// being started, only one in the pod's current sandbox is begun early; one
// in an older sandbox is left to stop before that sandbox does, and with
// a new sandbox or a pod being killed nothing is begun early.
func TestBeginStopsOnlyInTheCurrentSandbox(t *testing.T) {
	r := New(Config{Runtime: enginetest.NewFake("node1"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	current := &engine.Container{ID: "cur", Name: "a", SandboxID: "new", State: engine.StateRunning}
	older := &engine.Container{ID: "old", Name: "a", SandboxID: "old", State: engine.StateRunning}
	created := &engine.Container{ID: "made", Name: "a", SandboxID: "new", State: engine.StateCreated, Attempt: 1}
	kills := []killTarget{{Container: older, Reason: "container of an older sandbox"}, {Container: current, Reason: "superseded by a newer attempt"}}

	a := &podActions{SandboxID: "new", Kill: kills, StartCreated: []*engine.Container{created}}
	now, early := r.beginStops(context.Background(), pod, "", a, 0)
	if len(now) != 1 || now[0].Container != older {
		t.Errorf("kills left to do now: %+v, want the older sandbox's", now)
	}
	if len(early["a"]) != 1 {
		t.Errorf("early stops of a: %d, want the current sandbox's one", len(early["a"]))
	}
	early.waitAll() // the fake knows no such containers: the errors do not matter here

	for _, a := range []*podActions{
		{SandboxID: "new", Kill: kills, StartCreated: []*engine.Container{created}, KillPod: true},
		{SandboxID: "new", Kill: kills, StartApps: []*v1.Container{&pod.Spec.Containers[0]}, CreateSandbox: true},
	} {
		if now, early := r.beginStops(context.Background(), pod, "", a, 0); len(now) != 2 || early != nil {
			t.Errorf("KillPod %v, CreateSandbox %v: %d kills now and %d names early, want all now", a.KillPod, a.CreateSandbox, len(now), len(early))
		}
	}
}
