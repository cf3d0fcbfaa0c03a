package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// podLister is a runtime that lists one pod at a time: the fake, or a
// wrapper of it.
type podLister interface {
	engine.Runtime
	engine.PodObjectLister
}

// quiet is a runtime without events, nor any optional ability but lists
// of one pod. A runner on it (startQuiet) learns of a change only from its
// own looks, so each wake of a pod worker is one the test makes: an update,
// or a step of the clock to the end of the worker's wait.
type quiet struct {
	engine.Runtime
	engine.PodObjectLister
}

// startQuiet starts a runner on rt, quiet, with its relist, resync and
// housekeeping an hour apart: the tests that use it step the clock by
// seconds.
func startQuiet(t *testing.T, fake *enginetest.Fake, rt podLister, tune func(*runner.Config)) *harness {
	t.Helper()
	return start(t, fake, func(c *runner.Config) {
		c.Runtime = quiet{rt, rt}
		c.RelistPeriod, c.SyncFrequency, c.HousekeepingPeriod = time.Hour, time.Hour, time.Hour
		if tune != nil {
			tune(c)
		}
	})
}

// withEvents is a runtime that lists one pod at a time, with the events
// of EventSource (dieEvents).
type withEvents struct {
	engine.Runtime
	engine.PodObjectLister
	engine.EventSource
}

// dieEvents passes on the die events of src alone. A bring-up's start
// events still arrive after its pods show running, and wake their workers
// whenever they do; a die event comes only of a container the test kills.
type dieEvents struct{ src engine.EventSource }

