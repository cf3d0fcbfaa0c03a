package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/security/apparmor"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
)

// Config holds a Runner's dependencies and settings.
type Config struct {
	Runtime engine.Runtime
	// RuntimeName prefixes container IDs in pod status ("docker://...").
	RuntimeName string
	NodeName    string
	RootDir     string
	// InfraImage is the sandbox image; the caller makes sure it exists.
	InfraImage      string
	HostIP          string
	AllowPrivileged bool
	// ExtendedResources are the extended resources the node has, by
	// name, with their count (--extended-resource): pods that ask for
	// them are admitted while the count lasts. nvidia.com/gpu needs the
	// engine's NVIDIA runtime besides; undeclared, it is not counted.
	ExtendedResources map[v1.ResourceName]int64
	// ClusterDNS and ClusterDomain make the resolv.conf of ClusterFirst
	// pods (KubeletConfiguration clusterDNS, clusterDomain); without
	// ClusterDNS they get the host's.
	ClusterDNS    []string
	ClusterDomain string
	// HostDNS is the host's resolver configuration (the kubelet's
	// resolvConf): under dnsPolicy Default (and ClusterFirst without
	// ClusterDNS) a pod's dnsConfig adds to it, and ClusterFirst pods
	// search its domains after the cluster's. nil: unknown; such a pod
	// then gets its dnsConfig's entries alone.
	HostDNS *engine.DNSConfig
	// NodeHostsFile is the node's hosts file, which the /etc/hosts of a
	// pod on the host's network starts with (etchosts.go); "" is
	// /etc/hosts.
	NodeHostsFile string
	Objects       *Objects
	// RuntimeClasses resolve the pods' runtimeClassName to the engine's
	// runtimes (nil: only the sources' RuntimeClasses, SetRuntimeClasses).
	RuntimeClasses *RuntimeClasses
	// Tokens gives the service account tokens of projected volumes
	// (cluster mode); nil: a pod with a serviceAccountToken projection
	// cannot start (CreateContainerConfigError).
	Tokens TokenSource
	// Clock is the time of everything the runner does: its tickers
	// (relist, resync, housekeeping), each pod's back-off and retry
	// timers, the prober's schedule, and the times it records. nil is the
	// real clock. (Deadlines of hooks and probes are real time.)
	Clock clock.WithTicker
	Log   *slog.Logger
	// RelistPeriod is how often the runtime's state is re-read to notice
	// containers that exited when no event stream tells (default 1 s, as
	// the kubelet's PLEG). While the runtime's events flow the relist is a
	// safety net whose period doubles up to RelistMaxPeriod (default
	// DefaultRelistMaxPeriod); see podCache.
	RelistPeriod    time.Duration
	RelistMaxPeriod time.Duration
	// RuntimeRequestTimeout bounds a relist, as the kubelet's
	// --runtime-request-timeout bounds its runtime calls (the engines
	// bound their own calls with it besides): a runtime that takes the
	// list and never answers is down, and the relist says so (the node is
	// not Ready) and tries again, rather than wait for good. 0 means
	// engine.DefaultRequestTimeout.
	RuntimeRequestTimeout time.Duration
	// Node capacity, for resourceFieldRef of resources without a limit;
	// NodeMemory also scales Burstable containers' oom_score_adj.
	NodeMilliCPU int64
	NodeMemory   int64
	// OOMScoreAdjFloor is the lowest oom_score_adj podrun may give a
	// container: where it may not lower scores (no CAP_SYS_RESOURCE), its
	// own process's. Lower scores (Guaranteed, node-critical, sandboxes) are
	// raised to it, and Burstable ones kept above them. nil: the kubelet's
	// scores as they are.
	OOMScoreAdjFloor *int

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
	// ClusterServices says the cluster's Services come (SetServices):
	// pods from the apiserver wait for them before their containers
	// start, as their environment has the service links.
	ClusterServices bool
	// Sysctls are the sysctls pods may set (SysctlForbidden otherwise);
	// nil: the kubelet's safe sysctls alone.
	Sysctls *SysctlAllowlist
	// Admit, when set, is asked before a pod's sandbox is made (a new pod,
	// or one whose sandbox must be made again); an error keeps the pod
	// from starting, shown as its containers' waiting reason (an
	// AdmitReason, say OutOfDisk), and it is asked again every
	// 10 s. Running pods are never asked.
	Admit func(pod *v1.Pod) error
	// PodCgroups makes the pods' own cgroups (pod-level resources, the
	// per-pod pids limit); nil makes none, and a pod that needs one cannot
	// start.
	PodCgroups *PodCgroups
	// AppArmor is the AppArmor admission and the host's support; nil is
	// the kubelet's own (apparmor.NewValidator), which reads the host.
	AppArmor AppArmorValidator
	// Events records pod events (cluster mode); nil records none.
	Events EventRecorder
	// KeepSource reports whether pods defined by source must be kept although
	// no source defines them now: the source has been failing since podrun
	// started, so podrun does not know what it defines. nil: keep none.
	KeepSource func(source string) bool
}

