package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
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

// scriptedLister answers every list with what the test last set.
type scriptedLister struct {
	sbs []*engine.Sandbox
	cs  []*engine.Container
	err error
}

func (s *scriptedLister) ListPodObjects(_ context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	if s.err != nil {
		return nil, nil, s.err
	}
	var sbs []*engine.Sandbox
	var cs []*engine.Container
	for _, sb := range s.sbs {
		if uid == "" || sb.Pod.UID == uid {
			sbs = append(sbs, sb)
		}
	}
	for _, c := range s.cs {
		if uid == "" || c.Pod.UID == uid {
			cs = append(cs, c)
		}
	}
	return sbs, cs, nil
}

// TestObjectsOnlyFromARecentRelist: the node's objects are handed out (to
// the container GC) only while the last relist succeeded and is recent,
// with what refreshes saw since.
func TestObjectsOnlyFromARecentRelist(t *testing.T) {
	u1, u2 := engine.PodRef{UID: "u1"}, engine.PodRef{UID: "u2"}
	l := &scriptedLister{
		sbs: []*engine.Sandbox{{ID: "s1", Pod: u1, State: engine.StateRunning}},
		cs:  []*engine.Container{{ID: "c1", Pod: u1, Name: "app", State: engine.StateExited}},
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newPodCache(nil, l, slog.New(slog.NewTextHandler(io.Discard, nil)), clk, time.Second, time.Minute, nil)
	ctx := context.Background()
	ids := func() string {
		t.Helper()
		sbs, cs, ok := c.objects(2 * time.Minute)
		if !ok {
			return "none"
		}
		var out []string
		for _, sb := range sbs {
			out = append(out, sb.ID)
		}
		for _, ct := range cs {
			out = append(out, ct.ID)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	if got := ids(); got != "none" {
		t.Fatalf("before any relist: %s, want none", got)
	}
	c.relist(ctx)
	if got := ids(); got != "c1,s1" {
		t.Fatalf("after a relist: %s, want c1,s1", got)
	}
	// A pod refreshed since (its worker synced it, or an event named it)
	// is handed out as the refresh saw it.
	l.sbs = append(l.sbs, &engine.Sandbox{ID: "s2", Pod: u2, State: engine.StateRunning})
	l.cs = append(l.cs, &engine.Container{ID: "c2", Pod: u2, Name: "app", State: engine.StateRunning})
	if _, err := c.refresh(ctx, "u2"); err != nil {
		t.Fatal(err)
	}
	if got := ids(); got != "c1,c2,s1,s2" {
		t.Fatalf("after a refresh: %s, want c1,c2,s1,s2", got)
	}
	clk.Step(2 * time.Minute)
	if got := ids(); got != "c1,c2,s1,s2" {
		t.Fatalf("a relist begun maxAge ago: %s, want still handed out", got)
	}
	clk.Step(time.Second)
	if got := ids(); got != "none" {
		t.Fatalf("a relist older than maxAge: %s, want none", got)
	}
	c.relist(ctx)
	if got := ids(); got != "c1,c2,s1,s2" {
		t.Fatalf("after a new relist: %s", got)
	}
	l.err = errors.New("runtime down")
	c.relist(ctx)
	if got := ids(); got != "none" {
		t.Fatalf("after a failed relist: %s, want none", got)
	}
}

// TestRelistOfARuntimeThatNeverAnswersFails: a relist the runtime takes
// and never answers ends, bounded, as a failure: the runtime is down
// (RuntimeErr, the node's Ready), and the next relist tries again. It
// waited for good: the cache kept the last good list, the node stayed
// Ready, and nothing relisted again.
func TestRelistOfARuntimeThatNeverAnswersFails(t *testing.T) {
	g := &gatedLister{calls: make(chan listCall, 1)}
	c := newPodCache(nil, g, slog.New(slog.NewTextHandler(io.Discard, nil)), testingclock.NewFakeClock(time.Time{}), time.Hour, time.Hour, nil)
	c.listTimeout = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	relisted := make(chan struct{})
	go func() { c.relist(ctx); close(relisted) }()
	<-g.calls // taken, never answered
	select {
	case <-relisted:
	case <-time.After(10 * time.Second):
		t.Fatal("a relist still waits for a runtime that never answers, after 10 s")
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("relist error %v, want the runtime's silence", err)
	}
}

// silentRuntime is the fake engine, whose lists of pods the test answers.
type silentRuntime struct {
	*enginetest.Fake
	lister *gatedLister
}

func (s silentRuntime) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	return s.lister.ListPodObjects(ctx, uid)
}

// TestRelistBoundIsTheRuntimeRequestTimeout: the runner bounds its
// relists with Config.RuntimeRequestTimeout (--runtime-request-timeout),
// the kubelet's 2 minutes unless set.
func TestRelistBoundIsTheRuntimeRequestTimeout(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if r := New(Config{Runtime: enginetest.NewFake("node1"), Log: log}); r.cache.listTimeout != 2*time.Minute {
		t.Errorf("relist bound %s by default, want 2m0s", r.cache.listTimeout)
	}
	g := &gatedLister{calls: make(chan listCall, 1)}
	r := New(Config{Runtime: silentRuntime{Fake: enginetest.NewFake("node1"), lister: g}, Log: log,
		Clock: testingclock.NewFakeClock(time.Time{}), RuntimeRequestTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	relisted := make(chan struct{})
	go func() { r.cache.relist(ctx); close(relisted) }()
	<-g.calls // taken, never answered
	select {
	case <-relisted:
	case <-time.After(10 * time.Second):
		t.Fatal("a relist still waits for a runtime that never answers, after 10 s")
	}
	r.cache.mu.Lock()
	err := r.cache.err
	r.cache.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "did not answer a list of the node's pods within 50ms") {
		t.Errorf("relist error %v, want the runtime's silence past the 50ms asked for", err)
	}
}