func (d dieEvents) Events(ctx context.Context) <-chan engine.Event {
	in := d.src.Events(ctx)
	out := make(chan engine.Event)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Action != "die" && !ev.Resync {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// waitIdle waits until count() is n and one timer waits on the clock: in a
// quiet runner where one pod waits to try again (the others wait for a
// wake), that pod's worker is waiting.
func (h *harness) waitIdle(what string, count func() int, n int) {
	h.t.Helper()
	waitUntil(h.t, fmt.Sprintf("%d %s, then a wait", n, what), func() bool {
		return count() == n && h.timers() == 1
	})
}

// expectWait steps the clock to the end of the one pending timer, a pod
// worker's wait, which must end d from now: not a millisecond sooner, nor
// later. A worker whose wait ends looks at its pod (a list of the pod in
// the fake).
func (h *harness) expectWait(d time.Duration) {
	h.t.Helper()
	looks := calls(h.fake, "ListPodObjects")
	n := looks()
	h.step(d - time.Millisecond)
	// The timers first: a worker whose wait ended looks at its pod before
	// it waits again.
	if timers := h.timers(); timers != 1 || looks() != n {
		h.t.Fatalf("the wait of %s ended before it (%d timers, %d looks)", d, timers, looks()-n)
	}
	h.step(time.Millisecond)
	waitUntil(h.t, fmt.Sprintf("the end of a wait of %s", d), func() bool { return looks() > n })
}

func calls(fake *enginetest.Fake, method string) func() int {
	return func() int { return fake.Calls(method) }
}

// TestHeldStartDoesNotSpin: while a container's start waits out its
// back-off (here a pull that fails), the pod's worker does not sync in a
// loop: it waits, looking at the pod only when the failed pull is to show
// as ImagePullBackOff (2 s) and when its back-off ends (10 s). (It used to
// relist as fast as the runtime answered: 140,000 lists in 2 s with the
// fake.)
func TestHeldStartDoesNotSpin(t *testing.T) {
	fake := newFake(t)
	rec := &listRecorder{Fake: fake, lists: map[string]int{}}
	fake.SetPullError("missing:1", errors.New("no such registry"))
	h := startQuiet(t, fake, rec, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	pod.Spec.Containers[0].Image = "missing:1"
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	waiting := func(reason string) func(p *v1.Pod) bool {
		return func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reason
		}
	}
	h.waitStatus("u1", "ErrImagePull", waiting("ErrImagePull"))
	h.waitIdle("pulls", calls(fake, "PullImage"), 1)
	rec.take()

	// Nothing but the clock wakes the worker. When the pull error is to
	// show as ImagePullBackOff it looks at the pod: a sync whose start is
	// held back, then one more look that shows nothing came of it.
	h.expectWait(2 * time.Second)
	h.waitStatus("u1", "ImagePullBackOff", waiting("ImagePullBackOff"))
	h.waitIdle("pulls", calls(fake, "PullImage"), 1)
	if lists := rec.take(); lists["u1"] != 2 || len(lists) != 1 {
		t.Errorf("lists %v to show ImagePullBackOff; want two of u1", lists)
	}
	// When the back-off ends (10 s after the pull), it looks once and
	// pulls again, once.
	h.expectWait(8 * time.Second)
	h.waitStatus("u1", "ErrImagePull again", waiting("ErrImagePull"))
	h.waitIdle("pulls", calls(fake, "PullImage"), 2)
	if lists := rec.take(); lists["u1"] != 1 || len(lists) != 1 {
		t.Errorf("lists %v to pull again; want one of u1", lists)
	}
}

// TestFailingSandboxBacksOff: a sandbox that cannot start (its host port is
// taken, by a sandbox the runner does not know, so that its admission
// cannot tell) is tried again with back-off, not in a loop (each try is a
// new sandbox), and the pod comes up at the first try after the port is
// free.
func TestFailingSandboxBacksOff(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	port := engine.PortMapping{Protocol: "TCP", ContainerPort: 80, HostPort: 8080}
	holder, err := fake.RunSandbox(context.Background(), &engine.SandboxConfig{
		Pod: engine.PodRef{UID: "u1", Name: "holder-node1", Namespace: "default"}, Image: "pause:1", Ports: []engine.PortMapping{port}})
	if err != nil {
		t.Fatal(err)
	}

	fake.ResetCalls()
	taker := newPod("u2", "taker-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	taker.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{taker}}
	runs := calls(fake, "RunSandbox")
	h.waitIdle("sandbox runs", runs, 1)
	// Tries at 0, +1 s, +2 s, +4 s: one each.
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		h.expectWait(d)
		h.waitIdle("sandbox runs", runs, i+2)
	}

	if err := fake.RemoveSandbox(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	if p, _ := h.r.Pod("u2"); allRunning(p) {
		t.Fatal("the pod came up before the end of its back-off")
	}
	h.expectWait(8 * time.Second)
	h.waitStatus("u2", "running once the port was free", allRunning)
	if n := runs(); n != 5 {
		t.Errorf("%d sandbox runs; want 5 (four that failed, one that did not)", n)
	}
}

// outage is the fake with an engine that can be made to fail: its calls
// that change things (down) or all its calls (gone).
type outage struct {
	*enginetest.Fake
	mu         sync.Mutex
	down, gone bool
	// starts counts StartContainer calls, failed or not; failedLists the
	// lists that failed.
	starts, failedLists atomic.Int32
}

func (o *outage) set(down, gone bool) {
	o.mu.Lock()
	o.down, o.gone = down, gone
	o.mu.Unlock()
}

func (o *outage) fail(mutates bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone || (mutates && o.down) {
		return fmt.Errorf("engine shutting down: %w", engine.ErrUnavailable)
	}
	return nil
}

func (o *outage) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	if err := o.fail(true); err != nil {
		return "", err
	}
	return o.Fake.RunSandbox(ctx, cfg)
}

func (o *outage) StartContainer(ctx context.Context, id string) error {
	o.starts.Add(1)
	if err := o.fail(true); err != nil {
		return err
	}
	return o.Fake.StartContainer(ctx, id)
}

func (o *outage) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	if err := o.fail(false); err != nil {
		o.failedLists.Add(1)
		return nil, nil, err
	}
	return o.Fake.ListPodObjects(ctx, uid)
}

// TestRuntimeBackEndsBackOff: a sync that failed while the engine was
// going away backs off, but once the engine answers again every pod is
// synced at once, not at the end of its back-off.
func TestRuntimeBackEndsBackOff(t *testing.T) {
	fake := newFake(t)
	o := &outage{Fake: fake}
	// The relist notices that the engine is back: the first is when it
	// is gone, the second when it is back, well within the back-off. The
	// worker learns of the exit by its event.
	const relist = 3 * time.Second
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = withEvents{o, o, dieEvents{fake}}
		c.RelistPeriod, c.SyncFrequency, c.HousekeepingPeriod = relist, time.Hour, time.Hour
	})
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	starts := func() int { return int(o.starts.Load()) }

	// The engine stops starting things: the restart of the dead container
	// fails (the second start), and the worker backs off: that of a
	// failed start, 10 s.
	o.set(true, false)
	if err := fake.Exit(first.ID, 1); err != nil {
		t.Fatal(err)
	}
	h.waitIdle("starts", starts, 2)
	backOffEnds := h.clk.Now().Add(10 * time.Second)
	h.step(relist - time.Millisecond)
	if timers, n := h.timers(), starts(); n != 2 || timers != 1 {
		t.Fatalf("%d starts, %d timers %s after a start failed; want no other try yet", n, timers, relist)
	}

	// Then the engine is gone for a relist, and back for the next.
	o.set(true, true)
	h.step(time.Millisecond)
	waitUntil(t, "a relist that fails", func() bool { return o.failedLists.Load() > 0 })
	// The relist's timer is made again after the relist: a step before
	// would be lost to it, and the relist that sees the engine back would
	// never come.
	waitUntil(t, "the relist's timer again", func() bool { return h.timers() == 1 })
	o.set(false, false)
	h.step(relist)
	if !h.clk.Now().Before(backOffEnds) {
		t.Fatal("the test stepped to the end of the back-off")
	}
	h.waitStatus("u1", "the restart, before the back-off ends", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Running != nil && cs[0].RestartCount == 1
	})
	if n := starts(); n != 3 {
		t.Errorf("%d starts; want 3 (the bring-up's, the one that failed, the one once back)", n)
	}
}
