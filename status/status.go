// Package status reports the node's pods to the apiserver, as the
// kubelet's status manager and mirror-pod client do: it keeps a mirror pod
// in the API for every static pod (file and URL pods), and PATCHes
// pods/status of the apiserver's pods and of the mirror pods when what the
// runner says of them changed. An API pod the runner stopped because the
// API deleted it gets its final status and is then deleted for good (grace
// 0, UID precondition), which lets its controller go on.
//
// The Manager reads the runner's status cache through the small interface
// PodStatuses, and the API through a client it asks for until it gets one
// (the kubeconfig may appear after podrun starts). It never blocks its
// caller, retries while the apiserver is away, and every goroutine it
// starts ends with its context.
package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/kubeclient"
	"github.com/podrun/podrun/manifest"
)

// AnnotationMirrorError is set (by AnnotateMirrorErrors) on a static pod
// that has no mirror pod because the apiserver refused it, with why.
const AnnotationMirrorError = "podrun.io/mirror-error"

// Defaults of the Manager.
const (
	// DefaultSyncPeriod is how often every status is compared with the
	// API's, changed or not (the kubelet's status manager: 10 s).
	DefaultSyncPeriod = 10 * time.Second
	// DefaultBatchDelay is the least time between two rounds of updates
	// that changes trigger: changes meanwhile are sent together.
	DefaultBatchDelay = 500 * time.Millisecond
	// DefaultMaxBackoff caps the back-off between attempts to get a client.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultMirrorRetry caps the back-off between attempts to make a
	// mirror pod the apiserver refused (unless its static pod changes).
	// The first retry is after a second: a refusal may pass (kubeadm's
	// pods name system-node-critical, which the apiserver makes a moment
	// after it serves), and the kubelet asks again at each pod sync.
	DefaultMirrorRetry = 5 * time.Minute
	// DefaultReleaseAfter is how long an API pod being deleted that the
	// runner does not have (and was not seen to have) waits before it is
	// deleted for good: the runner may not have heard of it yet.
	DefaultReleaseAfter = 10 * time.Second
	// requestTimeout bounds each request to the apiserver.
	requestTimeout = 30 * time.Second
	minBackoff     = time.Second
)

// ClientFunc returns the client of the apiserver, or why there is none yet.
// The Manager calls it again, with back-off, until it returns a client,
// and then keeps that client.
type ClientFunc func() (Client, error)

// Client is what the status manager asks of the apiserver: the pods it
// watches, patches and mirrors, and its node (kubeclient.Client is one).
type Client interface {
	Pods(namespace string) *kubeclient.Pods
	Nodes() *kubeclient.Nodes
}

// PodStatuses is the runner's status cache, as the Manager reads it.
type PodStatuses interface {
	// Pods returns every pod the runner has, static and from the API,
	// each with its last status. The Manager does not modify them.
	Pods() []*v1.Pod
	// Changed returns a channel closed at the next change of a status.
	Changed() <-chan struct{}
	// FinalPod returns the last status of an API pod the runner stopped
	// and removed because the API deleted it (how its containers ended),
	// if the runner has it.
	FinalPod(uid types.UID) (*v1.Pod, bool)
}

// Options are a Manager's dependencies and settings.
type Options struct {
	// Client returns the apiserver's client; required.
	Client ClientFunc
	// NodeName is the node's name (lowercased); required.
	NodeName string
	// NodeUID returns the UID of the node's Node object, for the owner
	// reference of mirror pods (node.Agent.NodeUID); "" means not
	// registered yet: no mirror pod is made meanwhile. nil: the Manager
	// reads the Node itself.
	NodeUID func() types.UID
	// Pods is the runner's status cache; required.
	Pods PodStatuses
	// Desired returns the pods the sources define now (the mux's), and
	// SourcesReady whether every source has spoken: a mirror pod whose
	// static pod is not desired is deleted only then. nil Desired: the
	// runner's pods are the desired ones; nil SourcesReady: ready.
	Desired      func() []*v1.Pod
	SourcesReady func() bool

	// SyncPeriod, BatchDelay, MaxBackoff, MirrorRetry and ReleaseAfter:
	// zero means the default of the same name.
	SyncPeriod   time.Duration
	BatchDelay   time.Duration
	MaxBackoff   time.Duration
	MirrorRetry  time.Duration
	ReleaseAfter time.Duration

	// Clock drives every timer; nil is the real clock.
	Clock clock.WithTicker
	// Logger: nil means slog.Default().
	Logger *slog.Logger
	// Metrics records the Manager's series; nil records nothing.
	Metrics *Metrics
}

