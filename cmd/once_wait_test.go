package cmd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// TestWaitForNeedsConvergedPods: a pod whose latest sandbox and containers
// run, but with an older sandbox running too (a killed podrun's start that
// completed late), shows every container running in its status, which
// shows only the latest attempt of each; `once` must not report success
// until the older sandbox is stopped. Here its stop fails twice: the wait
// goes on through the runner's error back-off, and ends once it is
// stopped.
func TestWaitForNeedsConvergedPods(t *testing.T) {
	fake := enginetest.NewFake("node1")
	fake.AddImage("img:1")
	fake.AddImage("pause:1")
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "u1", "p-node1", "default"
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers = []v1.Container{{Name: "a", Image: "img:1"}, {Name: "b", Image: "img:1"}}

	ctx := context.Background()
	sbCfg := func(attempt int) *engine.SandboxConfig {
		return &engine.SandboxConfig{Pod: engine.PodRef{UID: "u1", Name: pod.Name, Namespace: pod.Namespace},
			Attempt: attempt, Hash: runner.SandboxHash(pod), Image: "pause:1"}
	}
	older, err := fake.RunSandbox(ctx, sbCfg(0))
	if err != nil {
		t.Fatal(err)
	}
	latest, err := fake.RunSandbox(ctx, sbCfg(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		id, err := fake.CreateContainer(ctx, latest, sbCfg(1), &engine.ContainerConfig{Name: c.Name,
			Type: engine.ContainerTypeApp, Attempt: 1, Hash: runner.ContainerHash(c), ResourcesHash: runner.ResourcesHash(c),
			Image: c.Image})
		if err != nil {
			t.Fatal(err)
		}
		if err := fake.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// The first two stops fail: the runner tries again after 1 s, then
	// after 2 s more.
	fake.FailNext("StopSandbox", errors.New("engine busy"))
	fake.FailNext("StopSandbox", errors.New("engine busy"))

	r := runner.New(runner.Config{Runtime: fake, RuntimeName: "fake", NodeName: "node1", RootDir: t.TempDir(),
		InfraImage: "pause:1", RelistPeriod: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	updates := make(chan runner.PodUpdate, 1)
	go func() {
		defer close(done)
		r.Run(runCtx, updates)
	}()
	defer func() { stop(); <-done }()
	updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}

	pods, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 1500*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "must be stopped") {
		t.Fatalf("wait while the older sandbox still runs: %v, want a time-out that says why", err)
	}
	if met, _ := conditionMet(pods, waitRunning); !met {
		t.Fatalf("the status does not show every container running: %+v", pods[0].Status)
	}

	if _, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	sbs, err := fake.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if running := sb.State == engine.StateRunning; running != (sb.ID == latest) {
			t.Errorf("sandbox %.12s (attempt %d) is %s once the wait ended; want only the latest running (older: %.12s)",
				sb.ID, sb.Attempt, sb.State, older)
		}
	}
}
