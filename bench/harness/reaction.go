package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// Targets of issue 15 for reactions: a killed container (first crash) runs
// again within restartTarget of Docker's die event; an edit's new
// container runs within Docker's own kill + create + start + updateMargin.
const (
	restartTarget = 500 * time.Millisecond
	updateMargin  = 150 * time.Millisecond
)

// dieWatch follows Docker's die event of one container, from before it is
// killed: Docker's own time of the exit, as its event stream stamps it.
type dieWatch struct {
	msgs   <-chan events.Message
	errs   <-chan error
	cancel context.CancelFunc
}

// watchDie starts following id's die event; since is just before the kill,
// so that Docker replays an event sent before the stream was connected.
func (e *env) watchDie(ctx context.Context, id string) *dieWatch {
	ctx, cancel := context.WithCancel(ctx)
	since := time.Now().Add(-time.Second)
	msgs, errs := e.cli.Events(ctx, events.ListOptions{
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
		Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("container", id), filters.Arg("event", string(events.ActionDie)))})
	return &dieWatch{msgs: msgs, errs: errs, cancel: cancel}
}

// dieToStart is from the die event to newID's State.StartedAt, both
// Docker's stamps; it stops following the event stream.
func (e *env) dieToStart(ctx context.Context, w *dieWatch, newID string) (float64, error) {
	defer w.cancel()
	var died time.Time
	select {
	case m := <-w.msgs:
		died = time.Unix(0, m.TimeNano)
	case err := <-w.errs:
		return 0, fmt.Errorf("docker events: %w", err)
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("no die event within 30 s")
	}
	ins, err := e.cli.ContainerInspect(ctx, newID)
	if err != nil {
		return 0, err
	}
	started, err := time.Parse(time.RFC3339Nano, ins.State.StartedAt)
	if err != nil {
		return 0, err
	}
	return started.Sub(died).Seconds(), nil
}

// restartVerdict says how the restarts from die events of every steady
// size compare with restartTarget.
func restartVerdict(b *strings.Builder, ss []Steady) {
	var all []float64
	for _, s := range ss {
		for _, ev := range s.Events {
			all = append(all, ev.DieToStart)
		}
	}
	if len(all) == 0 {
		return
	}
	m := median(all)
	fmt.Fprintf(b, "**Verdict:** a killed container ran again %.3f s (median of %d) after Docker's die event: %s the %.1f s target.\n\n",
		m, len(all), within(m <= restartTarget.Seconds()), restartTarget.Seconds())
}

// updateVerdict says how an edit's reaction compares with Docker's own
// kill + create + start of the same container, plus updateMargin.
func updateVerdict(b *strings.Builder, u Update) {
	bound := median(u.Kill) + median(u.CreateStart) + updateMargin.Seconds()
	m := median(u.Reaction)
	fmt.Fprintf(b, "**Verdict (%s):** reaction %.3f s against Docker's kill + create+start + %.2f s = %.3f s (medians): %s the target.\n\n",
		u.Subject, m, updateMargin.Seconds(), bound, within(m <= bound))
}

func within(ok bool) string {
	if ok {
		return "within"
	}
	return "**not** within"
}
