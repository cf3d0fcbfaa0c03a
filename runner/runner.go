package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/health"
)

// Config holds a Runner's dependencies and settings.
type Config struct {
	Runtime Runtime
	// RuntimeName prefixes container IDs in pod status ("docker://...").
	RuntimeName string
	NodeName    string
	RootDir     string
	// InfraImage is the sandbox image; the caller makes sure it exists.
	InfraImage      string
	HostIP          string
	AllowPrivileged bool
	Objects         *Objects
	// Clock is the time of everything the runner does: its tickers
	// (relist, resync, housekeeping), each pod's back-off and retry
	// timers, the prober's schedule, and the times it records. nil is the
	// real clock. (Deadlines of hooks and probes are real time.)
	Clock clock.WithTicker
	Log   *slog.Logger
	// RelistPeriod is how often the runtime's state is re-read to notice
	// containers that exited (default 1 s, as the kubelet's PLEG).
	RelistPeriod time.Duration
	// Node capacity, for resourceFieldRef of resources without a limit.
	NodeMilliCPU int64
	NodeMemory   int64

	// SyncFrequency: every pod is synced at least this often, events or
	// not (default 1 min).
	SyncFrequency time.Duration
	// HousekeepingPeriod is how often pods that no source defines are looked
	// for (default 2 s).
	HousekeepingPeriod time.Duration
	// SourcesReady reports whether every source has delivered a first good
	// snapshot. Until then nothing unknown is removed. nil means "never":
	// `podrun once` removes only what it is asked to.
	SourcesReady func() bool
	// Metrics records the sync core's series; nil records nothing.
	Metrics *Metrics
	// Images configures image pulls: the node's registry credentials,
	// serialized pulls, the record of image use. nil: none of them.
	Images *ImageOptions
	// Admit, when set, is asked before a pod's sandbox is made (a new pod,
	// or one whose sandbox must be made again); an error keeps the pod
	// from starting, shown as its containers' waiting reason (an
	// *AdmitError's Reason, say OutOfDisk), and it is asked again every
	// 10 s. Running pods are never asked.
	Admit func(pod *v1.Pod) error
	// KeepSource reports whether pods defined by source must be kept although
	// no source defines them now: the source has been failing since podrun
	// started, so podrun does not know what it defines. nil: keep none.
	KeepSource func(source string) bool
}

// Op is the kind of a PodUpdate.
type Op int

const (
	// OpAdd and OpUpdate set the desired spec of the pods.
	OpAdd Op = iota
	OpUpdate
	// OpRemove stops and removes the pods.
	OpRemove
)

// PodUpdate changes the desired state of some pods.
type PodUpdate struct {
	Op   Op
	Pods []*v1.Pod
}

// Runner is the sync core: it keeps every pod it is given at its spec, with a
// worker per pod (serialized per pod, parallel across pods), and publishes
// each pod's status.
type Runner struct {
	cfg Config
	// rt is the runtime every core call goes through (counted when there
	// are metrics); raw is the runtime as given, asked for optional
	// abilities (Execer, EventSource, ResourceUpdater).
	rt      Runtime
	raw     Runtime
	metrics *Metrics
	// lastLoop is when the sync loop last turned (UnixNano), for Healthy.
	lastLoop atomic.Int64
	probes   *health.Manager
	// applied holds the resources hash of containers updated in place, by
	// container ID: a container's labels keep the hash it was made with.
	applied sync.Map
	log     *slog.Logger
	clock   clock.WithTicker
	backoff *flowcontrol.Backoff
	cache   *podCache
	pulls   singleflight.Group

	mu      sync.Mutex
	workers map[string]*podWorker
	status  map[string]*v1.Pod // last published pod with status, by UID
	// converged says, by UID, whether the sync that computed status found
	// nothing of the pod running that must not (podActions.Converged).
	converged map[string]bool
	changed   chan struct{}   // closed and replaced on every status change
	removing  map[string]bool // unknown pods being torn down by housekeeping
	wg        sync.WaitGroup
}

