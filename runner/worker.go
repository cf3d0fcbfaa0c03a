package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// podWorker syncs one pod, one sync at a time.
type podWorker struct {
	r   *Runner
	uid string

	mu      sync.Mutex
	pod     *v1.Pod
	removed bool
	wakeCh  chan struct{}
	// needGen is the cache generation the next sync must see: the one asked
	// for by whoever woke the worker last. needFresh asks for the pod's
	// state as it is now (a refresh of the pod alone).
	needGen   uint64
	needFresh bool
	// needNow says the pod's spec changed (or it is to be removed), or the
	// runtime is back after an outage, since the last sync: that is synced
	// at once, and ends an error back-off.
	needNow bool
	// errs are why containers could not start, with when to try again.
	errs map[string]startError
	// configGen counts the arrivals of what containers' configuration
	// waits for (retryConfigErrorsNow); syncConfigGen is its value when
	// the sync under way began. A configuration error of a sync that began
	// before the latest arrival holds no back-off (recordStartError).
	configGen, syncConfigGen uint64
	// vols is what the files of the pod's volumes hold (volumerefresh.go).
	vols volumeState
	// evicted, when set, keeps the pod stopped and Failed (evict.go).
	evicted *eviction
	// deadlineSpec is the pod's deadlineKey when it passed its deadline
	// (deadline.go); renewed is set when an edit ended its eviction. Either
	// way an edit makes a new pod of it.
	deadlineSpec string
	renewed      bool
	// stopCancel interrupts the stop under way, whose grace period is
	// stopGrace (beginStop); nil when none is.
	stopCancel context.CancelFunc
	stopGrace  time.Duration
	// syncCancel ends the sync under way of the pod still wanted, which
	// its removal interrupts (beginSync); nil when none is.
	syncCancel context.CancelFunc
	// msgs are the termination messages of the pod's finished runs, by
	// container ID (termmsg.go); only the worker's syncs, one at a time,
	// use it.
	msgs map[string]string
	// waitingFor is what the pod waits for before its admission, as
	// logged (noteWait), until a sync gets past it; only the worker's
	// syncs use it.
	waitingFor string
}

func newPodWorker(r *Runner, pod *v1.Pod) *podWorker {
	return &podWorker{r: r, uid: string(pod.UID), pod: pod, wakeCh: make(chan struct{}, 1), errs: map[string]startError{}}
}

func (w *podWorker) update(pod *v1.Pod) {
	w.mu.Lock()
	old := w.pod
	w.pod = pod
	w.removed = false
	w.needNow = true
	w.mu.Unlock()
	w.freshStartForEdits(old, pod)
	w.wake(0)
}

// terminate stops and removes the pod, as remove, with pod (one the API
// is deleting) as its last spec: its deletion grace period applies. A
// grace period shorter than that of a stop under way interrupts it, and
// the stop starts again with the shorter one (the kubelet's pod worker
// does so too): preStop hooks included, each given at most the new grace.
func (w *podWorker) terminate(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.removed = true
	w.needNow = true
	if w.stopCancel != nil && GracePeriod(pod) < w.stopGrace {
		w.stopCancel()
	}
	if w.syncCancel != nil {
		w.syncCancel()
	}
	w.mu.Unlock()
	w.wake(0)
}

// beginStop returns the context of a stop of the pod within grace, which
// a shorter grace period (terminate) cancels; shortened, called when the
// stop is over, ends it and reports whether that is why it ended.
func (w *podWorker) beginStop(ctx context.Context, grace time.Duration) (sctx context.Context, shortened func() bool) {
	return w.interruptible(ctx, func(cancel context.CancelFunc) { w.stopCancel, w.stopGrace = cancel, grace })
}

// interruptible returns a context of ctx that another goroutine may
// cancel while it runs, through the cancel func that publish keeps (it is
// called with w.mu held: with the cancel func, then with nil at the end),
// and end, which ends the context and reports whether that cancel is why
// it ended (not ctx).
func (w *podWorker) interruptible(ctx context.Context, publish func(context.CancelFunc)) (context.Context, func() bool) {
	sctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	publish(cancel)
	w.mu.Unlock()
	return sctx, func() bool {
		w.mu.Lock()
		publish(nil)
		w.mu.Unlock()
		cut := sctx.Err() != nil && ctx.Err() == nil
		cancel()
		return cut
	}
}

