package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// listRecorder is the fake, recording the pod each ListPodObjects asked for
// ("" for every pod).
type listRecorder struct {
	*enginetest.Fake
	mu    sync.Mutex
	lists map[string]int
}

func (l *listRecorder) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	l.mu.Lock()
	l.lists[uid]++
	l.mu.Unlock()
	return l.Fake.ListPodObjects(ctx, uid)
}

func (l *listRecorder) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lists
	l.lists = map[string]int{}
	return out
}

// TestEventCostsOnePodNotTheNode: with many pods running, a container that
// dies is restarted from lists of its own pod alone; no list of the whole
// node is made for it (the periodic relist is off here).
func TestEventCostsOnePodNotTheNode(t *testing.T) {
	fake := newFake(t)
	h, rec := runPodsRecordingLists(t, fake, 30, nil)
	victim := h.containers("u7")[0]
	rec.take()
	fake.ResetCalls()

	if err := fake.Exit(victim.ID, 1); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("u7", "a restart", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	// Two looks at u7: the event's, and the one after the restart that
	// shows it running (the status waited for).
	lists := rec.take()
	for uid, k := range lists {
		if uid != "u7" {
			t.Errorf("%d lists of %q for an event of u7; want only lists of u7", k, uid)
		}
	}
	if lists["u7"] != 2 {
		t.Errorf("%d lists of u7 to restart one container; want 2", lists["u7"])
	}
	for _, m := range []string{"ListSandboxes", "ListContainers"} {
		if k := fake.Calls(m); k != 0 {
			t.Errorf("%d calls of %s for one event; want none", k, m)
		}
	}
}

// TestWithoutPodListerStillConverges: a runtime that cannot list one pod
// gets relists instead: a look at a pod is a list of every sandbox and
// container of the node.
func TestWithoutPodListerStillConverges(t *testing.T) {
	fake := newFake(t)
	var rt engine.Runtime = plainRuntime{fake, dieEvents{fake}}
	if _, ok := rt.(engine.PodObjectLister); ok {
		t.Fatal("plainRuntime lists one pod: the test would not test what it says")
	}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	victim := h.containers("u1")[0] // a call of ListContainers: before the count
	fake.ResetCalls()
	if err := fake.Exit(victim.ID, 1); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("u1", "a restart", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	// The calls that reach the fake through plainRuntime: two relists
	// (the event's look, and the one after the restart that shows it
	// running), and the restart.
	for m, want := range map[string]int{"ListSandboxes": 2, "ListContainers": 2, "CreateContainer": 1, "StartContainer": 1} {
		if k := fake.Calls(m); k != want {
			t.Errorf("%d calls of %s to restart a container; want %d", k, m, want)
		}
	}
}

// plainRuntime hides every optional ability of the fake but events: only
// the methods of the embedded interfaces are promoted.
type plainRuntime struct {
	engine.Runtime
	engine.EventSource
}

// TestResyncListsTheNodeOnce: the periodic resync of every pod costs one
// list of the node, not a list of each pod.
func TestResyncListsTheNodeOnce(t *testing.T) {
	fake := newFake(t)
	const resync = 300 * time.Millisecond
	h, rec := runPodsRecordingLists(t, fake, 20, func(c *runner.Config) {
		c.SyncFrequency = resync
	})
	rec.take()
	total := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, k := range rec.lists {
			n += k
		}
		return n
	}
	for i := 1; i <= 3; i++ {
		h.step(resync)
		waitUntil(t, fmt.Sprintf("the lists of resync %d", i), func() bool { return total() >= i })
	}
	lists := rec.take()
	for uid, k := range lists {
		if uid != "" {
			t.Errorf("%d lists of pod %s in three resyncs; want lists of the node only", k, uid)
		}
	}
	if lists[""] != 3 {
		t.Errorf("%d lists of the node in three resyncs; want 3", lists[""])
	}
}

// runPodsRecordingLists starts the runner on fake with the periodic relist
// and housekeeping off, and its die events alone (dieEvents), brings up n
// one-container pods (u0..u<n-1>) and returns once all run, with the
// recorder of the lists made.
func runPodsRecordingLists(t *testing.T, fake *enginetest.Fake, n int, configure func(*runner.Config)) (*harness, *listRecorder) {
	t.Helper()
	rec := &listRecorder{Fake: fake, lists: map[string]int{}}
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = withEvents{rec, rec, dieEvents{fake}}
		c.RelistPeriod = time.Hour
		c.HousekeepingPeriod = time.Hour
		if configure != nil {
			configure(c)
		}
	})
	var pods []*v1.Pod
	for i := 0; i < n; i++ {
		pods = append(pods, newPod(fmt.Sprintf("u%d", i), fmt.Sprintf("p%d-node1", i), v1.RestartPolicyAlways,
			map[string][]string{"app": {"run"}}))
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: pods}
	for i := 0; i < n; i++ {
		h.waitStatus(fmt.Sprintf("u%d", i), "running", allRunning)
	}
	return h, rec
}