// Manager keeps the API's view of the node's pods; see the package doc.
type Manager struct {
	opts   Options
	node   string
	clock  clock.WithTicker
	logger *slog.Logger

	mu           sync.Mutex
	mirrorErrors map[types.UID]string
	ran          bool
}

// NewManager checks opts and returns a Manager; Run starts it.
func NewManager(opts Options) (*Manager, error) {
	node := strings.ToLower(strings.TrimSpace(opts.NodeName))
	switch {
	case opts.Client == nil:
		return nil, errors.New("status: no client function given")
	case opts.Pods == nil:
		return nil, errors.New("status: no pod statuses given")
	case node == "":
		return nil, errors.New("status: a node name is required")
	}
	if msgs := validation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		return nil, fmt.Errorf("status: node name %q is invalid: %s", node, strings.Join(msgs, "; "))
	}
	opts.SyncPeriod = orDefault(opts.SyncPeriod, DefaultSyncPeriod)
	opts.BatchDelay = orDefault(opts.BatchDelay, DefaultBatchDelay)
	opts.MaxBackoff = orDefault(opts.MaxBackoff, DefaultMaxBackoff)
	opts.MirrorRetry = orDefault(opts.MirrorRetry, DefaultMirrorRetry)
	opts.ReleaseAfter = orDefault(opts.ReleaseAfter, DefaultReleaseAfter)
	m := &Manager{opts: opts, node: node, clock: opts.Clock, logger: opts.Logger, mirrorErrors: map[types.UID]string{}}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	m.logger = m.logger.With("component", "status", "node", node)
	return m, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// MirrorErrors returns why static pods have no mirror pod, by static pod
// UID: the apiserver refused it (NodeRestriction refuses mirror pods that
// reference Secrets, ConfigMaps or service accounts), or a pod of that name
// that is not a mirror pod is in the API. Such a static pod still runs.
func (m *Manager) MirrorErrors() map[types.UID]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.mirrorErrors)
}

// AnnotateMirrorErrors returns pods with AnnotationMirrorError set on each
// static pod that has no mirror pod (copies of those; the others as they
// are), for /pods and `podrun ps`.
func (m *Manager) AnnotateMirrorErrors(pods []*v1.Pod) []*v1.Pod {
	errs := m.MirrorErrors()
	if len(errs) == 0 {
		return pods
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		if msg, ok := errs[p.UID]; ok {
			cp := p.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			cp.Annotations[AnnotationMirrorError] = msg
			out[i] = cp
		}
	}
	return out
}

// Run reports until ctx ends, and returns when every goroutine it started
// has ended. It may be called once.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	if m.ran {
		m.mu.Unlock()
		m.logger.Error("status manager run twice: ignored")
		return
	}
	m.ran = true
	m.mu.Unlock()
	r := &run{
		m:           m,
		poke:        make(chan struct{}, 1),
		lastSent:    map[types.UID]*sent{},
		lastRunner:  map[types.UID]*v1.Pod{},
		absentSince: map[types.UID]time.Time{},
		refused:     map[types.UID]refusal{},
		problems:    problemLog{logger: m.logger},
	}
	r.loop(ctx)
}