func (w *podWorker) remove() {
	w.mu.Lock()
	w.removed = true
	w.needNow = true
	if w.syncCancel != nil {
		w.syncCancel()
	}
	w.mu.Unlock()
	w.wake(0)
}

// beginSync returns the context of a sync of the pod while it is wanted,
// which its removal (remove, terminate) cancels, as the kubelet's pod
// worker cancels the sync of a pod it is told to kill: a sync waiting on
// something slow (a pull from a registry that stalled) must not hold the
// removal back. ended, called when the sync is over, reports whether the
// removal is why it ended.
func (w *podWorker) beginSync(ctx context.Context) (sctx context.Context, ended func() bool) {
	return w.interruptible(ctx, func(cancel context.CancelFunc) {
		w.syncCancel = cancel
		if cancel != nil && w.removed {
			cancel() // removed since the sync looked
		}
	})
}

// wake asks for a sync at state of generation gen or later (0: the state
// the cache holds).
func (w *podWorker) wake(gen uint64) {
	w.mu.Lock()
	w.needGen = max(w.needGen, gen)
	w.mu.Unlock()
	w.signal()
}

// wakeFresh asks for a sync at the pod's state as it is now (a refresh of
// the pod): the runtime said something happened to it.
func (w *podWorker) wakeFresh() {
	w.mu.Lock()
	w.needFresh = true
	w.mu.Unlock()
	w.signal()
}

func (w *podWorker) signal() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// wakeNow asks for a sync at once at the pod's state as it is now, even
// during an error back-off (which it ends): the runtime is back.
func (w *podWorker) wakeNow() {
	w.mu.Lock()
	w.needFresh, w.needNow = true, true
	w.mu.Unlock()
	w.signal()
}

// takeWake returns (and forgets) what the wakes since the last sync asked
// for: a generation, whether the pod must be looked at afresh, and whether
// it must be synced at once (see needNow).
func (w *podWorker) takeWake() (gen uint64, fresh, now bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gen, fresh, now = w.needGen, w.needFresh, w.needNow
	w.needGen, w.needFresh, w.needNow = 0, false, false
	return gen, fresh, now
}

func (w *podWorker) desired() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

// run syncs the pod until it is removed or ctx ends. Each sync looks at
// the pod's state either as the cache holds it (a relist of generation gen
// or later) or, when fresh, as the runtime has it now, from a list of this
// pod alone: when the worker starts, after it acted, when a runtime event
// names the pod, and when a back-off expires. So what one pod does costs
// no list of every pod.
//
// Two rules keep a pod that cannot progress from spinning:
//   - a sync that acted is followed at once by a fresh look; when that
//     look shows nothing new (every start was held back by its back-off,
//     or the actions changed nothing visible), the actions are not
//     repeated at once: the worker waits for their retry time or a wake;
//   - after a sync whose actions failed (a sandbox that would not start,
//     a runtime error), the worker backs off (errorBackoffMin doubling to
//     errorBackoffMax) before the next sync, whatever wakes it meanwhile
//     but a change of the pod's spec or the runtime's return after an
//     outage (wakeNow). Without it, a sandbox that fails to start would be
//     made again and again, each time a new container.
func (w *podWorker) run(ctx context.Context) {
	l := syncLoop{fresh: true}
	for {
		var retry time.Duration
		var done bool
		onOwnGoroutine(func() { retry, done = w.syncUntilIdle(ctx, &l) })
		if done {
			return
		}
		now := false
		if !w.wait(ctx, retry, l.errUntil, &l.gen, &l.fresh, &now) {
			return
		}
		if now {
			// A new spec, or the runtime back: a fresh start.
			l.errDelay, l.errUntil = 0, time.Time{}
		}
	}
}