// New returns a Runner; Run starts it.
func New(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Objects == nil {
		cfg.Objects = NewObjects()
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = time.Second
	}
	if cfg.RuntimeName == "" {
		cfg.RuntimeName = "podrun"
	}
	if cfg.SyncFrequency <= 0 {
		cfg.SyncFrequency = time.Minute
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = 2 * time.Second
	}
	r := &Runner{
		cfg:       cfg,
		rt:        cfg.Runtime,
		raw:       cfg.Runtime,
		metrics:   cfg.Metrics,
		log:       cfg.Log,
		clock:     cfg.Clock,
		backoff:   newBackoff(cfg.Clock),
		workers:   map[string]*podWorker{},
		status:    map[string]*v1.Pod{},
		converged: map[string]bool{},
		changed:   make(chan struct{}),
		removing:  map[string]bool{},
	}
	if cfg.Metrics != nil {
		r.rt = countingRuntime{Runtime: cfg.Runtime, m: cfg.Metrics}
	}
	execer, _ := cfg.Runtime.(Execer)
	r.probes = health.NewManager(health.ManagerOptions{
		Clock: cfg.Clock, Exec: execer, Log: cfg.Log,
		OnChange: func(uid string) { r.wakePods([]string{uid}) },
		OnResult: cfg.Metrics.probeResult,
	})
	var lister PodObjectLister
	if l, ok := cfg.Runtime.(PodObjectLister); ok {
		lister = countingLister{PodObjectLister: l, m: cfg.Metrics}
	}
	r.cache = newPodCache(r.rt, lister, cfg.Log, cfg.Clock, cfg.RelistPeriod, r.wakePods)
	r.cache.recovered = r.wakeAllNow
	r.lastLoop.Store(cfg.Clock.Now().UnixNano())
	return r
}

// Healthy reports an error when the sync loop has not turned for two sync
// periods: podrun is stuck and should be restarted.
func (r *Runner) Healthy() error {
	last := time.Unix(0, r.lastLoop.Load())
	if since := r.clock.Since(last); since > 2*r.cfg.SyncFrequency {
		return fmt.Errorf("the sync loop last turned %s ago", since.Round(time.Second))
	}
	return nil
}

// Run applies updates until ctx ends, then waits for the pod workers to
// stop. Pods keep running when Run returns.
func (r *Runner) Run(ctx context.Context, updates <-chan PodUpdate) {
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		r.cache.run(ctx)
	}()
	if es, ok := r.raw.(EventSource); ok {
		loops.Add(1)
		go func() {
			defer loops.Done()
			r.watchEvents(ctx, es)
		}()
	}
	resync := r.clock.NewTicker(r.cfg.SyncFrequency)
	defer resync.Stop()
	housekeeping := r.clock.NewTicker(r.cfg.HousekeepingPeriod)
	defer housekeeping.Stop()
	backoffGC := r.clock.NewTicker(time.Minute)
	defer backoffGC.Stop()
	for done := false; !done; {
		r.lastLoop.Store(r.clock.Now().UnixNano())
		select {
		case <-ctx.Done():
			done = true
		case u, ok := <-updates:
			if !ok {
				updates = nil
				continue
			}
			r.apply(ctx, u)
		case <-resync.C():
			r.wakeAll(r.cache.invalidate())
		case <-housekeeping.C():
			r.housekeeping(ctx)
		case <-backoffGC.C():
			r.backoff.GC()
		}
	}
	r.wg.Wait()
	loops.Wait()
	r.probes.Stop()
}

// watchEvents syncs a pod as soon as the runtime reports a change to one of
// its containers, rather than at the next relist. The pod's worker looks at
// that pod alone (a refresh): an event costs O(1) runtime work, however
// many pods there are. An event of a pod without a worker is left to
// housekeeping, which works from the relist.
func (r *Runner) watchEvents(ctx context.Context, es EventSource) {
	for ev := range es.Events(ctx) {
		if ev.Resync {
			// The engine is back and events may have been missed: look
			// at every pod again, now.
			r.wakeAllNow()
			continue
		}
		r.mu.Lock()
		if w := r.workers[ev.PodUID]; w != nil {
			w.wakeFresh()
		}
		r.mu.Unlock()
	}
}

// wakeAllNow has every worker sync at once, at fresh state, ending any
// error back-off: the runtime is back after an outage.
func (r *Runner) wakeAllNow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		w.wakeNow()
	}
}

func (r *Runner) wakeAll(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		w.wake(gen)
	}
}

// apply hands each pod of an update to its worker.
func (r *Runner) apply(ctx context.Context, u PodUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pod := range u.Pods {
		uid := string(pod.UID)
		w := r.workers[uid]
		if u.Op == OpRemove {
			if w != nil {
				w.remove()
			}
			continue
		}
		if w == nil {
			w = newPodWorker(r, pod)
			r.workers[uid] = w
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				w.run(ctx)
			}()
			continue
		}
		w.update(pod)
	}
}

// wakePods asks the workers of the given pods to sync now.
func (r *Runner) wakePods(uids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range uids {
		if w := r.workers[uid]; w != nil {
			w.wake(0)
		}
	}
}

// Pods returns every pod the runner knows, with its last status.
func (r *Runner) Pods() []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*v1.Pod, 0, len(r.status))
	for _, p := range r.status {
		out = append(out, p)
	}
	return out
}

