package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/podrun/podrun/engine"
)

var _ engine.EventSource = (*Runtime)(nil)

// eventActions are the container events Events reports.
var eventActions = []string{"start", "die", "oom", "destroy"}

// Events reports the start, exit ("die"), OOM kill and removal ("destroy")
// of this node's containers and sandboxes, from Docker's event stream
// (filtered by the engine), until ctx ends; then it closes the channel.
// When the stream breaks (dockerd restarted), it sends an Event with Lost
// set, reconnects, backing off up to 30 s, and sends an Event with Resync
// set once it is connected again.
//
// Events from the moment of the call on are reported, even those that
// happen before the stream is connected (Docker replays them); after a
// reconnection, Docker replays those since the last one received that it
// still holds.
func (r *Runtime) Events(ctx context.Context) <-chan engine.Event {
	out := make(chan engine.Event, 64)
	go r.watchEvents(ctx, out, time.Now())
	return out
}

// dockerSince is t as Docker's "since" parameter.
func dockerSince(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

func (r *Runtime) watchEvents(ctx context.Context, out chan<- engine.Event, since time.Time) {
	defer close(out)
	f := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", LabelNode+"="+r.node),
	)
	for _, a := range eventActions {
		f.Add("event", a)
	}
	send := func(ev engine.Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	const maxBackoff = 30 * time.Second
	backoff := time.Second
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			if err := r.Ping(ctx); err != nil {
				r.log.Debug("docker events: engine still unreachable", "err", err)
				continue
			}
		}
		// A stream, as long as ctx: no call timeout (timeout.go). The
		// ping that precedes a reconnection has one.
		sctx, cancel := context.WithCancel(ctx)
		msgs, errs := r.cli.Events(sctx, events.ListOptions{Filters: f, Since: dockerSince(since)})
		if !first {
			r.log.Info("docker events: reconnected")
			// The engine may have restarted with another configuration
			// (a runtime added): info asks again.
			r.forgetInfo()
			if !send(engine.Event{Resync: true}) {
				cancel()
				return
			}
		}
	stream:
		for {
			select {
			case <-ctx.Done():
				cancel()
				return
			case err := <-errs:
				if ctx.Err() != nil {
					cancel()
					return
				}
				r.log.Warn("docker events: stream broken; reconnecting", "err", err)
				if !send(engine.Event{Lost: true}) {
					cancel()
					return
				}
				break stream
			case m := <-msgs:
				backoff = time.Second
				if m.TimeNano > 0 {
					since = time.Unix(0, m.TimeNano)
				}
				if m.Action == events.ActionDestroy {
					r.forget(m.Actor.ID)
				} else {
					r.noteEvent(m.Actor.ID, m.Action, m.Actor.Attributes, since)
				}
				if !send(engine.Event{PodUID: m.Actor.Attributes[LabelPodUID], ContainerID: m.Actor.ID, Action: string(m.Action)}) {
					cancel()
					return
				}
			}
		}
		cancel()
	}
}