// DefaultRelistMaxPeriod caps the relist period while the runtime's events
// flow. It is the default --sync-frequency, whose resync relists the node
// anyway: a longer cap would save nothing, and a change the events missed
// is still seen within a minute (the kubelet's evented PLEG waits 300 s).
const DefaultRelistMaxPeriod = time.Minute

// Op is the kind of a PodUpdate.
type Op int

// The zero Op is none of them, as in package source, so that a PodUpdate
// whose Op was never set is refused rather than taken for an add.
const (
	// OpAdd and OpUpdate set the desired spec of the pods.
	OpAdd Op = iota + 1
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
	rt      engine.Runtime
	raw     engine.Runtime
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
	// ipReader reads a new sandbox's address in one call, when the
	// runtime can (apply.go); nil otherwise.
	ipReader sandboxIPReader
	pulls    sharedCalls
	// copies are the image volumes' copies of image filesystems
	// (imagevolumes.go).
	copies imageCopies
	// runCtx is Run's context (a runCtxBox), for work a pod's sync shares
	// with others (sharedWork).
	runCtx atomic.Value
	// ports is the host-port admission (admitports.go).
	ports *portAdmission

	mu      sync.Mutex
	workers map[string]*podWorker
	status  map[string]*v1.Pod // last published pod with status, by UID
	// services are the cluster's Services, for service links
	// (serviceenv.go); servicesSynced says they were set once.
	services       []*v1.Service
	servicesSynced bool
	// final is the last status of pods removed because the API deleted
	// them, by UID, until their source drops them (finalstatus.go).
	final map[string]*v1.Pod
	// converged says, by UID, whether the sync that computed status found
	// nothing of the pod running that must not (podActions.Converged).
	converged map[string]bool
	// from is, by UID, the runtime state the last status was computed
	// from (nil when it came from no one state), for Recheck.
	from     map[string]*podState
	changed  chan struct{}   // closed and replaced on every status change
	removing map[string]bool // unknown pods being torn down by housekeeping
	// namesakeWaiters maps a pod that waits for the removal of another of
	// its name (admitName) to that pod's UID: its end wakes the waiter.
	namesakeWaiters map[string]string
	dirScan         orphanDirScan // housekeeping's goroutine only
	wg              sync.WaitGroup
}

// New returns a Runner; Run starts it.
func New(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RuntimeClasses == nil {
		cfg.RuntimeClasses = NewRuntimeClasses(nil)
	}
	if cfg.Objects == nil {
		cfg.Objects = NewObjects()
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = time.Second
	}
	if cfg.RelistMaxPeriod <= 0 {
		cfg.RelistMaxPeriod = DefaultRelistMaxPeriod
	}
	if cfg.RuntimeName == "" {
		cfg.RuntimeName = "podrun"
	}
	if cfg.SyncFrequency <= 0 {
		cfg.SyncFrequency = time.Minute
	}
	if cfg.AppArmor == nil {
		cfg.AppArmor = apparmor.NewValidator()
	}
	if cfg.Sysctls == nil {
		// The safe list is podrun's own: it cannot fail.
		cfg.Sysctls, _ = NewSysctlAllowlist(nil)
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = 2 * time.Second
	}
	if cfg.RuntimeRequestTimeout <= 0 {
		cfg.RuntimeRequestTimeout = engine.DefaultRequestTimeout
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
		final:     map[string]*v1.Pod{},
		converged: map[string]bool{},
		from:      map[string]*podState{},
		changed:   make(chan struct{}),
		removing:  map[string]bool{},
		ports:     newPortAdmission(),

		namesakeWaiters: map[string]string{},
	}
	if cfg.Metrics != nil {
		r.rt = countingRuntime{Runtime: cfg.Runtime, m: cfg.Metrics}
	}
	execer, _ := cfg.Runtime.(engine.Execer)
	r.probes = health.NewManager(health.ManagerOptions{
		Clock: cfg.Clock, Exec: execer, Log: cfg.Log,
		OnChange:  func(uid string) { r.wakePods([]string{uid}) },
		OnResult:  cfg.Metrics.probeResult,
		OnFailure: r.probeFailed,
		OnError:   r.probeErrored,
		OnWarning: r.probeWarned,
	})
	var lister engine.PodObjectLister
	if l, ok := cfg.Runtime.(engine.PodObjectLister); ok {
		lister = countingLister{PodObjectLister: l, m: cfg.Metrics}
	}
	if ir, ok := cfg.Runtime.(sandboxIPReader); ok {
		r.ipReader = countingIPReader{sandboxIPReader: ir, m: cfg.Metrics}
	}
	r.cache = newPodCache(r.rt, lister, cfg.Log, cfg.Clock, cfg.RelistPeriod, cfg.RelistMaxPeriod, r.wakePods)
	r.cache.recovered = r.wakeAllNow
	r.cache.listTimeout = cfg.RuntimeRequestTimeout
	r.cache.waited = cfg.Metrics.relistWait
	r.lastLoop.Store(cfg.Clock.Now().UnixNano())
	return r
}

