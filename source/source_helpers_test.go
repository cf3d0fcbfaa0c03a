package source

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/podrun/podrun/manifest"
)

// failAfter bounds every wait of the source tests. It is a deadline for
// failure only, never what a test measures: a slow machine only makes a
// test slower. Three minutes: a real kube-apiserver under -race, on a
// machine running the whole suite and another besides, took over a
// minute to serve the apiserver source's first lists.
const failAfter = 3 * time.Minute

// startSource runs a source's Run for the rest of the test; at the end it
// cancels the context and fails if Run does not return.
func startSource(t *testing.T, run func(context.Context, chan<- Update)) <-chan Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(failAfter):
			t.Error("Run did not return after its context ended")
		}
	})
	return out
}

// waitFor receives updates until one satisfies ok, and returns it. check,
// if not nil, must hold for every update received on the way.
func waitFor(t *testing.T, ch <-chan Update, what string, ok func(Update) bool, check ...func(*testing.T, Update)) Update {
	t.Helper()
	deadline := time.After(failAfter)
	var last []string
	for {
		select {
		case u := <-ch:
			for _, c := range check {
				c(t, u)
			}
			if ok(u) {
				return u
			}
			last = append(last, describeUpdate(u))
		case <-deadline:
			t.Fatalf("no update with %s; got:\n%s", what, strings.Join(last, "\n"))
		}
	}
}

// podHashes are an update's pods: name -> config.hash.
func podHashes(u Update) map[string]string {
	pods := map[string]string{}
	if u.Snapshot != nil {
		for _, p := range u.Snapshot.Pods {
			pods[p.Name] = p.Annotations[manifest.AnnotationConfigHash]
		}
	}
	return pods
}

func podUIDs(u Update) map[string]string {
	uids := map[string]string{}
	if u.Snapshot != nil {
		for _, p := range u.Snapshot.Pods {
			uids[p.Name] = string(p.UID)
		}
	}
	return uids
}

// hasPods reports whether u is usable and holds exactly the pods named
// (without the node suffix).
func hasPods(u Update, names ...string) bool {
	if u.Snapshot == nil {
		return false
	}
	var got []string
	for _, p := range u.Snapshot.Pods {
		got = append(got, strings.TrimSuffix(p.Name, "-node1"))
	}
	slices.Sort(got)
	want := slices.Clone(names)
	slices.Sort(want)
	return slices.Equal(got, want)
}

func describeUpdate(u Update) string {
	var pods []string
	if u.Snapshot != nil {
		for _, p := range u.Snapshot.Pods {
			pods = append(pods, p.Name+"@"+p.Annotations[manifest.AnnotationConfigHash][:8])
		}
	} else {
		pods = []string{"<no snapshot>"}
	}
	return fmt.Sprintf("  pods=%v err=%v failing=%v", pods, u.Err, u.Failing)
}

// podImage is a pod manifest named name running image.
func podImage(name, image string) string {
	return strings.Replace(podNamed(name), "nginx:1.27", image, 1)
}

// atomicWrite replaces path as careful tools do: a dotfile (ignored by
// the source) renamed over it, so the source never sees half a file.
func atomicWrite(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer for a logger written by a source's
// goroutine and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	t.Helper()
	var buf syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// probe records what a source's hooks report, for tests that must know
// what happened inside the loop rather than guess from timing.
type probe struct {
	events chan fsnotify.Event
	scans  chan bool

	mu    sync.Mutex
	timer chan time.Time // the debounce timer armed last
	armed int
}

func newProbe() *probe {
	return &probe{events: make(chan fsnotify.Event, 10000), scans: make(chan bool, 10000)}
}

// hooks observes events and scans; with fakeTimer the debounce timer
// fires only when the test calls fire.
func (p *probe) hooks(fakeTimer bool) *sourceHooks {
	h := &sourceHooks{
		event:   func(ev fsnotify.Event) { p.events <- ev },
		scanned: func(changed bool) { p.scans <- changed },
	}
	if fakeTimer {
		h.after = func(time.Duration) <-chan time.Time {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = make(chan time.Time, 1)
			p.armed++
			return p.timer
		}
	}
	return h
}

func (p *probe) armedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed
}

// fire fires the debounce timer armed last.
func (p *probe) fire(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	timer := p.timer
	p.mu.Unlock()
	if timer == nil {
		t.Fatal("the debounce timer was never armed")
	}
	timer <- time.Now()
}

// waitEvent waits for an event on a file named base.
func (p *probe) waitEvent(t *testing.T, base string) {
	t.Helper()
	deadline := time.After(failAfter)
	for {
		select {
		case ev := <-p.events:
			if filepath.Base(ev.Name) == base {
				return
			}
		case <-deadline:
			t.Fatalf("no fsnotify event for %s", base)
		}
	}
}

// waitScans waits for n more scans and returns whether each changed the
// result.
func (p *probe) waitScans(t *testing.T, n int) []bool {
	t.Helper()
	deadline := time.After(failAfter)
	var changed []bool
	for len(changed) < n {
		select {
		case c := <-p.scans:
			changed = append(changed, c)
		case <-deadline:
			t.Fatalf("only %d of %d scans happened", len(changed), n)
		}
	}
	return changed
}

// noUpdate fails if an update is waiting. It is exact, not timed, when the
// test knows from the scans hook that nothing was queued.
func noUpdate(t *testing.T, ch <-chan Update) {
	t.Helper()
	select {
	case u := <-ch:
		t.Errorf("unexpected update:\n%s", describeUpdate(u))
	default:
	}
}

// countLines counts the lines of log that contain every part.
func countLines(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}