// run is the state of Run, owned by its goroutine.
type run struct {
	m *Manager

	client     Client
	backoff    time.Duration
	retryTimer clock.Timer
	// mirrorTimer ends the earliest back-off of a refused mirror pod.
	mirrorTimer clock.Timer
	nodeUID     types.UID // read from the Node when Options.NodeUID is nil

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	informer cache.SharedIndexInformer
	poke     chan struct{}

	batchTimer clock.Timer
	lastBatch  time.Time

	// lastSent is the status last written, by API pod UID.
	lastSent map[types.UID]*sent
	// lastRunner is the runner's pod last seen, by UID, for API pods: the
	// base of the final status once the runner has stopped it.
	lastRunner map[types.UID]*v1.Pod
	// absentSince is when a deleting API pod the runner never had was
	// first seen.
	absentSince map[types.UID]time.Time
	// refused are the mirror pods the apiserver refused, by static UID.
	refused map[types.UID]refusal

	problems problemLog
}

// sent is a status written to the API.
type sent struct {
	key    string
	status v1.PodStatus
	rv     string // the pod's resourceVersion the PATCH returned
}

// refusal is a mirror pod the apiserver refused.
type refusal struct {
	hash string
	msg  string
	at   time.Time
	wait time.Duration // before it is asked for again
}

// retryAt is when the mirror pod is asked for again.
func (f refusal) retryAt() time.Time { return f.at.Add(f.wait) }

func (r *run) loop(ctx context.Context) {
	m := r.m
	defer r.stop()
	ticker := m.clock.NewTicker(m.opts.SyncPeriod)
	defer ticker.Stop()
	changed := m.opts.Pods.Changed()
	r.connect(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timerC(r.retryTimer):
			r.retryTimer = nil
			r.connect(ctx)
		case <-changed:
			changed = m.opts.Pods.Changed()
			r.schedule()
		case <-r.poke:
			r.schedule()
		case <-timerC(r.batchTimer):
			r.batchTimer = nil
			r.sync(ctx, false)
		case <-timerC(r.mirrorTimer):
			r.mirrorTimer = nil
			r.sync(ctx, false)
		case <-ticker.C():
			r.sync(ctx, true)
		}
	}
}

func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func (r *run) stop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	for _, t := range []clock.Timer{r.retryTimer, r.batchTimer, r.mirrorTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// schedule arms a round of updates: at once, or BatchDelay after the last
// one.
func (r *run) schedule() {
	if r.batchTimer != nil {
		return
	}
	wait := r.lastBatch.Add(r.m.opts.BatchDelay).Sub(r.m.clock.Now())
	r.batchTimer = r.m.clock.NewTimer(max(wait, 0))
}

func (r *run) connect(ctx context.Context) {
	m := r.m
	client, err := m.opts.Client()
	if err == nil && client == nil {
		err = errors.New("no client")
	}
	if err != nil {
		r.problems.update(map[string]error{"client": fmt.Errorf("connect to the apiserver: %w", err)}, "status reporting waits")
		r.backoff = min(max(2*r.backoff, minBackoff), m.opts.MaxBackoff)
		r.retryTimer = m.clock.NewTimer(r.backoff)
		return
	}
	r.problems.update(nil, "status reporting waits")
	r.client = client
	m.logger.Info("reporting pod status to the apiserver")
	var wctx context.Context
	wctx, r.cancel = context.WithCancel(ctx)
	r.informer = r.newInformer()
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.informer.RunWithContext(wctx)
	}()
	go func() {
		defer r.wg.Done()
		// As the apiserver source's: the first list's events may come
		// before the informer says it has synced, and a round before then
		// does nothing.
		select {
		case <-r.informer.HasSyncedChecker().Done():
			r.pokeNow()
		case <-wctx.Done():
		}
	}()
}

// newInformer is the informer of the API's pods bound to the node, mirror
// pods included.
func (r *run) newInformer() cache.SharedIndexInformer {
	sel := fields.OneTermEqualSelector("spec.nodeName", r.m.node).String()
	pods := r.client.Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return pods.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(metav1.Object); ok {
			p.SetManagedFields(nil)
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.pokeNow() },
		UpdateFunc: func(any, any) { r.pokeNow() },
		DeleteFunc: func(any) { r.pokeNow() },
	})
	return inf
}

