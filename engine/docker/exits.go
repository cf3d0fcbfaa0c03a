package docker

import (
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"

	"github.com/podrun/podrun/engine"
)

// Docker (20.10 at least) sends a container's die event before it has
// cleaned the container up and recorded the exit where its list reads
// from: for tens to hundreds of milliseconds after the event, the list
// still says "running" (and an inspect waits for the cleanup to end). A
// pod synced at the event would see nothing new and wait for the next
// relist to restart its container. So the event itself is taken as the
// record of the exit, with Docker's own time of it and exit code: the
// process is gone when Docker sends it. Once the list shows the exit, an
// inspect replaces this with all Docker says (the error message, its exact
// finish time).

// noteEvent records what an event of container id tells of its state
// before the list shows it; the caller sends the event on after this, so
// that a list made because of the event sees it.
func (r *Runtime) noteEvent(id string, action events.Action, attrs map[string]string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch action {
	case events.ActionOOM:
		// Docker sends oom before the die of the same exit.
		d := r.exits[id]
		d.oomKilled = true
		r.exits[id] = d
	case events.ActionDie:
		d := r.exits[id]
		d.state = engine.StateExited
		d.finishedAt = at
		d.exitCode, _ = strconv.Atoi(attrs["exitCode"])
		r.exits[id] = d
	case events.ActionStart:
		delete(r.exits, id)
	}
}

// diedPerEvent reports whether a die event of id came since its last start.
func (r *Runtime) diedPerEvent(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exits[id].state == engine.StateExited
}