// TestBringUpListsEachPodNotTheNode: bringing up many pods lists each new
// pod alone (for its sandbox's address, among others), never every
// sandbox of the node per pod, which would make a bring-up O(pods^2).
func TestBringUpListsEachPodNotTheNode(t *testing.T) {
	fake := newFake(t)
	const n = 20
	_, rec := runPodsRecordingLists(t, fake, n, nil)
	if k := fake.Calls("ListSandboxes"); k != 0 {
		t.Errorf("%d lists of every sandbox to bring up %d pods; want none", k, n)
	}
	lists := rec.take()
	if lists[""] > 2 {
		t.Errorf("%d lists of the node to bring up %d pods (the relist is off); want at most the first", lists[""], n)
	}
	for i := 0; i < n; i++ {
		if uid := fmt.Sprintf("u%d", i); lists[uid] == 0 {
			t.Errorf("pod %s was never listed alone", uid)
		}
	}
}

// TestExitWhileEventsAreCutIsNoticed: while the runtime's events flow the
// relist's period grows; when the stream breaks it is short again at once,
// so a container that exits unreported is restarted within a second of
// the clock, not at the end of the long period grown before.
func TestExitWhileEventsAreCutIsNoticed(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) {
		c.RelistPeriod, c.RelistMaxPeriod, c.SyncFrequency = time.Second, time.Hour, time.Hour
	})
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	// Relists that find nothing new: 1 s, 2 s, 4 s, 8 s; then 16 s.
	lists := calls(fake, "ListPodObjects")
	for d := time.Second; d <= 8*time.Second; d *= 2 {
		// Idle: no timer but the relist's (made again after each relist).
		waitUntil(t, "the relist's timer", func() bool { return h.timers() == 0 })
		n := lists()
		h.step(d)
		waitUntil(t, fmt.Sprintf("the relist after %s", d), func() bool { return lists() > n })
	}

	fake.CutEvents()
	victim := h.containers("u1")[0]
	if err := fake.Exit(victim.ID, 1); err != nil { // no event tells
		t.Fatal(err)
	}
	restarted := func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	}
	isRestarted := func() bool {
		p, _ := h.r.Pod("u1")
		return restarted(p)
	}
	// The stream's loss is taken in by the runner when it is: a step of
	// the clock before that goes to the relist's 16 s wait and is lost.
	// So steps of 1 s, each given up to 2 s of real time to show the
	// restart, as long as they add up to less than the 16 s.
	for step := 1; !isRestarted(); step++ {
		if step > 8 {
			t.Fatal("the exit was not noticed within 8 s of the clock after the events were cut (the relist waited 16 s)")
		}
		h.step(time.Second)
		settled := time.After(2 * time.Second)
	wait:
		for {
			changed := h.r.Changed()
			if isRestarted() {
				break
			}
			select {
			case <-changed:
			case <-settled:
				break wait
			}
		}
	}
}

// TestEventOfAnUnknownPodIsSeenAtOnce: a pod no worker keeps that appears
// while events flow (another podrun made it) is relisted on its event, so
// housekeeping removes it at its next round, not after the relist's long
// period.
func TestEventOfAnUnknownPodIsSeenAtOnce(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) {
		c.RelistPeriod, c.RelistMaxPeriod, c.SyncFrequency = time.Hour, time.Hour, time.Hour
		c.SourcesReady = func() bool { return true }
	})
	ctx := context.Background()
	if _, err := fake.RunSandbox(ctx, &engine.SandboxConfig{Pod: engine.PodRef{UID: "u9", Name: "stray-node1", Namespace: "default"},
		Image: "pause:1"}); err != nil {
		t.Fatal(err)
	}
	gone := func() bool {
		sbs, err := fake.ListSandboxes(ctx)
		return err == nil && len(sbs) == 0
	}
	// Rounds of housekeeping until it is gone: at most 10 s of polls, a
	// few minutes of the clock; the relist's period is an hour.
	waitUntil(t, "the unknown pod's removal", func() bool {
		if gone() {
			return true
		}
		h.step(housekeepingPeriod)
		return false
	})
}
