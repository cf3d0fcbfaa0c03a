package docker

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"

	"github.com/podrun/podrun/engine"
)

// TestDieEventBeforeTheList: after a die event, a container Docker still
// lists as running is reported exited, with the event's exit code and time
// (and the OOM kill of an oom event before it), without an inspect, which
// would wait for Docker's cleanup; once the list shows the exit, inspect
// has the last word; a start forgets the event.
func TestDieEventBeforeTheList(t *testing.T) {
	ctx := context.Background()
	f := &fakeEngine{node: "n", typ: "app", states: []string{"exited"}}
	r := fakeRuntime(t, f)
	started := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	died := started.Add(time.Minute)
	r.details[fullTestID] = detail{state: engine.StateRunning, startedAt: started}

	r.noteEvent(fullTestID, events.ActionOOM, nil, died)
	r.noteEvent(fullTestID, events.ActionDie, map[string]string{"exitCode": "137"}, died)
	d, err := r.detail(ctx, fullTestID, "running")
	if err != nil {
		t.Fatal(err)
	}
	want := detail{state: engine.StateExited, startedAt: started, finishedAt: died, exitCode: 137, oomKilled: true}
	if d != want {
		t.Errorf("detail after the die event = %+v, want %+v", d, want)
	}
	if f.inspects != 0 {
		t.Errorf("%d inspects, want none: the event is the record of the exit", f.inspects)
	}

	// The list caught up: inspected, and the event forgotten.
	if d, err = r.detail(ctx, fullTestID, "exited"); err != nil || d.state != engine.StateExited || f.inspects != 1 {
		t.Errorf("detail once listed exited = %+v, %v after %d inspects, want exited from one inspect", d, err, f.inspects)
	}
	if r.diedPerEvent(fullTestID) {
		t.Errorf("the die event is still kept once the list shows the exit")
	}

	// A start of the same container ends what its die said.
	r.noteEvent(fullTestID, events.ActionDie, map[string]string{"exitCode": "1"}, died)
	r.noteEvent(fullTestID, events.ActionStart, nil, died.Add(time.Second))
	if r.diedPerEvent(fullTestID) {
		t.Errorf("a die event is kept after a start of the container")
	}
}