// onOwnGoroutine runs fn on a goroutine of its own and waits for it. A
// goroutine's stack keeps the size its deepest call grew it to, and a sync
// goes deep (the engine's client, its JSON, the pod's status): run on the
// worker's goroutine, which lives as long as the pod, every idle pod would
// hold that stack between syncs (about 20 KiB each on Docker). The
// worker's own goroutine only waits.
func onOwnGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

// syncLoop is what a pod worker's syncs carry from one to the next.
type syncLoop struct {
	// gen and fresh say what the next look at the pod's state is (run).
	gen   uint64
	fresh bool
	// actedOn is the state the last sync acted on, until a fresh look
	// shows what came of it; lastRetry is when that sync asked to look
	// again.
	actedOn   *podState
	lastRetry time.Duration
	// errDelay is the back-off after syncs that failed (0 after one
	// that did not), errUntil when it ends.
	errDelay time.Duration
	errUntil time.Time
}

// syncUntilIdle syncs the pod until it has nothing to do but wait. It
// returns how long to wait (0: until woken), and true when the worker is
// to end instead (the pod removed, or ctx ended).
func (w *podWorker) syncUntilIdle(ctx context.Context, l *syncLoop) (time.Duration, bool) {
	r := w.r
	for {
		var st *podState
		var err error
		if l.fresh {
			st, err = r.cache.refresh(ctx, w.uid)
		} else {
			st, err = r.cache.get(ctx, w.uid, l.gen)
		}
		if ctx.Err() != nil {
			return 0, true
		}
		pod, removed := w.desired()
		// A removal waits for a look at the runtime: without one, it
		// would remove the pod's directory and cgroup under containers it
		// cannot see, or another pod's with the UID (splitByPod).
		if removed && err == nil {
			r.publishNotReady(w.uid)
			grace := GracePeriod(pod)
			sctx, shortened := w.beginStop(ctx, grace)
			own, others := splitByPod(pod, st)
			if pod.DeletionTimestamp != nil {
				own = w.stopForFinalStatus(sctx, pod, own, grace)
			}
			terr := sctx.Err()
			if terr == nil {
				terr = r.teardownOwn(sctx, pod, own, others, grace)
			}
			if shortened() {
				// A second delete with a shorter grace period: the stop
				// starts again with it, at the pod's state as it is now.
				r.log.Info("grace period shortened: stopping the pod again", "pod", podKey(pod))
				l.fresh = true
				continue
			}
			if terr != nil {
				r.log.Error("remove pod", "pod", podKey(pod), "err", terr)
			} else {
				r.log.Info("pod removed", "pod", podKey(pod))
				// The cache must not show the pod to housekeeping, as an
				// orphan, until a relist that may be a minute away.
				if _, err := r.cache.refresh(ctx, w.uid); err != nil && ctx.Err() == nil {
					r.log.Warn("look at a removed pod", "pod", podKey(pod), "err", err)
				}
				if r.retire(w, pod) {
					return 0, true
				}
				// Its manifest was written back while it stopped (rm,
				// then cp): it is wanted again, so it is made again.
				r.log.Info("pod defined again while it was being removed: making it again", "pod", podKey(pod))
				// A new pod, as after its orphans' removal: no eviction
				// or passed deadline of the one removed holds it.
				w.startAnew()
				l.fresh = true
				continue
			}
		}
		var retry time.Duration
		acted, failed := false, false
		switch {
		case err != nil:
			r.log.Warn("runtime state unavailable", "pod", podKey(pod), "err", err)
			retry = time.Second
		case removed:
			retry = time.Second // the teardown failed: try again
		case l.actedOn != nil && st.equal(l.actedOn):
			// The last sync acted, yet the runtime shows nothing new:
			// wait for its retry time rather than repeat it in a loop.
			retry = soonest(l.lastRetry, w.nextWake())
			if retry == 0 {
				retry = time.Second // look once more, lest a held start be forgotten
			}
		default:
			var actions *podActions
			var syncErr error
			sctx, ended := w.beginSync(ctx)
			actions, acted, syncErr = w.sync(sctx, pod, st)
			if ended() {
				// Removed meanwhile: the removal, now, at the pod's
				// state as it is.
				l.fresh = true
				continue
			}
			l.lastRetry = actions.RetryAfter()
			retry = soonest(l.lastRetry, w.nextWake())
			failed = syncErr != nil && ctx.Err() == nil
		}
		l.actedOn = nil
		switch {
		case failed:
			l.errDelay = min(max(2*l.errDelay, errorBackoffMin), errorBackoffMax)
			l.errUntil = r.clock.Now().Add(l.errDelay)
			retry = max(retry, l.errDelay)
		case err == nil && !removed:
			l.errDelay, l.errUntil = 0, time.Time{}
			if acted {
				// Look again at once, at state that shows what was just done.
				l.actedOn = st
				l.fresh = true
				continue
			}
		}
		// What the next look is is decided by what ends the wait (after a
		// failure: fresh whatever it is).
		l.gen, l.fresh = 0, failed
		return retry, false
	}
}