// Pod returns the pod with uid and its last status.
func (r *Runner) Pod(uid string) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.status[uid]
	return p, ok
}

// SyncedPod returns the pod with uid and its last status, as Pod does, and
// whether the sync that computed that status found the pod converged:
// nothing of it running that must not - at most one running sandbox, its
// latest, and in it no running container but the latest attempt of each
// name of the spec (see podActions.Converged). The status alone cannot
// tell: it shows only the latest attempt of each container. `podrun once`
// needs both before it reports success.
func (r *Runner) SyncedPod(uid string) (pod *v1.Pod, converged, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.status[uid]
	return p, ok && r.converged[uid], ok
}

// Changed returns a channel closed at the next status change.
func (r *Runner) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// publish records the pod's status, computed by a sync that found the pod
// converged or not (see SyncedPod), or that the pod is removed.
func (r *Runner) publish(pod *v1.Pod, removed, converged bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	uid := string(pod.UID)
	if removed {
		delete(r.status, uid)
		delete(r.converged, uid)
		delete(r.workers, uid)
	} else {
		r.status[uid] = pod
		r.converged[uid] = converged
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Runner) previousStatus(uid string) *v1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.status[uid]; ok {
		return &p.Status
	}
	return nil
}

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
}

type startError struct {
	waiting
	at, until time.Time
}

// admitRetry is how soon a pod refused admission (low disk) is asked again:
// not an exponential back-off, so that it starts soon after space is freed.
const admitRetry = 10 * time.Second

// errImagePullShown is how long a failed pull shows as ErrImagePull before
// its back-off shows as ImagePullBackOff, as the kubelet's next sync would.
const errImagePullShown = 2 * time.Second

func newPodWorker(r *Runner, pod *v1.Pod) *podWorker {
	return &podWorker{r: r, uid: string(pod.UID), pod: pod, wakeCh: make(chan struct{}, 1), errs: map[string]startError{}}
}

func (w *podWorker) update(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.removed = false
	w.needNow = true
	w.mu.Unlock()
	w.wake(0)
}

func (w *podWorker) remove() {
	w.mu.Lock()
	w.removed = true
	w.needNow = true
	w.mu.Unlock()
	w.wake(0)
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
	r := w.r
	var gen uint64
	fresh := true
	var (
		// actedOn is the state the last sync acted on, until a fresh look
		// shows what came of it; lastRetry is when that sync asked to look
		// again.
		actedOn   *podState
		lastRetry time.Duration
		// errDelay is the back-off after syncs that failed (0 after one
		// that did not), errUntil when it ends.
		errDelay time.Duration
		errUntil time.Time
	)
	for {
		var st *podState
		var err error
		if fresh {
			st, err = r.cache.refresh(ctx, w.uid)
		} else {
			st, err = r.cache.get(ctx, w.uid, gen)
		}
		if ctx.Err() != nil {
			return
		}
		pod, removed := w.desired()
		if removed {
			grace := gracePeriod(pod)
			if err := r.teardown(ctx, pod, st, grace); err != nil {
				r.log.Error("remove pod", "pod", podKey(pod), "err", err)
			} else {
				r.log.Info("pod removed", "pod", podKey(pod))
				r.publish(pod, true, false)
				return
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
		case actedOn != nil && st.equal(actedOn):
			// The last sync acted, yet the runtime shows nothing new:
			// wait for its retry time rather than repeat it in a loop.
			retry = soonest(lastRetry, w.nextRetry())
			if retry == 0 {
				retry = time.Second // look once more, lest a held start be forgotten
			}
		default:
			var actions *podActions
			var syncErr error
			actions, acted, syncErr = w.sync(ctx, pod, st)
			lastRetry = actions.RetryAfter()
			retry = soonest(lastRetry, w.nextRetry())
			failed = syncErr != nil && ctx.Err() == nil
		}
		actedOn = nil
		switch {
		case failed:
			errDelay = min(max(2*errDelay, errorBackoffMin), errorBackoffMax)
			errUntil = r.clock.Now().Add(errDelay)
			retry = max(retry, errDelay)
		case err == nil && !removed:
			errDelay, errUntil = 0, time.Time{}
			if acted {
				// Look again at once, at state that shows what was just done.
				actedOn = st
				fresh = true
				continue
			}
		}
		// What the next look is is decided by what ends the wait (after a
		// failure: fresh whatever it is).
		gen, fresh = 0, failed
		now := false
		if !w.wait(ctx, retry, errUntil, &gen, &fresh, &now) {
			return
		}
		if now {
			// A new spec, or the runtime back: a fresh start.
			errDelay, errUntil = 0, time.Time{}
		}
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

func podKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

func gracePeriod(pod *v1.Pod) time.Duration {
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// errorReason classifies why a container could not be started.
func errorReason(err error) string {
	var ce *configError
	var ie *imageError
	if reason, ok := AdmitReason(err); ok {
		return reason
	}
	switch {
	case errors.As(err, &ie):
		return ie.reason
	case errors.As(err, &ce):
		return "CreateContainerConfigError"
	case errors.As(err, new(*hookError)):
		return "PostStartHookError"
	}
	return "RunContainerError"
}

// sync computes and applies one round of actions, then publishes the pod's
// status. It reports whether there was anything to do, and what of it
// failed.
func (w *podWorker) sync(ctx context.Context, pod *v1.Pod, st *podState) (*podActions, bool, error) {
	r := w.r
	start := r.clock.Now()
	r.withAppliedResources(st)
	r.trackProbes(pod, st)
	actions := computePodActions(pod, st, r.backoff, r.probes)

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
		Runtime: r.cfg.RuntimeName, Previous: r.previousStatus(w.uid), Now: r.clock.Now(),
	})
	out := pod.DeepCopy()
	out.Status = status
	r.publish(out, false, actions.Converged())
	return actions, !actions.Empty(), applyErr
}

// recordStartError remembers why name did not start, with image-pull style
// back-off before the next try.
func (w *podWorker) recordStartError(pod *v1.Pod, c *v1.Container, err error) {
	r := w.r
	now := r.clock.Now()
	retry := admitRetry
	if _, refused := AdmitReason(err); !refused {
		key := backoffKey(pod, c) + "/start"
		r.backoff.Next(key, now)
		retry = r.backoff.Get(key)
	}
	w.mu.Lock()
	w.errs[c.Name] = startError{waiting: waiting{Reason: errorReason(err), Message: err.Error()}, at: now, until: now.Add(retry)}
	w.mu.Unlock()
}

// shownErrors are the start errors as the pod status shows them: a failed
// pull is ErrImagePull at first, then ImagePullBackOff while it waits.
func (w *podWorker) shownErrors() map[string]waiting {
	now := w.r.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]waiting, len(w.errs))
	for name, e := range w.errs {
		shown := e.waiting
		if shown.Reason == reasonErrImagePull && now.Sub(e.at) >= errImagePullShown && now.Before(e.until) {
			shown.Reason = reasonImagePullBackOff
		}
		out[name] = shown
	}
	return out
}

