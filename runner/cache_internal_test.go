package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// gatedLister answers each list with what the test gives, when the test
// says so.
type gatedLister struct {
	calls chan listCall // each list, as it begins
}

type listCall struct {
	uid   string
	reply chan []*engine.Container
}

func (g *gatedLister) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	call := listCall{uid: uid, reply: make(chan []*engine.Container)}
	g.calls <- call
	select {
	case cs := <-call.reply:
		return nil, cs, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// TestRefreshWinsOverAnOlderRelist: a relist that began before a refresh
// and ends after it does not undo the refresh's newer state.
func TestRefreshWinsOverAnOlderRelist(t *testing.T) {
	g := &gatedLister{calls: make(chan listCall)}
	c := newPodCache(nil, g, slog.New(slog.NewTextHandler(io.Discard, nil)), testingclock.NewFakeClock(time.Time{}), time.Hour, time.Hour, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ref := engine.PodRef{UID: "u1"}
	old := &engine.Container{ID: "c1", Pod: ref, Name: "app", State: engine.StateRunning}
	newer := &engine.Container{ID: "c1", Pod: ref, Name: "app", State: engine.StateExited, ExitCode: 1}

	relisted := make(chan struct{})
	go func() { c.relist(ctx); close(relisted) }()
	relist := <-g.calls
	if relist.uid != "" {
		t.Fatalf("relist listed %q, want every pod", relist.uid)
	}
	refreshed := make(chan *podState)
	go func() {
		st, err := c.refresh(ctx, "u1")
		if err != nil {
			t.Error(err)
		}
		refreshed <- st
	}()
	refresh := <-g.calls
	if refresh.uid != "u1" {
		t.Fatalf("refresh listed %q, want u1", refresh.uid)
	}
	refresh.reply <- []*engine.Container{newer} // the refresh ends first
	if st := <-refreshed; len(st.Containers) != 1 || st.Containers[0].State != engine.StateExited {
		t.Fatalf("refresh returned %+v", st)
	}
	relist.reply <- []*engine.Container{old} // then the older relist
	<-relisted
	st, err := c.get(ctx, "u1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Containers) != 1 || st.Containers[0].State != engine.StateExited {
		t.Fatalf("after the older relist the cache holds %+v, want the refresh's exited container", st.Containers[0])
	}

	// A relist begun after the refresh replaces it.
	go func() { c.relist(ctx) }()
	(<-g.calls).reply <- nil // the pod is gone
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := c.all()["u1"]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a newer relist did not remove the pod")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRelistsOnItsClock: the cache relists every period of its clock, and
// at once when asked.
func TestRelistsOnItsClock(t *testing.T) {
	g := &gatedLister{calls: make(chan listCall)}
	clk := testingclock.NewFakeClock(time.Time{})
	c := newPodCache(nil, g, slog.New(slog.NewTextHandler(io.Discard, nil)), clk, time.Minute, time.Minute, nil)
	waits := make(chan time.Duration, 8)
	c.waited = func(d time.Duration) { waits <- d }
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { c.run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	next := func(what string) {
		t.Helper()
		select {
		case call := <-g.calls:
			if call.uid != "" {
				t.Fatalf("%s listed %q, want every pod", what, call.uid)
			}
			call.reply <- nil
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	<-waits
	clk.Step(time.Minute)
	next("relist after a period")
	<-waits
	c.invalidate()
	next("relist when asked")
	<-waits
	clk.Step(time.Minute)
	next("relist after another period")
}
