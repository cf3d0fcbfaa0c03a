package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// answeredLister answers each list of the node with what the test says:
// containers, or an error.
type answeredLister struct {
	calls chan chan listAnswer
}

type listAnswer struct {
	cs  []*engine.Container
	err error
}

func (l *answeredLister) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	reply := make(chan listAnswer)
	select {
	case l.calls <- reply:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	select {
	case a := <-reply:
		return nil, a.cs, a.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// relistRig runs a pod cache on a fake clock, with events connected, and
// lets the test answer its relists and see each wait it begins and each
// pod it says changed.
type relistRig struct {
	t        *testing.T
	c        *podCache
	clk      *testingclock.FakeClock
	l        *answeredLister
	waits    chan time.Duration
	notified chan []string
}

func newRelistRig(t *testing.T, minPeriod, maxPeriod time.Duration) *relistRig {
	r := &relistRig{t: t, clk: testingclock.NewFakeClock(time.Time{}), l: &answeredLister{calls: make(chan chan listAnswer)},
		waits: make(chan time.Duration, 16), notified: make(chan []string, 16)}
	r.c = newPodCache(nil, r.l, slog.New(slog.NewTextHandler(io.Discard, nil)), r.clk, minPeriod, maxPeriod,
		func(uids []string) { r.notified <- uids })
	r.c.waited = func(d time.Duration) { r.waits <- d }
	r.c.eventsConnected(false)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { r.c.run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	return r
}

// wait returns the wait the cache began.
func (r *relistRig) wait() time.Duration {
	r.t.Helper()
	select {
	case d := <-r.waits:
		return d
	case <-time.After(10 * time.Second):
		r.t.Fatal("the cache began no wait")
		return 0
	}
}

// expectWait checks that the cache waits d: no relist a millisecond
// before, then one; which it answers with a.
func (r *relistRig) expectWait(d time.Duration, a listAnswer) {
	r.t.Helper()
	if got := r.wait(); got != d {
		r.t.Fatalf("the cache waits %s, want %s", got, d)
	}
	r.clk.Step(d - time.Millisecond)
	// A timer that fires leaves the fake clock within the step, while the
	// relist it starts may still be on its way: the cache's timer, the
	// clock's only waiter, must still be there.
	if n := r.clk.Waiters(); n != 1 {
		r.t.Fatalf("the wait of %s ended a millisecond early (%d timers left)", d, n)
	}
	select {
	case <-r.l.calls:
		r.t.Fatalf("a relist before the wait of %s ended", d)
	default:
	}
	r.clk.Step(time.Millisecond)
	r.answer(a)
}

// answer answers the next relist with a.
func (r *relistRig) answer(a listAnswer) {
	r.t.Helper()
	select {
	case reply := <-r.l.calls:
		reply <- a
	case <-time.After(10 * time.Second):
		r.t.Fatal("no relist")
	}
}

// expectNotified checks the pods the next relist said changed.
func (r *relistRig) expectNotified(uid string) {
	r.t.Helper()
	select {
	case uids := <-r.notified:
		if len(uids) != 1 || uids[0] != uid {
			r.t.Fatalf("relist said %v changed, want %s", uids, uid)
		}
	case <-time.After(10 * time.Second):
		r.t.Fatalf("relist said nothing of %s", uid)
	}
}

func running(uid, id string) listAnswer {
	return listAnswer{cs: []*engine.Container{{ID: id, Pod: engine.PodRef{UID: uid}, Name: "app", State: engine.StateRunning}}}
}

func exited(uid, id string) listAnswer {
	return listAnswer{cs: []*engine.Container{{ID: id, Pod: engine.PodRef{UID: uid}, Name: "app", State: engine.StateExited, ExitCode: 1}}}
}

// TestRelistPeriodGrowsWhileEventsFlow: with events connected, each relist
// that finds nothing unannounced doubles the period, up to its cap.
func TestRelistPeriodGrowsWhileEventsFlow(t *testing.T) {
	r := newRelistRig(t, time.Second, 8*time.Second)
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectNotified("u1") // the first relist: everything is new
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		r.expectWait(d, running("u1", "c1"))
	}
	// An announced change is the events' doing: the period keeps growing.
	r.c.announce("u1")
	r.expectWait(8*time.Second, exited("u1", "c1"))
	r.expectNotified("u1")
	if d := r.wait(); d != 8*time.Second {
		t.Fatalf("after an announced change the cache waits %s, want 8s", d)
	}
}

// TestRelistPeriodDropsWhenEventsBreak: a broken stream brings the period
// back to the minimum at once, and keeps it there until the stream is
// back; the reconnection relists at once and starts growing again.
func TestRelistPeriodDropsWhenEventsBreak(t *testing.T) {
	r := newRelistRig(t, time.Second, 8*time.Second)
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectWait(2*time.Second, running("u1", "c1"))
	if d := r.wait(); d != 4*time.Second {
		t.Fatalf("waits %s, want 4s", d)
	}
	r.c.eventsLost()
	r.expectWait(time.Second, running("u1", "c1")) // begun again, cut
	r.expectWait(time.Second, running("u1", "c1")) // and it stays cut
	r.expectWait(time.Second, running("u1", "c1"))

	r.c.eventsConnected(true)
	r.wait()
	r.answer(running("u1", "c1")) // at once, the clock standing still
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectWait(2*time.Second, running("u1", "c1"))
}

// TestRelistPeriodDropsAfterAListError: a relist that fails brings the
// period back to the minimum.
func TestRelistPeriodDropsAfterAListError(t *testing.T) {
	r := newRelistRig(t, time.Second, 8*time.Second)
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectWait(2*time.Second, running("u1", "c1"))
	r.expectWait(4*time.Second, listAnswer{err: errors.New("engine down")})
	r.expectWait(time.Second, listAnswer{err: errors.New("engine down")})
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectWait(2*time.Second, running("u1", "c1"))
}

// TestRelistFindsWhatEventsMissed: a change no event announced is acted
// on (its pod is woken) and brings the period back to the minimum.
func TestRelistFindsWhatEventsMissed(t *testing.T) {
	r := newRelistRig(t, time.Second, 8*time.Second)
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectNotified("u1")
	r.expectWait(2*time.Second, running("u1", "c1"))
	r.expectWait(4*time.Second, exited("u1", "c1")) // no event said so
	r.expectNotified("u1")
	r.expectWait(time.Second, exited("u1", "c1"))
	r.expectWait(2*time.Second, exited("u1", "c1"))
}

// TestRelistTakesALateEventAsLate: a relist may list a change before its
// event reaches the cache (Docker lists a start or a removal before it
// sends the event; podrun's own create has none until the start). That is
// not a miss: the period is cut for one relist, and when the event is in
// by then, it resumes where it was rather than grow again from 1 s.
func TestRelistTakesALateEventAsLate(t *testing.T) {
	r := newRelistRig(t, time.Second, 8*time.Second)
	r.expectWait(time.Second, running("u1", "c1"))
	r.expectNotified("u1")
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		r.expectWait(d, running("u1", "c1"))
	}
	r.expectWait(8*time.Second, exited("u1", "c1")) // listed before its event came
	r.expectNotified("u1")
	r.c.announce("u1") // the event, late
	r.expectWait(time.Second, exited("u1", "c1"))
	if d := r.wait(); d != 8*time.Second {
		t.Fatalf("after a late event the cache waits %s, want the 8s it waited before", d)
	}
}
