package gc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

const (
	testImage = "app:1"
	testInfra = "pause:1"
)

// world builds a node's state in the fake runtime, on a clock the test
// moves: each object is made one second after the one before.
type world struct {
	t   *testing.T
	f   *enginetest.Fake
	now time.Time
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, f: enginetest.NewFake("gc-node"), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w.f.SetClock(func() time.Time { return w.now })
	w.f.AddImage(testImage)
	w.f.AddImage(testInfra)
	return w
}

func (w *world) tick() { w.now = w.now.Add(time.Second) }

type testPod struct {
	w   *world
	cfg *engine.SandboxConfig
	sb  string
}

// pod makes a pod's sandbox (attempt 0), running.
func (w *world) pod(uid string) *testPod {
	w.t.Helper()
	p := &testPod{w: w, cfg: &engine.SandboxConfig{Pod: engine.PodRef{UID: uid, Name: "pod-" + uid, Namespace: "default"}, Image: testInfra, Source: "/m/" + uid + ".yaml"}}
	p.newSandbox()
	return p
}

// newSandbox replaces the pod's sandbox by a new attempt, stopping the old.
func (p *testPod) newSandbox() string {
	p.w.t.Helper()
	ctx := context.Background()
	if p.sb != "" {
		if err := p.w.f.StopSandbox(ctx, p.sb, 0); err != nil {
			p.w.t.Fatal(err)
		}
		p.cfg.Attempt++
	}
	p.w.tick()
	id, err := p.w.f.RunSandbox(ctx, p.cfg)
	if err != nil {
		p.w.t.Fatal(err)
	}
	p.sb = id
	return id
}

// run makes attempt of container name; it exits at once unless running.
func (p *testPod) run(name string, attempt int, running bool) string {
	p.w.t.Helper()
	ctx := context.Background()
	p.w.tick()
	argv := []string{enginetest.FakeScript, "exit", "1"}
	if running {
		argv = []string{enginetest.FakeScript, "run"}
	}
	id, err := p.w.f.CreateContainer(ctx, p.sb, p.cfg, &engine.ContainerConfig{
		Name: name, Type: engine.ContainerTypeApp, Attempt: attempt, Image: testImage, Command: argv,
	})
	if err != nil {
		p.w.t.Fatal(err)
	}
	if err := p.w.f.StartContainer(ctx, id); err != nil {
		p.w.t.Fatal(err)
	}
	return id
}

// crashLoop makes attempts 0..dead-1 of name, dead, then one running when
// running is set.
func (p *testPod) crashLoop(name string, dead int, running bool) []string {
	p.w.t.Helper()
	var ids []string
	for i := 0; i < dead; i++ {
		ids = append(ids, p.run(name, i, false))
	}
	if running {
		ids = append(ids, p.run(name, dead, true))
	}
	return ids
}

func (w *world) input(exists func(string) bool) ContainerInput {
	w.t.Helper()
	ctx := context.Background()
	cs, err := w.f.ListContainers(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	sbs, err := w.f.ListSandboxes(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return ContainerInput{Containers: cs, Sandboxes: sbs, PodExists: exists, Now: w.now.Add(time.Hour)}
}

func ids(cs []*engine.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func sandboxIDs(sbs []*engine.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s:\n got  %s\n want %s", what, short(got), short(want))
	}
}

func short(ids []string) string {
	var out []string
	for _, id := range ids {
		out = append(out, shortID(id))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func TestSelectPerContainerCap(t *testing.T) {
	w := newWorld(t)
	p := w.pod("a")
	app := p.crashLoop("app", 5, true) // 0-4 dead, 5 runs
	side := p.crashLoop("side", 3, false)

	plan := SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
	// Oldest first; the newest dead one of each container stays (app's 4 is
	// the running one's lastState; side's 2 is its current state).
	sameIDs(t, "removed", ids(plan.Containers), []string{app[0], app[1], app[2], app[3], side[0], side[1]})
	if len(plan.Sandboxes) != 0 {
		t.Errorf("sandboxes removed: %v", sandboxIDs(plan.Sandboxes))
	}

	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: 2, MaxContainers: -1})
	sameIDs(t, "removed with 2 per container", ids(plan.Containers), []string{app[0], app[1], app[2], side[0]})

	// Zero would keep none: the newest dead one stays all the same.
	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: 0, MaxContainers: -1})
	sameIDs(t, "removed with 0 per container", ids(plan.Containers), []string{app[0], app[1], app[2], app[3], side[0], side[1]})

	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: -1, MaxContainers: -1})
	sameIDs(t, "removed without limits", ids(plan.Containers), nil)
}

