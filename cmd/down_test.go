package cmd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// stopRecorder is the fake engine with every container stop recorded (its
// grace period, by container ID) and, when hold is above zero, held until
// hold stops are in flight at once: a teardown that stops pods one after
// the other never gets there, and its stops fail when holdTimeout ends.
type stopRecorder struct {
	*fakeEngine
	hold int

	mu          sync.Mutex
	graces      map[string]time.Duration
	inFlight    int
	maxInFlight int
	held        chan struct{} // closed when hold stops are in flight
}

// holdTimeout is how long a held stop waits for the others: the way out
// of a teardown that is not concurrent.
const holdTimeout = 10 * time.Second

func newStopRecorder(e *cmdEnv, hold int) *stopRecorder {
	return &stopRecorder{fakeEngine: e.eng, hold: hold, graces: map[string]time.Duration{}, held: make(chan struct{})}
}

func (s *stopRecorder) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	s.mu.Lock()
	s.graces[id] = grace
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	if s.inFlight == s.hold {
		close(s.held)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if s.hold > 0 {
		select {
		case <-s.held:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(holdTimeout):
			return fmt.Errorf("stop of %s held for %s: fewer than %d stops were in flight at once", id, holdTimeout, s.hold)
		}
	}
	return s.fakeEngine.StopContainer(ctx, id, grace)
}

// downWith runs `podrun down args...` against rt.
func downWith(e *cmdEnv, rt baseEngine, args ...string) error {
	e.t.Helper()
	var opts *downOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newDownCmd(g, func(_ context.Context, o *downOptions) error { opts = o; return nil })
	}, append([]string{"down"}, args...)...)
	opts.Engine = func(context.Context) (baseEngine, error) { return rt, nil }
	return downRun(context.Background(), opts)
}

// Pods are torn down together, as bring-up brings them up: every pod's
// stop is in flight at once (so grace periods overlap rather than add up),
// one per pod's container and no more, from one list of the runtime.
func TestDownTearsDownPodsTogether(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			const n = 6
			e := newCmdEnv(t)
			var paths []string
			for i := range n {
				paths = append(paths, e.write(fmt.Sprintf("p%d.yaml", i), webPod(fmt.Sprintf("p%d", i))))
			}
			if err := e.once(append(paths, "--timeout", "10s")...); err != nil {
				t.Fatal(err)
			}
			e.reset()
			e.fake.ResetCalls()
			rec := newStopRecorder(e, n)
			args := paths
			if all {
				args = []string{"--all"}
			}
			wantExit(t, "down", downWith(e, rec, args...), exitOK)
			if rec.maxInFlight != n {
				t.Errorf("%d stops in flight at most, want %d (one per pod)", rec.maxInFlight, n)
			}
			if got := strings.Count(e.out.String(), " removed\n"); got != n || e.sandboxes() != 0 {
				t.Errorf("%d pods reported removed, %d sandboxes left, want %d and 0:\n%s", got, e.sandboxes(), n, e.out)
			}
			// One list for all the pods (that finds them, with --all), not
			// one per pod, and without a look at each container.
			if got, full := e.fake.Calls("ListPodSummaries"), e.fake.Calls("ListContainers"); got != 1 || full != 0 {
				t.Errorf("%d lists and %d full container lists for %d pods, want 1 and 0", got, full, n)
			}
		})
	}
}

// down --all knows no spec: each pod is stopped within the grace period
// its sandbox recorded, zero included (not the 30 s default). A zero grace
// period needs no stop: the forced removal kills the container.
func TestDownAllUsesRecordedGrace(t *testing.T) {
	e := newCmdEnv(t)
	pod := func(name string, grace int) string {
		return strings.Replace(webPod(name), "terminationGracePeriodSeconds: 1", fmt.Sprintf("terminationGracePeriodSeconds: %d", grace), 1)
	}
	if err := e.once(e.write("zero.yaml", pod("zero", 0)), e.write("seven.yaml", pod("seven", 7)), "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{}
	for _, c := range e.containers("seven-node1") {
		want[c.ID] = 7 * time.Second
	}
	zero := e.containers("zero-node1")
	if len(zero) == 0 {
		t.Fatal("the zero-grace pod has no containers")
	}
	rec := newStopRecorder(e, 0)
	wantExit(t, "down --all", downWith(e, rec, "--all"), exitOK)
	if e.sandboxes() != 0 || len(e.containers("zero-node1")) != 0 || len(e.containers("seven-node1")) != 0 {
		t.Errorf("after down --all: %d sandboxes, containers %v, %v left", e.sandboxes(), e.containers("zero-node1"), e.containers("seven-node1"))
	}
	if len(rec.graces) != len(want) {
		t.Fatalf("stopped %v, want %v", rec.graces, want)
	}
	for id, grace := range want {
		if got, ok := rec.graces[id]; !ok || got != grace {
			t.Errorf("container %s stopped with grace %s (stopped: %v), want %s", id, got, ok, grace)
		}
	}
}

// `down` of a manifest whose metadata.uid is another pod's (static pod
// UIDs are predictable) removes nothing of that pod: it fails, naming
// both pods, and the other pod keeps running.
func TestDownLeavesThePodWhoseUIDAManifestBorrows(t *testing.T) {
	e := newCmdEnv(t)
	if err := e.once(e.write("victim.yaml", webPod("victim")), "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	victim := e.running("victim-node1")
	if victim == nil {
		t.Fatal("the victim pod is not running")
	}
	borrower := strings.Replace(webPod("innocent"), "  name: innocent\n",
		fmt.Sprintf("  name: innocent\n  uid: %s\n", victim.Pod.UID), 1)
	e.reset()
	wantExit(t, "down innocent.yaml", downWith(e, e.eng, e.write("innocent.yaml", borrower)), exitPodFailed,
		"default/innocent-node1", "default/victim-node1")
	if strings.Contains(e.out.String(), "removed") {
		t.Errorf("down reported a removal:\n%s", e.out)
	}
	if c := e.running("victim-node1"); c == nil || c.ID != victim.ID || e.sandboxes() != 1 {
		t.Errorf("after down: victim's container %v, %d sandboxes; want %s running in its sandbox", c, e.sandboxes(), victim.ID)
	}
}