// pokeNow asks the loop for a round without blocking: one pending poke is
// enough.
func (r *run) pokeNow() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// sync is one round: mirror pods, statuses, deleted pods. all compares
// every status with the API's (the periodic round); otherwise only the
// statuses that changed since they were last sent are sent.
func (r *run) sync(ctx context.Context, all bool) {
	m := r.m
	r.lastBatch = m.clock.Now()
	if r.batchTimer != nil {
		r.batchTimer.Stop()
		r.batchTimer = nil
	}
	if r.client == nil || !r.informer.HasSynced() {
		return
	}
	runnerPods := m.opts.Pods.Pods()
	var apiPods []*v1.Pod
	for _, obj := range r.informer.GetStore().List() {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName == m.node {
			apiPods = append(apiPods, p)
		}
	}
	byUID := map[types.UID]*v1.Pod{}
	byName := map[string]*v1.Pod{}
	for _, p := range apiPods {
		byUID[p.UID] = p
		byName[podName(p)] = p
	}
	deleted := r.syncMirrors(ctx, runnerPods, apiPods, byName)

	running := map[types.UID]bool{}
	for _, p := range runnerPods {
		var target *v1.Pod
		if IsStatic(p) {
			if mp := byName[podName(p)]; mp != nil && isMirrorOf(mp, p) && mp.DeletionTimestamp == nil && !deleted[mp.UID] {
				target = mp
			}
		} else if p.Annotations[manifest.AnnotationConfigSource] == manifest.ConfigSourceAPI {
			running[p.UID] = true
			r.lastRunner[p.UID] = p
			target = byUID[p.UID]
		}
		if target == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r.syncStatus(ctx, target, &p.Status, all)
	}
	r.release(ctx, apiPods, running)

	for uid := range r.lastSent {
		if byUID[uid] == nil {
			delete(r.lastSent, uid)
		}
	}
	for uid := range r.lastRunner {
		if byUID[uid] == nil && !running[uid] {
			delete(r.lastRunner, uid)
		}
	}
	// A pod gone from the API and from the runner has no problem left to
	// report: without this, every pod a cluster made and deleted while
	// the apiserver refused its patches would stay here for good.
	live := maps.Clone(byName)
	for _, p := range runnerPods {
		live[podName(p)] = p
	}
	r.problems.forgetPods(live)
}

// syncStatus writes the runner's status node of the API pod target, if it
// differs from what the API has (all) or from what was sent last.
func (r *run) syncStatus(ctx context.Context, target *v1.Pod, node *v1.PodStatus, all bool) {
	uid := target.UID
	merged := mergeStatus(&target.Status, node, target.Spec.ReadinessGates, r.m.clock.Now())
	key := statusKey(&merged)
	base := &target.Status
	if last := r.lastSent[uid]; last != nil {
		switch {
		case !all, olderRV(target.ResourceVersion, last.rv):
			// Between periodic rounds, or while the informer has not
			// caught up with the last PATCH: what was sent is the API's
			// status, as far as the node's fields go.
			if last.key == key {
				return
			}
			base = &last.status
		}
	}
	patch, unchanged, err := statusPatch(uid, base, &merged)
	if err != nil {
		r.m.logger.Error("status patch", "pod", podName(target), "err", err)
		return
	}
	if unchanged {
		r.lastSent[uid] = &sent{key: key, status: merged, rv: target.ResourceVersion}
		return
	}
	res, err := r.patchStatus(ctx, target, patch)
	if err != nil {
		return
	}
	r.lastSent[uid] = &sent{key: key, status: merged, rv: res.ResourceVersion}
}