// RecentObjects returns the node's sandboxes and containers as the
// runner knows them (its last relist, with what events and its own syncs
// saw since), when that relist succeeded and began at most maxAge ago; ok
// false otherwise. For the container GC, which then need not list the
// node itself. The objects are shared: never modify them.
func (r *Runner) RecentObjects(maxAge time.Duration) (sbs []*engine.Sandbox, cs []*engine.Container, ok bool) {
	return r.cache.objects(maxAge)
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

// RuntimeErr is why the container engine's state could not be read at the
// last relist (nil when it could): a node is not Ready while its runtime
// is down, as the kubelet's runtime health check says.
func (r *Runner) RuntimeErr() error {
	r.cache.mu.Lock()
	defer r.cache.mu.Unlock()
	if r.cache.err != nil {
		return fmt.Errorf("container runtime is down: %w", r.cache.err)
	}
	return nil
}

// Run applies updates until ctx ends, then waits for the pod workers to
// stop. Pods keep running when Run returns.
func (r *Runner) Run(ctx context.Context, updates <-chan PodUpdate) {
	r.runCtx.Store(runCtxBox{ctx})
	var loops sync.WaitGroup
	es, evented := r.raw.(engine.EventSource)
	var evs <-chan engine.Event
	if evented {
		// Subscribed before the first relist: nothing falls between.
		evs = es.Events(ctx)
		r.cache.eventsConnected(false)
		loops.Add(1)
		go func() {
			defer loops.Done()
			r.watchEvents(evs)
		}()
	}
	loops.Add(1)
	go func() {
		defer loops.Done()
		r.cache.run(ctx)
	}()
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

// runCtxBox holds Run's context in an atomic.Value.
type runCtxBox struct{ ctx context.Context }

// sharedWork returns ctx for work a pod's sync begins that other pods'
// syncs may wait for (an image volume's copy): the removal of the pod,
// which ends its sync (beginSync), does not end it; ctx's deadline, if
// any, and the runner's stop do. Without Run (a command's one-off calls),
// it is ctx.
func (r *Runner) sharedWork(ctx context.Context) (context.Context, context.CancelFunc) {
	run, ok := r.runCtx.Load().(runCtxBox)
	if !ok {
		return ctx, func() {}
	}
	base := context.WithoutCancel(ctx)
	var c context.Context
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok {
		c, cancel = context.WithDeadline(base, d)
	} else {
		c, cancel = context.WithCancel(base)
	}
	stop := context.AfterFunc(run.ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

// watchEvents syncs a pod as soon as the runtime reports a change to one of
// its containers, rather than at the next relist. The pod's worker looks at
// that pod alone (a refresh): an event costs O(1) runtime work, however
// many pods there are. An event of a pod without a worker asks for a
// relist, which housekeeping works from. The stream's health sets the
// relist's period (podCache).
func (r *Runner) watchEvents(evs <-chan engine.Event) {
	// A stream that ends leaves the relist alone to notice changes.
	defer r.cache.eventsLost()
	for ev := range evs {
		switch {
		case ev.Lost:
			r.cache.eventsLost()
			continue
		case ev.Resync:
			// The engine is back and events may have been missed: look
			// at every pod again, now.
			r.cache.eventsConnected(true)
			r.wakeAllNow()
			continue
		}
		r.cache.announce(ev.PodUID)
		r.mu.Lock()
		w := r.workers[ev.PodUID]
		if w != nil {
			w.wakeFresh()
		}
		r.mu.Unlock()
		if w == nil {
			// A pod no worker keeps (another podrun's, or one being
			// removed): housekeeping must see it as it is, not as the
			// last relist, maybe a minute old, saw it. Kicks coalesce.
			r.cache.invalidate()
		}
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
	if u.Op != OpAdd && u.Op != OpUpdate && u.Op != OpRemove {
		r.log.Error("pod update without a valid op ignored", "op", int(u.Op), "pods", len(u.Pods))
		return
	}
	// Every pod's host-port and resource claim is recorded before any
	// worker of the update starts: admission decides the undecided claims
	// together, in the sources' order, and a worker that began while the
	// loop went on could decide its pod before a later pod's claim (one
	// that runs already and must keep its port) was known.
	var wake []string
	for _, pod := range u.Pods {
		uid := string(pod.UID)
		switch {
		case u.Op == OpRemove, pod.DeletionTimestamp != nil:
			// A pod the apiserver is deleting holds nothing either.
			wake = append(wake, r.ports.remove(uid)...)
		default:
			wake = append(wake, r.ports.set(pod)...)
		}
	}
	for _, pod := range u.Pods {
		uid := string(pod.UID)
		w := r.workers[uid]
		if u.Op == OpRemove {
			delete(r.final, uid)
			if w != nil {
				w.remove()
			}
			continue
		}
		// A pod the apiserver is deleting (deletionTimestamp set) is
		// stopped and removed within its deletion grace period, as the
		// kubelet handles a graceful delete; its source drops it once
		// the API object is gone.
		deleting := pod.DeletionTimestamp != nil
		if w == nil {
			w = newPodWorker(r, pod)
			w.removed = deleting
			r.workers[uid] = w
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				w.run(ctx)
			}()
			continue
		}
		if deleting {
			w.terminate(pod)
			continue
		}
		w.update(pod)
	}
	r.wakeLocked(wake)
}

// wakePods asks the workers of the given pods to sync now.
func (r *Runner) wakePods(uids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakeLocked(uids)
}

// wakeLocked is wakePods with r.mu held. A pod without a worker may be
// the one that kept another from starting under its name: the pods
// refused so are asked again.
func (r *Runner) wakeLocked(uids []string) {
	unknown := false
	for _, uid := range uids {
		if w := r.workers[uid]; w != nil {
			w.wake(0)
		} else {
			unknown = true
		}
	}
	if unknown {
		r.wakeNameConflictsLocked()
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

// Recheck reports whether the last status of each pod of uids was
// computed from the pod's state as the runtime has it now; one relist of
// the node answers for every pod. A pod whose state has moved on since (a
// container that exited after its last sync, its die event not handled
// yet) is synced at once at its state as it is now, and its new status
// follows (Changed); Recheck then reports false. A pod the runner has no
// status of, or one whose status came from no one state, counts as
// current. `podrun once` asks before it reports success and exits, so that
// a pod that has finished by then is seen finished and has its sandbox
// stopped, as the kubelet stops a finished pod's: no podrun is left to do
// it later.
func (r *Runner) Recheck(ctx context.Context, uids []string) (bool, error) {
	gen := r.cache.invalidate()
	current := true
	for _, uid := range uids {
		now, err := r.cache.get(ctx, uid, gen)
		if err != nil {
			return false, fmt.Errorf("list the pods: %w", err)
		}
		r.mu.Lock()
		from, w := r.from[uid], r.workers[uid]
		r.mu.Unlock()
		if from == nil || w == nil || now.equal(from) {
			continue
		}
		current = false
		w.wakeFresh()
	}
	return current, nil
}

// publish records the pod's status, computed from the runtime state from
// by a sync that found the pod converged or not (see SyncedPod), or that
// the pod is removed.
func (r *Runner) publish(pod *v1.Pod, removed, converged bool, from *podState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.publishLocked(pod, removed, converged, from)
}

// retire publishes pod, which its worker w has torn down, as removed, and
// so ends w, unless a source defined the pod again meanwhile (apply handed
// w an update): then it reports false and w goes on. The look at w and the
// end of it are one step under r.mu, which apply holds while it hands w a
// pod, so that no update goes to a worker that is ending.
func (r *Runner) retire(w *podWorker, pod *v1.Pod) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, removed := w.desired(); !removed {
		return false
	}
	r.publishLocked(pod, true, false, nil)
	return true
}

// publishLocked is publish with r.mu held.
func (r *Runner) publishLocked(pod *v1.Pod, removed, converged bool, from *podState) {
	uid := string(pod.UID)
	if removed {
		if last := r.status[uid]; last != nil && pod.DeletionTimestamp != nil {
			r.final[uid] = last
		}
		delete(r.status, uid)
		delete(r.converged, uid)
		delete(r.from, uid)
		delete(r.workers, uid)
		delete(r.namesakeWaiters, uid)
		r.wakeNamesakeWaitersLocked(uid)
	} else {
		r.status[uid] = pod
		r.converged[uid] = converged
		r.from[uid] = from
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// publishNotReady marks the pod's published status not ready as its
// teardown begins: its containers are being stopped, so it leaves its
// Services' endpoints now rather than when it is gone, as a pod the
// kubelet terminates stops being ready (conformance: readiness false while
// the pod is terminating). Its probes, liveness too, stop with the
// teardown, so nothing marks it ready again.
func (r *Runner) publishNotReady(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.status[uid]
	if p == nil || !anyReady(&p.Status) {
		return
	}
	cp := p.DeepCopy()
	for _, list := range [][]v1.ContainerStatus{cp.Status.ContainerStatuses, cp.Status.InitContainerStatuses} {
		for i := range list {
			list[i].Ready = false
		}
	}
	now := metav1.NewTime(r.clock.Now())
	for i := range cp.Status.Conditions {
		c := &cp.Status.Conditions[i]
		if isReadyCondition(c.Type) && c.Status != v1.ConditionFalse {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionFalse, reasonContainersNotReady, "", now
		}
	}
	r.status[uid] = cp
	close(r.changed)
	r.changed = make(chan struct{})
}

func isReadyCondition(t v1.PodConditionType) bool {
	return t == v1.PodReady || t == v1.ContainersReady
}

// anyReady reports whether a container or a readiness condition of st is
// ready.
func anyReady(st *v1.PodStatus) bool {
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for _, c := range list {
			if c.Ready {
				return true
			}
		}
	}
	for _, c := range st.Conditions {
		if isReadyCondition(c.Type) && c.Status != v1.ConditionFalse {
			return true
		}
	}
	return false
}

func (r *Runner) previousStatus(uid string) *v1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.status[uid]; ok {
		return &p.Status
	}
	return nil
}

func podKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// GracePeriod is how long the pod's containers get to stop: the API's
// deletionGracePeriodSeconds while it is being deleted, else its spec's
// terminationGracePeriodSeconds, else 30 s.
func GracePeriod(pod *v1.Pod) time.Duration {
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(max(*pod.DeletionGracePeriodSeconds, 0)) * time.Second
	}
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// SetObjects replaces the ConfigMaps and Secrets pods may refer to. The
// pods that refer to one whose content changed (a re-send of the same
// objects changes nothing) are synced at once: the files of their volumes
// are rewritten, which their running containers see without a restart,
// and containers that waited for a missing object are tried again. Env
// of running containers does not change (as with the kubelet).
func (r *Runner) SetObjects(cms []*v1.ConfigMap, secrets []*v1.Secret) {
	changed := r.cfg.Objects.Set(cms, secrets)
	if len(changed) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		w.objectsChanged(changed)
	}
}

// SetRuntimeClasses replaces the RuntimeClasses of the sources. A pod
// waiting for one is tried again at the end of its back-off (the kubelet's
// informer is no quicker to matter).
func (r *Runner) SetRuntimeClasses(rcs []*nodev1.RuntimeClass) {
	r.cfg.RuntimeClasses.Set(rcs)
}

// SetClusterRuntimeClasses replaces the RuntimeClass objects read from the
// cluster's API (cluster mode): they win over the manifests' of the same
// name, and --runtime-class over both.
func (r *Runner) SetClusterRuntimeClasses(rcs []*nodev1.RuntimeClass) {
	r.cfg.RuntimeClasses.SetCluster(rcs)
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
// current sandbox (adopted ones too), and forget the others: those st
// shows, and those it no longer shows (removed by someone else while
// podrun did not look, never seen exited), whose probes would otherwise
// run for the pod's life.
func (r *Runner) trackProbes(pod *v1.Pod, st *podState) {
	probed := map[string]bool{}
	if sb := st.latestSandbox(); sb != nil {
		podIP := sb.IP
		if pod.Spec.HostNetwork {
			podIP = r.cfg.HostIP
		}
		for _, c := range st.Containers {
			spec := findContainer(pod, c.Name)
			if c.State != engine.StateRunning || c.SandboxID != sb.ID || spec == nil || c.Hash != ContainerHash(spec) {
				continue
			}
			probed[c.ID] = true
			r.probes.AddContainer(string(pod.UID), c.ID, spec, podIP, c.StartedAt)
		}
	}
	r.probes.RemovePodExcept(string(pod.UID), probed)
}
