package runner_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// callRecorder is the fake engine with its stops and removals recorded in
// the order they were made, by object ID.
type callRecorder struct {
	*enginetest.Fake
	mu    sync.Mutex
	calls []string // "<method> <id>"
}

func (c *callRecorder) record(method, id string) {
	c.mu.Lock()
	c.calls = append(c.calls, method+" "+id)
	c.mu.Unlock()
}

func (c *callRecorder) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	c.record("StopContainer", id)
	return c.Fake.StopContainer(ctx, id, grace)
}

func (c *callRecorder) RemoveContainer(ctx context.Context, id string) error {
	c.record("RemoveContainer", id)
	return c.Fake.RemoveContainer(ctx, id)
}

func (c *callRecorder) RemoveSandbox(ctx context.Context, id string) error {
	c.record("RemoveSandbox", id)
	return c.Fake.RemoveSandbox(ctx, id)
}

// index is where "<method> <id>" was recorded; -1 when it was not.
func (c *callRecorder) index(method, id string) int {
	return slices.Index(c.calls, method+" "+id)
}

// A teardown stops a container before its removal only where the stop is
// more than a kill (a grace period, a preStop hook); a container with
// neither is removed at once, its forced removal killing it. Either way
// the app containers go before their sandbox, and every pod is found by
// one list without a look at each container.
func TestTeardownStopsOnlyWhatNeedsAGracefulStop(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	zero := newPod("u0", "zero-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	var noGrace int64
	zero.Spec.TerminationGracePeriodSeconds = &noGrace
	graceful := newPod("u1", "graceful-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	hooked := newPod("u2", "hooked-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	hooked.Spec.TerminationGracePeriodSeconds = &noGrace
	hooked.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	pods := []*v1.Pod{zero, graceful, hooked}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: pods}
	for _, p := range pods {
		h.waitStatus(string(p.UID), "running", allRunning)
	}
	h.stop()

	sbs, cs, err := fake.ListPodObjects(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	sandboxOf, ids := map[string]string{}, map[string]string{} // by pod UID; by pod UID/container
	for _, sb := range sbs {
		sandboxOf[sb.Pod.UID] = sb.ID
	}
	for _, c := range cs {
		ids[c.Pod.UID+"/"+c.Name] = c.ID
	}
	fake.ResetCalls()
	rec := &callRecorder{Fake: fake}
	r := runner.New(runner.Config{Runtime: rec, RuntimeName: "fake", NodeName: fake.NodeName(), RootDir: t.TempDir(),
		Clock: clockOf(t, fake), Log: slog.New(slog.NewTextHandler(testLogOut(), nil)), PodCgroups: runner.NewPodCgroups("", 0)})
	var targets []runner.TeardownTarget
	for _, p := range pods {
		targets = append(targets, runner.TeardownTarget{UID: string(p.UID), Name: p.Name, Pod: p})
	}
	r.TeardownPods(context.Background(), targets, -1, func(tt runner.TeardownTarget, err error) {
		if err != nil {
			t.Errorf("teardown of %s: %v", tt.Name, err)
		}
	})

	if lists, full := fake.Calls("ListPodSummaries"), fake.Calls("ListContainers"); lists != 1 || full != 0 {
		t.Errorf("%d summary lists and %d full container lists, want 1 and 0", lists, full)
	}
	if sbs, cs, _ := fake.ListPodObjects(context.Background(), ""); len(sbs)+len(cs) != 0 {
		t.Errorf("left: %d sandboxes, %d containers", len(sbs), len(cs))
	}
	for _, p := range pods {
		uid := string(p.UID)
		needsStop := p != zero
		sbRemoved := rec.index("RemoveSandbox", sandboxOf[uid])
		if sbRemoved < 0 {
			t.Errorf("%s: sandbox not removed: %v", p.Name, rec.calls)
		}
		for _, c := range p.Spec.Containers {
			id := ids[uid+"/"+c.Name]
			stopped, removed := rec.index("StopContainer", id), rec.index("RemoveContainer", id)
			switch {
			case removed < 0 || removed > sbRemoved:
				t.Errorf("%s/%s: removed at %d, its sandbox at %d: want the container first (%v)", p.Name, c.Name, removed, sbRemoved, rec.calls)
			case needsStop && (stopped < 0 || stopped > removed):
				t.Errorf("%s/%s: stopped at %d, removed at %d: want a stop first (%v)", p.Name, c.Name, stopped, removed, rec.calls)
			case !needsStop && stopped >= 0:
				t.Errorf("%s/%s: stopped before its removal, with no grace period and no hook (%v)", p.Name, c.Name, rec.calls)
			}
		}
	}
}