// nextRetry is how long until a start error's back-off ends, or until a
// failed pull should show as ImagePullBackOff; 0 if nothing waits.
func (w *podWorker) nextRetry() time.Duration {
	now := w.r.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Duration
	soonest := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, e := range w.errs {
		soonest(e.until.Sub(now))
		if e.Reason == reasonErrImagePull {
			soonest(e.at.Add(errImagePullShown).Sub(now))
		}
	}
	return next
}

func (w *podWorker) clearStartError(name string) {
	w.mu.Lock()
	delete(w.errs, name)
	w.mu.Unlock()
}

// holdStart reports whether name must not be started yet, after a failure.
// A held image pull shows as ImagePullBackOff, as in the kubelet.
func (w *podWorker) holdStart(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.errs[name]
	if !ok || !w.r.clock.Now().Before(e.until) {
		return false
	}
	return true
}

// SetObjects replaces the ConfigMaps and Secrets pods may refer to.
func (r *Runner) SetObjects(cms []*v1.ConfigMap, secrets []*v1.Secret) {
	r.cfg.Objects.Set(cms, secrets)
}

// withAppliedResources makes st show the resources hash of containers whose
// resources were updated in place since they were made.
func (r *Runner) withAppliedResources(st *podState) {
	for i, c := range st.Containers {
		if h, ok := r.applied.Load(c.ID); ok && h.(string) != c.ResourcesHash {
			cp := *c
			cp.ResourcesHash = h.(string)
			st.Containers[i] = &cp
		}
	}
}

// trackProbes has the prober probe every running container of the pod's
// current sandbox (adopted ones too), and forget the others.
func (r *Runner) trackProbes(pod *v1.Pod, st *podState) {
	sb := st.latestSandbox()
	if sb == nil {
		return
	}
	podIP := sb.IP
	if pod.Spec.HostNetwork {
		podIP = r.cfg.HostIP
	}
	for _, c := range st.Containers {
		spec := findContainer(pod, c.Name)
		if c.State != StateRunning || c.SandboxID != sb.ID || spec == nil || c.Hash != ContainerHash(spec) {
			r.probes.RemoveContainer(c.ID)
			continue
		}
		r.probes.AddContainer(string(pod.UID), c.ID, spec, podIP, c.StartedAt)
	}
}