// Back-off of a pod's syncs after one failed: the kubelet's pod workers
// wait 10 s.
const (
	errorBackoffMin = time.Second
	errorBackoffMax = 10 * time.Second
)

// wait waits for a wake, or retry (when not 0) to pass. Until holdUntil
// only a wake that must be synced at once (wakeNow, a new spec) ends the
// wait early; such a wake also sets *now. It reports false when ctx ended.
func (w *podWorker) wait(ctx context.Context, retry time.Duration, holdUntil time.Time, gen *uint64, fresh, now *bool) bool {
	r := w.r
	after := retry
	for {
		var fire <-chan time.Time
		var timer clock.Timer
		if after > 0 {
			timer = r.clock.NewTimer(after)
			fire = timer.C()
		}
		woken, urgent := false, false
		select {
		case <-ctx.Done():
		case <-w.wakeCh:
			g, f, n := w.takeWake()
			*gen = max(*gen, g)
			*fresh = *fresh || f
			woken, urgent = true, n
			*now = *now || n
		case <-fire:
			*gen, *fresh = 0, true
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return false
		}
		if t := r.clock.Now(); woken && !urgent && t.Before(holdUntil) {
			// Backing off after a failure: only a new spec or the
			// runtime's return is worth a sync now; the rest waits for
			// the back-off to end.
			after = holdUntil.Sub(t)
			continue
		}
		return true
	}
}

// soonest is the smallest of the durations above zero, or zero.
func soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}

// syncBegins marks the start of a sync: what the containers' configuration
// waits for and arrives from now on is news to it (recordStartError).
func (w *podWorker) syncBegins() {
	w.mu.Lock()
	w.syncConfigGen = w.configGen
	w.mu.Unlock()
}