func TestSelectGlobalCap(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a")
	b := w.pod("b")
	a1 := a.crashLoop("one", 4, false)
	a2 := a.crashLoop("two", 2, true)
	b1 := b.crashLoop("one", 3, false)

	// 9 dead, at most 6: every container first cut to 6/3 = 2, which
	// leaves 2+2+2 = 6.
	plan := SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: -1, MaxContainers: 6})
	sameIDs(t, "removed", sortIDs(ids(plan.Containers)), sortIDs([]string{a1[0], a1[1], b1[0]}))
	sameIDs(t, "removed, oldest first", ids(plan.Containers), sortedByCreation(plan.Containers))

	// At most 4: cut to 1 each (3 left, all protected: under 4).
	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: -1, MaxContainers: 4})
	sameIDs(t, "removed at 4", sortIDs(ids(plan.Containers)), sortIDs([]string{a1[0], a1[1], a1[2], a2[0], b1[0], b1[1]}))
	sameIDs(t, "removed at 4, oldest first", ids(plan.Containers), sortedByCreation(plan.Containers))

	// At most 0: the newest dead one of each container is never removed.
	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: -1, MaxContainers: 0})
	sameIDs(t, "removed at 0", sortIDs(ids(plan.Containers)), sortIDs([]string{a1[0], a1[1], a1[2], a2[0], b1[0], b1[1]}))
	for _, c := range plan.Containers {
		if c.State == engine.StateRunning {
			t.Errorf("a running container is chosen: %+v", c)
		}
	}

	// One container of many dead and a global cap: the oldest go past the
	// equal share.
	w2 := newWorld(t)
	c := w2.pod("c").crashLoop("app", 5, false)
	plan = SelectContainers(w2.input(nil), ContainerPolicy{MaxPerContainer: -1, MaxContainers: 2})
	sameIDs(t, "removed of one container at 2", ids(plan.Containers), []string{c[0], c[1], c[2]})
}

