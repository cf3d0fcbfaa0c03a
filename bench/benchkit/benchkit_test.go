package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// fakeNode is a node's containers for removeAll: removing one of stuck
// fails (as Docker fails a dead container whose overlay is still mounted)
// that many times, or for ever when the count is negative.
type fakeNode struct {
	mu     sync.Mutex
	cs     map[string]container.Summary
	stuck  map[string]int
	tries  map[string]int
	listed int
}

func (f *fakeNode) list(context.Context) ([]container.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed++
	var out []container.Summary
	for _, c := range f.cs {
		out = append(out, c)
	}
	return out, nil
}

func (f *fakeNode) remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries[id]++
	if n := f.stuck[id]; n != 0 {
		f.stuck[id] = n - 1
		c := f.cs[id]
		c.State, c.Status = "dead", "Dead"
		f.cs[id] = c
		return fmt.Errorf("Error response from daemon: driver \"overlay2\" failed to remove root filesystem for %s: unlinkat /var/lib/docker/overlay2/x/merged: device or resource busy", id)
	}
	delete(f.cs, id)
	return nil
}

func fullID(id string) string { return id + strings.Repeat("0", 20) }

func newFakeNode(stuck map[string]int, ids ...string) *fakeNode {
	f := &fakeNode{cs: map[string]container.Summary{}, stuck: map[string]int{}, tries: map[string]int{}}
	for _, id := range ids {
		f.cs[fullID(id)] = container.Summary{ID: fullID(id), Names: []string{"/podrun_" + id}, State: "exited", Status: "Exited (137) 1 second ago"}
	}
	for id, n := range stuck {
		f.stuck[fullID(id)] = n
	}
	return f
}

func TestRemoveAllRetriesStuckContainers(t *testing.T) {
	f := newFakeNode(map[string]int{"sandbox": 3}, "sandbox", "app", "other")
	start := time.Now()
	if err := removeAll(context.Background(), "n", 10*time.Second, f.list, f.remove); err != nil {
		t.Fatal(err)
	}
	if len(f.cs) != 0 {
		t.Errorf("left: %v", f.cs)
	}
	if got := f.tries[fullID("sandbox")]; got != 4 {
		t.Errorf("the stuck container was tried %d times, want 4", got)
	}
	// Backoff 50 + 100 + 200 ms, and no more.
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
}

func TestRemoveAllNamesWhatIsLeft(t *testing.T) {
	f := newFakeNode(map[string]int{"sandbox-a": -1, "sandbox-b": -1}, "sandbox-a", "sandbox-b", "app")
	start := time.Now()
	err := removeAll(context.Background(), "n", 500*time.Millisecond, f.list, f.remove)
	took := time.Since(start)
	if err == nil {
		t.Fatal("no error with two containers left")
	}
	t.Log(err)
	for _, want := range []string{"cleanup of node n: 2 containers left after 500ms",
		"podrun_sandbox-a (sandbox-a000, dead)", "podrun_sandbox-b (sandbox-b000, dead)", "device or resource busy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
	}
	if strings.Contains(err.Error(), "podrun_app") {
		t.Errorf("the error names a container that was removed")
	}
	if took < 500*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("gave up after %s, want the 500ms bound", took)
	}
	// Bounded polling: 50, 100, 200, then what is left of the bound.
	if n := f.tries[fullID("sandbox-a")]; n < 3 || n > 6 {
		t.Errorf("%d tries in 500ms", n)
	}
}

func TestRemoveAllStopsWithItsContext(t *testing.T) {
	f := newFakeNode(map[string]int{"x": -1}, "x")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := removeAll(ctx, "n", time.Minute, f.list, f.remove)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
}