// sync computes and applies one round of actions, then publishes the pod's
// status. It reports whether there was anything to do, and what of it
// failed.
func (w *podWorker) sync(ctx context.Context, pod *v1.Pod, st *podState) (*podActions, bool, error) {
	r := w.r
	w.syncBegins()
	// The UID first: what every other step acts on (stops, adopts, the pod
	// directory) must be this pod's.
	if own, others, why := uidConflict(pod, st); why != nil {
		switch r.orphansOfUID(others) {
		case orphansUndecided:
			// Neither Failed (a terminal phase in the API) nor started:
			// retried, with the error back-off, until the sources are.
			w.noteWait("uid "+strings.Join(podNames(others), ","),
				"pod waits for every source to deliver: its uid's objects are another pod's",
				"pod", podKey(pod), "uid", pod.UID, "owners", podNames(others))
			return &podActions{}, false, fmt.Errorf("%s; deciding once every source has delivered", why.message)
		case orphansKept:
			return w.syncConflict(ctx, pod, own, why)
		}
		if err := r.removeOrphansOfUID(ctx, pod, others); err != nil {
			return &podActions{}, false, err
		}
		w.startAnew()
		st = own
	}
	// Then its name, before it has a sandbox: another pod of it may be on
	// the node (nameconflict.go).
	if st == nil || len(st.Sandboxes) == 0 {
		why, err := w.admitName(ctx, pod)
		if err != nil {
			return &podActions{}, false, err
		}
		if why != nil {
			return w.syncConflict(ctx, pod, st, why)
		}
	}
	w.waitingFor = ""
	if msg, ok := w.evictedMessage(pod); ok {
		return w.syncEvicted(ctx, pod, st, msg)
	}
	// Admission first: a pod refused its host ports or an extended
	// resource runs nothing.
	why, err := r.admitPod(ctx, pod, st)
	if err != nil {
		return &podActions{}, false, err
	}
	if why != nil {
		return w.syncRefused(ctx, pod, st, why)
	}
	if why := nodeRejection(pod, st, r.cfg.Sysctls, r.cfg.AppArmor); why != nil {
		return w.stopAsFailed(ctx, pod, st, GracePeriod(pod), "pod refused: "+why.reason, v1.PodStatus{Phase: v1.PodFailed,
			Reason: why.reason, Message: why.message})
	}
	start := r.clock.Now()
	prev := r.previousStatus(w.uid)
	if w.renewedBy(pod, prev) {
		// The edit of a pod stopped for good (evicted, past its deadline)
		// is a new pod, as the kubelet sees an edited static pod: it
		// starts, and its deadline counts, from now.
		r.log.Info("pod edited after it was stopped for good: starting it anew", "pod", podKey(pod))
		prev = &v1.PodStatus{StartTime: &metav1.Time{Time: start}}
	}
	r.withAppliedResources(st)
	var actions *podActions
	exceeded, deadlineIn := activeDeadline(pod, prev, podStartTime(prev, st, start), start)
	if exceeded {
		// Past its activeDeadlineSeconds: nothing of it runs again.
		r.probes.RemovePod(w.uid)
		actions = deadlineActions(st)
		if (prev == nil || prev.Reason != ReasonDeadlineExceeded) && w.passedDeadline(pod) {
			r.log.Info("pod past its active deadline: stopping it", "pod", podKey(pod),
				"activeDeadlineSeconds", ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0))
			r.event(pod, "", v1.EventTypeNormal, ReasonDeadlineExceeded, "%s", messageDeadlineExceeded)
		}
	} else {
		r.trackProbes(pod, st)
		actions = computePodActions(pod, st, r.backoff, r.probes)
		// A sync runs when the deadline comes, whatever else happens.
		actions.DeadlineIn = deadlineIn
		w.refreshVolumes(ctx, pod, st, actions)
	}

	var applyErr error
	if !actions.Empty() {
		if applyErr = r.applyActions(ctx, pod, st, actions, w); applyErr != nil && ctx.Err() == nil {
			r.log.Warn("sync pod", "pod", podKey(pod), "err", applyErr)
		}
		took := r.clock.Since(start)
		r.metrics.observeSync(took)
		r.log.Debug("synced pod", "pod", podKey(pod), "took", took)
	}
	// Why containers could not start, this sync's failures included: a
	// refused or failed start shows at once.
	errs := w.shownErrors()

	status := computePodStatus(statusInput{
		Pod: pod, State: st, Actions: actions, Errors: errs, HostIP: r.cfg.HostIP, Probes: r.probes,
		Runtime: r.cfg.RuntimeName, Previous: prev, Now: r.clock.Now(), Messages: w.terminationMessages(ctx, pod, st),
	})
	out := pod.DeepCopy()
	out.Status = status
	r.publish(out, false, actions.Converged(), st)
	return actions, !actions.Empty(), applyErr
}

// noteWait logs msg, that the pod waits for what, once while it waits for
// it: the sync is retried with the error back-off (every errorBackoffMax
// at last) for as long as a source stays undelivered, a URL down for
// hours among them, and each retry would log the line again.
func (w *podWorker) noteWait(what, msg string, args ...any) {
	if w.waitingFor == what {
		return
	}
	w.waitingFor = what
	w.r.log.Info(msg, args...)
}