func TestSelectPodGone(t *testing.T) {
	w := newWorld(t)
	keep := w.pod("keep")
	keep.crashLoop("app", 1, true)
	running := w.pod("running") // gone, but still running: housekeeping's to stop
	r := running.crashLoop("app", 2, true)
	dead := w.pod("dead") // gone and stopped
	d := dead.crashLoop("app", 2, false)
	di := dead.crashLoop("init", 1, false)
	if err := w.f.StopSandbox(context.Background(), dead.sb, 0); err != nil {
		t.Fatal(err)
	}
	exists := func(uid string) bool { return uid == "keep" }

	plan := SelectContainers(w.input(exists), ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
	// Every dead container of the gone pods, newest dead included, first
	// and oldest first; never the running one.
	sameIDs(t, "removed", ids(plan.Containers), []string{r[0], r[1], d[0], d[1], di[0]})
	sameIDs(t, "removed, oldest first", ids(plan.Containers), sortedByCreation(plan.Containers))
	// The stopped sandbox of the gone pod, now empty, goes; the running
	// one stays.
	sameIDs(t, "sandboxes removed", sandboxIDs(plan.Sandboxes), []string{dead.sb})

	// Before the sources are ready (PodExists nil), no pod is gone: only
	// the per-container limit applies.
	plan = SelectContainers(w.input(nil), ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
	sameIDs(t, "removed before the sources are ready", ids(plan.Containers), []string{r[0], d[0]})
	if len(plan.Sandboxes) != 0 {
		t.Errorf("sandboxes removed before the sources are ready: %v", sandboxIDs(plan.Sandboxes))
	}
}

// TestSelectEvictedPod: an evicted pod that still exists loses every
// dead container (the newest of each too) and, once they are gone, its
// sandbox, newest included; a running container of it (still stopping)
// stays, and so do the containers of a pod not evicted. Before the
// sources are ready, too: an evicted pod is known to exist.
func TestSelectEvictedPod(t *testing.T) {
	w := newWorld(t)
	keep := w.pod("keep")
	k := keep.crashLoop("app", 2, false)
	ev := w.pod("evicted")
	old := ev.crashLoop("app", 1, false)
	oldSandbox := ev.sb
	ev.newSandbox()
	e := []string{ev.run("app", 1, false), ev.run("app", 2, false)}
	ei := ev.crashLoop("init", 1, false)
	if err := w.f.StopSandbox(context.Background(), ev.sb, 0); err != nil {
		t.Fatal(err)
	}
	stopping := w.pod("stopping") // evicted, its container not stopped yet
	s := stopping.crashLoop("app", 1, true)
	evicted := func(uid string) bool { return uid == "evicted" || uid == "stopping" }
	exists := func(string) bool { return true }

	for _, ready := range []bool{true, false} {
		in := w.input(nil)
		if ready {
			in = w.input(exists)
		}
		in.Evicted = evicted
		plan := SelectContainers(in, ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
		want := []string{k[0], old[0], e[0], e[1], ei[0], s[0]}
		sort.Strings(want)
		got := ids(plan.Containers)
		sort.Strings(got)
		sameIDs(t, fmt.Sprintf("removed (sources ready %v)", ready), got, want)
		sameIDs(t, "sandboxes removed", sandboxIDs(plan.Sandboxes), []string{oldSandbox, ev.sb})
	}
}

func TestSelectMinAge(t *testing.T) {
	w := newWorld(t)
	app := w.pod("a").crashLoop("app", 6, false) // made at +2s .. +7s
	in := w.input(nil)
	in.Now = w.now.Add(2 * time.Second) // +9s
	// Older than 5 s: attempts 0-2 (made at +2s, +3s, +4s), of which the
	// newest is kept, as the kubelet counts only those old enough.
	plan := SelectContainers(in, ContainerPolicy{MinAge: 5 * time.Second, MaxPerContainer: 1, MaxContainers: -1})
	sameIDs(t, "removed", ids(plan.Containers), []string{app[0], app[1]})
	// Gone pods wait for the age too.
	in.PodExists = func(string) bool { return false }
	plan = SelectContainers(in, ContainerPolicy{MinAge: 5 * time.Second, MaxPerContainer: 1, MaxContainers: -1})
	sameIDs(t, "removed of a gone pod", ids(plan.Containers), []string{app[0], app[1], app[2]})
}

func TestSelectOldSandboxes(t *testing.T) {
	w := newWorld(t)
	p := w.pod("a")
	first := p.sb
	old := p.crashLoop("app", 2, false) // in the first sandbox
	p.newSandbox()
	p.run("app", 2, false) // the newest dead one, in the second sandbox
	p.newSandbox()         // the current one; the second is stopped
	p.run("app", 3, true)
	exists := func(string) bool { return true }

	plan := SelectContainers(w.input(exists), ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
	sameIDs(t, "removed", ids(plan.Containers), []string{old[0], old[1]})
	// The first sandbox is empty once they are gone; the second still
	// holds the newest dead app; the third is the current one.
	sameIDs(t, "sandboxes removed", sandboxIDs(plan.Sandboxes), []string{first})

	// With the dead ones kept, the first sandbox is kept too.
	plan = SelectContainers(w.input(exists), ContainerPolicy{MaxPerContainer: -1, MaxContainers: -1})
	if len(plan.Sandboxes) != 0 {
		t.Errorf("a sandbox holding containers is removed: %v", sandboxIDs(plan.Sandboxes))
	}

	// A pod's newest sandbox stays even when stopped and empty.
	w2 := newWorld(t)
	q := w2.pod("q")
	if err := w2.f.StopSandbox(context.Background(), q.sb, 0); err != nil {
		t.Fatal(err)
	}
	plan = SelectContainers(w2.input(exists), ContainerPolicy{MaxPerContainer: 1, MaxContainers: -1})
	if len(plan.Sandboxes) != 0 {
		t.Errorf("the newest sandbox of an existing pod is removed")
	}
}

func TestContainerGCCollect(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a")
	a.crashLoop("app", 4, true)
	gone := w.pod("gone")
	gone.crashLoop("app", 2, false)
	w.f.StopSandbox(context.Background(), gone.sb, 0)
	kept := w.pod("kept") // of a failing source: kept although not desired
	kept.crashLoop("app", 3, false)
	w.f.StopSandbox(context.Background(), kept.sb, 0)
	// Another node's dead containers are not this node's to see.
	other := &world{t: t, f: w.f.ForNode("other"), now: w.now}
	other.pod("x").crashLoop("app", 3, false)

	var logs bytes.Buffer
	usage := NewImageUsage()
	ready := false
	g := &ContainerGC{
		Runtime:      w.f,
		Policy:       DefaultContainerPolicy,
		SourcesReady: func() bool { return ready },
		Desired:      func() map[string]bool { return map[string]bool{"a": true} },
		KeepSource:   func(src string) bool { return src == "/m/kept.yaml" },
		Usage:        usage,
		Log:          slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx := context.Background()
	count := func(f *enginetest.Fake) map[string]int {
		cs, _ := f.ListContainers(ctx)
		out := map[string]int{}
		for _, c := range cs {
			out[c.Pod.UID]++
		}
		sbs, _ := f.ListSandboxes(ctx)
		for _, sb := range sbs {
			out[sb.Pod.UID+"/sandboxes"]++
		}
		return out
	}
	if _, err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(count(w.f)), fmt.Sprint(map[string]int{
		"a": 2, "a/sandboxes": 1, "gone": 1, "gone/sandboxes": 1, "kept": 1, "kept/sandboxes": 1,
	}); got != want {
		t.Errorf("before the sources are ready: %s, want %s", got, want)
	}
	ready = true
	w.f.ResetCalls()
	if _, err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	// A runtime that lists a node's sandboxes and containers at once is
	// listed once a pass: an idle node pays this every minute.
	if l, c, s := w.f.Calls("ListPodObjects"), w.f.Calls("ListContainers"), w.f.Calls("ListSandboxes"); l != 1 || c != 0 || s != 0 {
		t.Errorf("a pass listed %d times at once, %d containers, %d sandboxes; want one list at once", l, c, s)
	}
	if got, want := fmt.Sprint(count(w.f)), fmt.Sprint(map[string]int{
		"a": 2, "a/sandboxes": 1, "kept": 1, "kept/sandboxes": 1,
	}); got != want {
		t.Errorf("after: %s, want %s", got, want)
	}
	if got := count(other.f)["x"]; got != 3 {
		t.Errorf("another node's containers: %d left, want 3", got)
	}
	// The image of the containers seen is recorded as used.
	img, _ := w.f.ImageStatus(ctx, testImage)
	last, _ := usage.seen([]*engine.Image{img}, nil, w.now)
	if last[img.ID].IsZero() {
		t.Errorf("the containers' image is not recorded as used")
	}
	if !strings.Contains(logs.String(), "container gc") {
		t.Errorf("no log of the removals:\n%s", logs.String())
	}
}

func TestNewerOrder(t *testing.T) {
	now := time.Now()
	cs := []*engine.Container{
		{ID: "b", Attempt: 1, CreatedAt: now},
		{ID: "a", Attempt: 1, CreatedAt: now},
		{ID: "c", Attempt: 0, CreatedAt: now.Add(time.Hour)},
		{ID: "d", Attempt: 1, CreatedAt: now.Add(time.Second)},
	}
	sort.Slice(cs, func(i, j int) bool { return newer(cs[i], cs[j]) })
	sameIDs(t, "newest first", ids(cs), []string{"d", "b", "a", "c"})
}

func sortIDs(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

func sortedByCreation(cs []*engine.Container) []string {
	cp := append([]*engine.Container(nil), cs...)
	sort.SliceStable(cp, func(i, j int) bool { return cp[i].CreatedAt.Before(cp[j].CreatedAt) })
	return ids(cp)
}

// stuckErr stands for engine/docker's RemovalError: a container Docker
// left dead, its filesystem still mounted.
type stuckErr struct{ id string }

func (e stuckErr) Error() string {
	return "container " + shortID(e.id) + " is dead in Docker and could not be removed: device or resource busy"
}
func (e stuckErr) Retryable() bool     { return true }
func (e stuckErr) DockerState() string { return "dead" }

// lockedBuffer is a log one goroutine writes while another reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stuckRemovals is the fake runtime, where removing the IDs of stuck fails
// that many times before it succeeds.
type stuckRemovals struct {
	*enginetest.Fake
	mu    sync.Mutex
	stuck map[string]int
	tries map[string]int
}

func (s *stuckRemovals) try(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[id]++
	if s.stuck[id] > 0 {
		s.stuck[id]--
		return fmt.Errorf("remove %s: %w", shortID(id), stuckErr{id})
	}
	return nil
}

func (s *stuckRemovals) triesOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[id]
}

func (s *stuckRemovals) RemoveContainer(ctx context.Context, id string) error {
	if err := s.try(id); err != nil {
		return err
	}
	return s.Fake.RemoveContainer(ctx, id)
}

func (s *stuckRemovals) RemoveSandbox(ctx context.Context, id string) error {
	if err := s.try(id); err != nil {
		return err
	}
	return s.Fake.RemoveSandbox(ctx, id)
}

// TestContainerGCRetriesStuckRemovals: a dead container (or sandbox) that
// the runtime cannot remove yet is logged, one line each with its state,
// and removed at a later period; its sandbox waits for it.
func TestContainerGCRetriesStuckRemovals(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a")
	a.run("app", 0, true)
	gone := w.pod("gone")
	dead := gone.crashLoop("app", 2, false)
	w.f.StopSandbox(context.Background(), gone.sb, 0)
	rt := &stuckRemovals{Fake: w.f, stuck: map[string]int{dead[1]: 2, gone.sb: 1}, tries: map[string]int{}}

	// The pass writes the log while the test reads it.
	var logs lockedBuffer
	clk := testingclock.NewFakeClock(w.now.Add(time.Hour))
	g := &ContainerGC{
		Runtime:      rt,
		Policy:       DefaultContainerPolicy,
		SourcesReady: func() bool { return true },
		Desired:      func() map[string]bool { return map[string]bool{"a": true} },
		Log:          slog.New(slog.NewTextHandler(&logs, nil)),
		Clock:        clk,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, time.Minute)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; tries %d %d", what, rt.triesOf(dead[1]), rt.triesOf(gone.sb))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	left := func() []string {
		var out []string
		cs, _ := w.f.ListContainers(context.Background())
		for _, c := range cs {
			if c.Pod.UID == "gone" {
				out = append(out, c.ID)
			}
		}
		sbs, _ := w.f.ListSandboxes(context.Background())
		for _, sb := range sbs {
			if sb.Pod.UID == "gone" {
				out = append(out, sb.ID)
			}
		}
		return out
	}
	// Every pass here removes or fails to remove something, and says so
	// last, in one "container gc" line: n of those lines, and the nth
	// pass is over (what its removals did, it did). The ticker waits on
	// the clock from before the first pass, so the clock's waiters tell
	// nothing of a pass's end.
	passEnded := func(n int) {
		t.Helper()
		waitFor(fmt.Sprintf("the end of pass %d", n), func() bool {
			return strings.Count(logs.String(), `msg="container gc"`) >= n
		})
		if got := strings.Count(logs.String(), `msg="container gc"`); got != n {
			t.Fatalf("%d passes ended, want %d:\n%s", got, n, logs.String())
		}
	}
	after := func(period int, wantLeft []string, ctrTries, sbTries int) {
		t.Helper()
		passEnded(period)
		sameIDs(t, fmt.Sprintf("left after period %d", period), sortIDs(left()), sortIDs(wantLeft))
		if c, sb := rt.triesOf(dead[1]), rt.triesOf(gone.sb); c != ctrTries || sb != sbTries {
			t.Fatalf("after period %d: the stuck container tried %d times, its sandbox %d; want %d, %d", period, c, sb, ctrTries, sbTries)
		}
	}

	// Period 1: the older container goes, the stuck one stays, and so does
	// its sandbox (not tried: a container is still in it).
	after(1, []string{dead[1], gone.sb}, 1, 0)
	// Period 2: the retry, still stuck; the sandbox waits again.
	clk.Step(time.Minute)
	after(2, []string{dead[1], gone.sb}, 2, 0)
	// Period 3: the container goes at its second retry; the sandbox, tried
	// at last, is stuck once.
	clk.Step(time.Minute)
	after(3, []string{gone.sb}, 3, 1)
	// Period 4: the sandbox goes at its retry.
	clk.Step(time.Minute)
	after(4, nil, 3, 2)
	cancel()
	<-done

	if got := rt.triesOf(dead[1]); got != 3 {
		t.Errorf("the stuck container was tried %d times, want 3", got)
	}
	if got := g.RemoveFailures(); got != 3 {
		t.Errorf("RemoveFailures() = %d, want 3", got)
	}
	if cs, _ := w.f.ListContainers(context.Background()); len(cs) != 1 || cs[0].Pod.UID != "a" {
		t.Errorf("the running pod's container was touched: %d containers left", len(cs))
	}
	var stuckLines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "could not remove") {
			stuckLines = append(stuckLines, line)
		}
	}
	if len(stuckLines) != 3 {
		t.Fatalf("%d lines of failed removals, want 3 (one per failure):\n%s", len(stuckLines), logs.String())
	}
	for i, want := range []string{
		"what=container pod=default/pod-gone container=app attempt=1 id=" + shortID(dead[1]) + " state=exited runtime_state=dead retryable=true failures=1",
		"what=container pod=default/pod-gone container=app attempt=1 id=" + shortID(dead[1]) + " state=exited runtime_state=dead retryable=true failures=2",
		"what=sandbox pod=default/pod-gone attempt=0 id=" + shortID(gone.sb) + " state=exited runtime_state=dead retryable=true failures=1",
	} {
		if !strings.Contains(stuckLines[i], want) || !strings.Contains(stuckLines[i], "level=WARN") || !strings.Contains(stuckLines[i], "device or resource busy") {
			t.Errorf("line %d:\n %s\nwant it to hold\n %s", i+1, stuckLines[i], want)
		}
	}
	if strings.Contains(logs.String(), "container gc failed") {
		t.Errorf("the failures are logged twice:\n%s", logs.String())
	}
}

// TestPeriodicCollectTakesRecentList: the periodic pass works on the
// runner's recent list of the node rather than listing it again, even
// when something it lists was removed since; without a recent list, and
// in Collect (eviction's reclaim), it lists the node itself.
func TestPeriodicCollectTakesRecentList(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a")
	attempts := a.crashLoop("app", 3, true) // 0, 1, 2 dead; 3 running
	ctx := context.Background()
	sbs, cs, err := w.f.ListPodObjects(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Gone since that list: removing it again is not an error.
	if err := w.f.RemoveContainer(ctx, attempts[0]); err != nil {
		t.Fatal(err)
	}
	recent, asked := true, time.Duration(0)
	g := &ContainerGC{
		Runtime: w.f,
		Policy:  DefaultContainerPolicy,
		Recent: func(maxAge time.Duration) ([]*engine.Sandbox, []*engine.Container, bool) {
			asked = maxAge
			return sbs, cs, recent
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	left := func() []string {
		t.Helper()
		cs, err := w.f.ListContainers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].Attempt < cs[j].Attempt })
		return ids(cs)
	}

	w.f.ResetCalls()
	if _, err := g.periodicCollect(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := w.f.Calls("ListPodObjects") + w.f.Calls("ListContainers"); n != 0 {
		t.Errorf("with a recent list the pass listed the node %d times, want 0", n)
	}
	if asked != 2*time.Minute {
		t.Errorf("asked for a list at most %s old, want two periods", asked)
	}
	sameIDs(t, "containers left", left(), attempts[2:])

	// No recent list: the pass lists the node.
	recent = false
	fifth := a.run("app", 4, false)
	w.f.ResetCalls()
	if _, err := g.periodicCollect(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := w.f.Calls("ListPodObjects"); n != 1 {
		t.Errorf("without a recent list the pass listed the node %d times, want 1", n)
	}
	sameIDs(t, "containers left after a pass on its own list", left(), []string{attempts[3], fifth})

	// Collect lists the node whatever Recent has.
	recent = true
	w.f.ResetCalls()
	if _, err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.f.Calls("ListPodObjects"); n != 1 {
		t.Errorf("Collect listed the node %d times, want 1", n)
	}

	// A container only created (podrun may start it since, adopting it
	// after a restart) makes the recent list unfit: the pass lists.
	w.tick()
	if _, err := w.f.CreateContainer(ctx, a.sb, a.cfg, &engine.ContainerConfig{
		Name: "app", Type: engine.ContainerTypeApp, Attempt: 5, Image: testImage,
		Command: []string{enginetest.FakeScript, "run"},
	}); err != nil {
		t.Fatal(err)
	}
	if sbs, cs, err = w.f.ListPodObjects(ctx, ""); err != nil {
		t.Fatal(err)
	}
	w.f.ResetCalls()
	if _, err := g.periodicCollect(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := w.f.Calls("ListPodObjects"); n != 1 {
		t.Errorf("with a created container in the recent list the pass listed the node %d times, want 1", n)
	}
}
