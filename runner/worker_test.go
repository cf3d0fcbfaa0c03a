package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/runner/runtimetest"
)

// TestHeldStartDoesNotSpin: while a container's start waits out its
// back-off (here a pull that fails), the pod's worker does not sync in a
// loop: it waits for the back-off. (It used to relist as fast as the
// runtime answered: 140,000 lists in 2 s with the fake.)
func TestHeldStartDoesNotSpin(t *testing.T) {
	fake := newFake(t)
	rec := &listRecorder{Fake: fake, lists: map[string]int{}}
	fake.SetPullError("missing:1", errors.New("no such registry"))
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = rec
		c.RelistPeriod = time.Hour
	})
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	pod.Spec.Containers[0].Image = "missing:1"
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "ErrImagePull", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	rec.take()
	time.Sleep(2 * time.Second)
	if n := rec.take()["u1"]; n > 10 {
		t.Errorf("%d lists of the pod in 2 s while its start is held back; want a handful", n)
	}
	if n := fake.Calls("PullImage"); n > 2 {
		t.Errorf("%d pulls in 2 s; want the back-off to hold them", n)
	}
}

// TestFailingSandboxBacksOff: a sandbox that cannot start (its host port is
// taken) is tried again with back-off, not in a loop (each try is a new
// sandbox), and the pod comes up once the port is free.
func TestFailingSandboxBacksOff(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	withPort := func(uid, name string) *v1.Pod {
		p := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		return p
	}
	holder := withPort("u1", "holder-node1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{holder}}
	h.waitStatus("u1", "running", allRunning)

	fake.ResetCalls()
	taker := withPort("u2", "taker-node1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{taker}}
	time.Sleep(3500 * time.Millisecond)
	// Tries at 0, +1 s, +2 s (then +4 s): three or four in 3.5 s.
	if n := fake.Calls("RunSandbox"); n < 2 || n > 4 {
		t.Errorf("%d sandbox runs in 3.5 s of a sandbox that cannot start; want 2..4 (back-off)", n)
	}

	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{holder}}
	start := time.Now()
	deadline := time.After(20 * time.Second)
	for {
		changed := h.r.Changed()
		if p, ok := h.r.Pod("u2"); ok && allRunning(p) {
			break
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			p, _ := h.r.Pod("u2")
			t.Fatalf("the pod did not come up once the port was free: %+v", p.Status)
		}
	}
	t.Logf("up %s after the port was freed", time.Since(start).Round(100*time.Millisecond))
}

// outage is the fake with an engine that can be made to fail: its calls
// that change things (down) or all its calls (gone).
type outage struct {
	*runtimetest.Fake
	mu         sync.Mutex
	down, gone bool
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
		return fmt.Errorf("engine shutting down: %w", runner.ErrUnavailable)
	}
	return nil
}

func (o *outage) RunSandbox(ctx context.Context, cfg *runner.SandboxConfig) (string, error) {
	if err := o.fail(true); err != nil {
		return "", err
	}
	return o.Fake.RunSandbox(ctx, cfg)
}

func (o *outage) StartContainer(ctx context.Context, id string) error {
	if err := o.fail(true); err != nil {
		return err
	}
	return o.Fake.StartContainer(ctx, id)
}

func (o *outage) ListPodObjects(ctx context.Context, uid string) ([]*runner.Sandbox, []*runner.Container, error) {
	if err := o.fail(false); err != nil {
		return nil, nil, err
	}
	return o.Fake.ListPodObjects(ctx, uid)
}

// TestRuntimeBackEndsBackOff: syncs that failed while the engine was going
// away back off, but once it answers again every pod is synced at once,
// not at the end of its back-off.
func TestRuntimeBackEndsBackOff(t *testing.T) {
	fake := newFake(t)
	o := &outage{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = o })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]

	// The engine stops starting things: the restart of the dead
	// container fails, again and again, backing off 1, 2, 4 s...
	o.set(true, false)
	if err := fake.Exit(first.ID, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	// Then it is gone for a moment, and back.
	o.set(true, true)
	time.Sleep(500 * time.Millisecond)
	o.set(false, false)
	back := time.Now()
	h.waitStatus("u1", "the restart", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Running != nil && cs[0].RestartCount == 1
	})
	if took := time.Since(back); took > 2*time.Second {
		t.Errorf("restarted %s after the engine came back; want at once, not at the end of the back-off", took.Round(10*time.Millisecond))
	}
}