// patchStatus sends a status patch, and records and logs its outcome.
func (r *run) patchStatus(ctx context.Context, target *v1.Pod, patch []byte) (*v1.Pod, error) {
	m := r.m
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	res, err := r.client.Pods(target.Namespace).Patch(rctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	key := "status " + podName(target)
	if err != nil {
		m.opts.Metrics.patch(false)
		if ctx.Err() == nil {
			r.problems.set(key, fmt.Errorf("update the status of pod %s: %w", podName(target), err), "pod status not reported")
		}
		delete(r.lastSent, target.UID)
		return nil, err
	}
	m.opts.Metrics.patch(true)
	r.problems.set(key, nil, "pod status not reported")
	m.logger.Debug("pod status updated", "pod", podName(target), "uid", target.UID, "patch", string(patch))
	return res, nil
}

// olderRV reports whether resourceVersion a is older than b, when both are
// the numbers etcd makes them; not when either is not.
func olderRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// syncMirrors makes, remakes and deletes mirror pods (apiByName indexes
// apiPods by namespace/name); it returns the UIDs of the API pods it
// deleted.
func (r *run) syncMirrors(ctx context.Context, runnerPods, apiPods []*v1.Pod, apiByName map[string]*v1.Pod) map[types.UID]bool {
	m := r.m
	in := mirrorInput{Node: m.node, API: apiPods}
	for _, p := range runnerPods {
		if IsStatic(p) {
			in.Static = append(in.Static, p)
		}
	}
	if m.opts.SourcesReady == nil || m.opts.SourcesReady() {
		in.Desired = map[string]bool{}
		desired := runnerPods
		if m.opts.Desired != nil {
			desired = m.opts.Desired()
		}
		for _, p := range desired {
			if IsStatic(p) {
				in.Desired[podName(p)] = true
			}
		}
	}
	actions, blocked := planMirrors(in)
	deleted := map[types.UID]bool{}
	now := m.clock.Now()
	for _, a := range actions {
		if ctx.Err() != nil {
			break
		}
		switch {
		case a.Delete != nil:
			if r.deletePod(ctx, a.Delete, "mirror pod deleted", "reason", a.Reason) {
				deleted[a.Delete.UID] = true
				m.opts.Metrics.mirror("deleted")
			}
		case a.Create != nil:
			r.createMirror(ctx, a.Create, a.Reason, now)
		}
	}

	// What is refused or blocked now, for MirrorErrors. A refusal goes
	// with its static pod, or its version, or once the mirror exists (made
	// by an attempt whose answer was lost, say).
	static := map[types.UID]*v1.Pod{}
	for _, p := range in.Static {
		static[p.UID] = p
	}
	for uid, ref := range r.refused {
		st := static[uid]
		if st == nil || staticHash(st) != ref.hash {
			delete(r.refused, uid)
		} else if mp := apiByName[podName(st)]; mp != nil && isMirrorOf(mp, st) {
			delete(r.refused, uid)
		}
	}
	errs := map[types.UID]string{}
	for uid, ref := range r.refused {
		errs[uid] = ref.msg
	}
	r.armMirrorRetry(nextMirrorRetry(r.refused, m.clock.Now()))
	for uid, msg := range blocked {
		errs[uid] = msg
	}
	m.mu.Lock()
	m.mirrorErrors = errs
	m.mu.Unlock()
	m.opts.Metrics.refused(len(errs))
	return deleted
}

// nextMirrorRetry is when the first back-off of the refusals that is
// still running at now ends; zero: none is. One already over (its static
// pod not asked for in the round, or the attempt failed otherwise) waits
// for the next round: a timer for it would fire at once, again and again.
func nextMirrorRetry(refused map[types.UID]refusal, now time.Time) time.Time {
	var next time.Time
	for _, ref := range refused {
		if at := ref.retryAt(); at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// armMirrorRetry has a round run at retry, the end of the earliest
// refusal's back-off; zero: none is waiting.
func (r *run) armMirrorRetry(retry time.Time) {
	if r.mirrorTimer != nil {
		r.mirrorTimer.Stop()
		r.mirrorTimer = nil
	}
	if !retry.IsZero() {
		r.mirrorTimer = r.m.clock.NewTimer(max(retry.Sub(r.m.clock.Now()), 0))
	}
}

// createMirror creates the mirror pod of the static pod st, unless the
// apiserver refused it and its back-off has not ended.
func (r *run) createMirror(ctx context.Context, st *v1.Pod, reason string, now time.Time) {
	m := r.m
	hash := staticHash(st)
	if ref, ok := r.refused[st.UID]; ok && ref.hash == hash && now.Before(ref.retryAt()) {
		return
	}
	key := "mirror " + podName(st)
	nodeUID, err := r.nodeUIDOf(ctx)
	if err != nil {
		r.problems.set(key, fmt.Errorf("no mirror pod for %s yet: the Node's UID is not known: %w", podName(st), err), "mirror pod not made")
		return
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err = r.client.Pods(st.Namespace).Create(rctx, mirrorPod(st, m.node, nodeUID), metav1.CreateOptions{})
	switch {
	case err == nil:
		delete(r.refused, st.UID)
		r.problems.set(key, nil, "mirror pod not made")
		m.opts.Metrics.mirror("created")
		m.logger.Info("mirror pod created", "pod", podName(st), "reason", reason)
	case apierrors.IsAlreadyExists(err):
		// Made meanwhile (by a podrun before this one): the informer shows
		// it at the next round.
		delete(r.refused, st.UID)
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "UID mismatch"):
		// The Node was made again: read its UID again.
		r.nodeUID = ""
		r.problems.set(key, fmt.Errorf("create the mirror pod of %s: %w", podName(st), err), "mirror pod not made")
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		msg := fmt.Sprintf("the apiserver refused the mirror pod: %v", err)
		old, ok := r.refused[st.UID]
		if !ok || old.msg != msg || old.hash != hash {
			m.logger.Warn("mirror pod refused; the static pod runs without one", "pod", podName(st), "err", err)
		}
		wait := minBackoff
		if ok && old.hash == hash {
			wait = min(2*old.wait, m.opts.MirrorRetry)
		}
		r.refused[st.UID] = refusal{hash: hash, msg: msg, at: now, wait: wait}
		r.problems.set(key, nil, "mirror pod not made")
	default:
		if ctx.Err() == nil {
			r.problems.set(key, fmt.Errorf("create the mirror pod of %s: %w", podName(st), err), "mirror pod not made")
		}
	}
}

// nodeUIDOf returns the UID of the node's Node object.
func (r *run) nodeUIDOf(ctx context.Context) (types.UID, error) {
	if f := r.m.opts.NodeUID; f != nil {
		if uid := f(); uid != "" {
			return uid, nil
		}
		return "", errors.New("the node is not registered yet")
	}
	if r.nodeUID != "" {
		return r.nodeUID, nil
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	node, err := r.client.Nodes().Get(rctx, r.m.node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	r.nodeUID = node.UID
	return node.UID, nil
}

// deletePod deletes an API pod for good: grace 0, with its UID as
// precondition (a pod made again under the same name stays). A pod already
// gone or made again counts as deleted. It logs msg with args on success.
func (r *run) deletePod(ctx context.Context, p *v1.Pod, msg string, args ...any) bool {
	m := r.m
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var grace int64
	uid := p.UID
	err := r.client.Pods(p.Namespace).Delete(rctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	key := "delete " + podName(p)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		if ctx.Err() == nil {
			r.problems.set(key, fmt.Errorf("delete pod %s: %w", podName(p), err), "pod not deleted")
		}
		return false
	}
	r.problems.set(key, nil, "pod not deleted")
	if err == nil {
		m.logger.Info(msg, append([]any{"pod", podName(p), "uid", p.UID}, args...)...)
	}
	return true
}

// release finishes API pods the API is deleting and the runner has
// stopped: their final status, then their deletion for good, as the
// kubelet's status manager does once a pod's containers are gone.
func (r *run) release(ctx context.Context, apiPods []*v1.Pod, running map[types.UID]bool) {
	m := r.m
	now := m.clock.Now()
	for _, p := range apiPods {
		if IsMirror(p) || p.DeletionTimestamp == nil {
			continue
		}
		uid := p.UID
		if running[uid] {
			delete(r.absentSince, uid)
			continue
		}
		last := r.lastRunner[uid]
		if final, ok := m.opts.Pods.FinalPod(uid); ok {
			last = final
		}
		if last == nil {
			// Never seen in the runner: it may not have heard of it yet.
			since, ok := r.absentSince[uid]
			if !ok {
				r.absentSince[uid] = now
				continue
			}
			if now.Sub(since) < m.opts.ReleaseAfter {
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		node := &p.Status
		if last != nil {
			node = &last.Status
		}
		final := finalStatus(node, now)
		merged := mergeStatus(&p.Status, &final, p.Spec.ReadinessGates, now)
		base := &p.Status
		if s := r.lastSent[uid]; s != nil && olderRV(p.ResourceVersion, s.rv) {
			base = &s.status
		}
		patch, unchanged, err := statusPatch(uid, base, &merged)
		if err == nil && !unchanged {
			if _, err = r.patchStatus(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) &&
				!apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
				continue // the apiserver is away: try again next round
			}
		}
		if r.deletePod(ctx, p, "deleted pod released", "phase", merged.Phase) {
			delete(r.absentSince, uid)
			delete(r.lastRunner, uid)
			delete(r.lastSent, uid)
		}
	}
	for uid := range r.absentSince {
		if !slices.ContainsFunc(apiPods, func(p *v1.Pod) bool { return p.UID == uid }) {
			delete(r.absentSince, uid)
		}
	}
}

// problemLog logs each problem once: when it appears or changes, and when
// it clears.
type problemLog struct {
	logger *slog.Logger
	msgs   map[string]string
}

// set records the problem of key (nil: none), logging with what.
func (p *problemLog) set(key string, err error, what string) {
	if p.msgs == nil {
		p.msgs = map[string]string{}
	}
	if err == nil {
		if _, had := p.msgs[key]; had {
			p.logger.Info(what+": cleared", "about", key)
			delete(p.msgs, key)
		}
		return
	}
	if msg := err.Error(); p.msgs[key] != msg {
		p.logger.Warn(what, "about", key, "err", msg)
		p.msgs[key] = msg
	}
}

// forgetPods drops, without a word, the problems of the pods ("<what>
// <namespace>/<name>" keys) not in live, by podName.
func (p *problemLog) forgetPods(live map[string]*v1.Pod) {
	for key := range p.msgs {
		if _, pod, ok := strings.Cut(key, " "); ok && live[pod] == nil {
			delete(p.msgs, key)
		}
	}
}

// update sets the problems now of keys (a nil map clears them all).
func (p *problemLog) update(now map[string]error, what string) {
	for key := range p.msgs {
		if _, still := now[key]; !still {
			p.set(key, nil, what)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(now)) {
		p.set(key, now[key], what)
	}
}

// Metrics are the Prometheus series of the Manager.
type Metrics struct {
	patches *prometheus.CounterVec
	mirrors *prometheus.CounterVec
	refuse  prometheus.Gauge
}

// NewMetrics registers the Manager's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_pod_status_updates_total",
			Help: "PATCHes of pods/status sent to the apiserver, by result (ok, error).",
		}, []string{"result"}),
		mirrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_mirror_pod_changes_total",
			Help: "Mirror pods created and deleted in the apiserver.",
		}, []string{"op"}),
		refuse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "podrun_mirror_pods_missing",
			Help: "Static pods without a mirror pod because the apiserver refused it (or a pod of that name is in the way).",
		}),
	}
	reg.MustRegister(m.patches, m.mirrors, m.refuse)
	return m
}

func (m *Metrics) patch(ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	m.patches.WithLabelValues(result).Inc()
}

func (m *Metrics) mirror(op string) {
	if m != nil {
		m.mirrors.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) refused(n int) {
	if m != nil {
		m.refuse.Set(float64(n))
	}
}
