package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/manifest"
)

var _ Source = (*APIServerSource)(nil)

// Defaults of the apiserver source.
const (
	// DefaultAPIServerSourceName is the name of an APIServerSource whose
	// Name is empty: its Update.Source and its pods' podrun.io/source.
	DefaultAPIServerSourceName = "apiserver"
	// DefaultObjectWait is how long a new pod is held back while the
	// ConfigMaps and Secrets it references are read for the first time
	// (the kubelet's object managers wait for their caches likewise).
	DefaultObjectWait = 10 * time.Second
	// DefaultMaxBackoff caps the back-off between attempts to get a
	// client (the kubeconfig file may not exist yet).
	DefaultMaxBackoff = 30 * time.Second
)

// minBackoff is the first back-off after a failed attempt to connect.
const minBackoff = time.Second

// ClientFunc returns the client of the apiserver, or why there is none yet
// (the kubeconfig file does not exist yet, does not load). A source calls
// it again, with back-off, until it returns a client, and then keeps that
// client until it stops.
type ClientFunc func() (APIClient, error)

// APIClient is what the apiserver source asks of the apiserver: the core
// group's REST client, through which it lists and watches the node's pods
// and the ConfigMaps and Secrets they reference (kubeclient.Client is one).
type APIClient interface {
	CoreREST() rest.Interface
}

// APIServerSource is the pods the apiserver binds to this node (the
// kubelet's apiserver source): every pod with spec.nodeName == NodeName but
// mirror pods, through a client-go informer with that field selector, and
// the ConfigMaps and Secrets those pods reference (volumes, projected
// volumes, env, envFrom, imagePullSecrets), each watched alone by name, as
// the node authorizer lets a node read only what its pods reference.
//
// Its pods keep their API name, namespace and UID; they are defaulted
// (manifest.SetDefaults), not validated (the apiserver did), but a UID
// that is not a safe path element is refused. They carry the annotations
// of static pods: kubernetes.io/config.source "api", podrun.io/source the
// source's Name, kubernetes.io/config.seen, and kubernetes.io/config.hash
// (manifest.ContentHash), so that an edit in the API is an UPDATE. A pod
// the API is deleting (metadata.deletionTimestamp set) stays in the
// snapshot with its deletionTimestamp and deletionGracePeriodSeconds, for
// the runner to stop it within that grace period, until the API object is
// gone (the status manager deletes it once its containers are). A pod in
// a terminal phase (Succeeded, Failed) that this source has not sent
// before is left out: it is done and must not run again.
//
// Until the first client and the first list, the Update has no snapshot
// and Failing names the source, so that pods it ran before podrun
// restarted are kept; an unreachable apiserver afterwards keeps the last
// state, with Err set. Nothing of it ever blocks: local sources and their
// pods run meanwhile.
type APIServerSource struct {
	// Name is Update.Source and the podrun.io/source of the pods; empty
	// means DefaultAPIServerSourceName.
	Name string
	// NodeName is the node's name, as --node-name (lowercased).
	NodeName string
	// Client returns the apiserver's client; required.
	Client ClientFunc
	// ObjectWait is how long a new pod waits for the first read of the
	// ConfigMaps and Secrets it references before it is sent without
	// them; zero means DefaultObjectWait.
	ObjectWait time.Duration
	// MaxBackoff caps the back-off between attempts to get a client, and
	// between checks that the apiserver is back; zero means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Clock drives the back-off and the hold timers; nil is the real
	// clock.
	Clock clock.WithTicker
	// Logger hears about problems (once when they appear, once when they
	// clear) and changes; nil means slog.Default().
	Logger *slog.Logger

	hooks *sourceHooks
}

// Run watches the apiserver until ctx ends (see Source).
func (s *APIServerSource) Run(ctx context.Context, out chan<- Update) {
	r := s.newRun()
	if err := r.check(); err != nil {
		err = fmt.Errorf("watch the apiserver: %w", err)
		r.logger.Error("cannot watch the apiserver", "error", err)
		sendUntilDone(ctx, out, Update{Source: r.name, Err: err, Failing: []string{r.name}})
		return
	}
	r.loop(ctx, out)
}

// apiRun is the state of one Run; its loop goroutine owns it, but for what
// the informers' goroutines set through poke and podsErr.
type apiRun struct {
	s       *APIServerSource
	name    string
	node    string
	wait    time.Duration
	maxWait time.Duration
	clock   clock.WithTicker
	logger  *slog.Logger

	// poke is signalled (never blocking) by the informers when what they
	// hold changed, and when the apiserver stops or starts answering.
	poke chan struct{}

	client     APIClient
	connErr    error // why there is no client yet
	backoff    time.Duration
	retryTimer clock.Timer

	runCtx  context.Context    // of the informer and the object watches
	cancel  context.CancelFunc // ends runCtx
	wg      sync.WaitGroup
	pods    cache.SharedIndexInformer
	podsErr errBox
	objects map[objectKey]*objectWatch

	firstSeen map[types.UID]time.Time
	included  map[types.UID]bool  // pods sent (queued) before
	converted map[types.UID]*conv // the API pod as sent, by UID
	sentOnce  bool                // a snapshot has been queued
	holdTimer clock.Timer

	q        latest
	problems problemLog
}

// conv is an API pod turned into the pod podrun runs, kept while the API
// object's resourceVersion is the same.
type conv struct {
	rv  string
	pod *v1.Pod
	err error
}

func (s *APIServerSource) newRun() *apiRun {
	r := &apiRun{
		s:         s,
		name:      s.Name,
		node:      strings.ToLower(strings.TrimSpace(s.NodeName)),
		wait:      orDefault(s.ObjectWait, DefaultObjectWait),
		maxWait:   orDefault(s.MaxBackoff, DefaultMaxBackoff),
		clock:     s.Clock,
		logger:    s.Logger,
		poke:      make(chan struct{}, 1),
		objects:   map[objectKey]*objectWatch{},
		firstSeen: map[types.UID]time.Time{},
		included:  map[types.UID]bool{},
		converted: map[types.UID]*conv{},
	}
	if r.name == "" {
		r.name = DefaultAPIServerSourceName
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	r.logger = r.logger.With("source", r.name)
	r.problems = problemLog{logger: r.logger}
	return r
}

func (r *apiRun) check() error {
	if r.s.Client == nil {
		return errors.New("no client function given")
	}
	if r.node == "" {
		return errors.New("a node name is required (--node-name)")
	}
	if msgs := validation.IsDNS1123Subdomain(r.node); len(msgs) > 0 {
		return fmt.Errorf("node name %q is invalid: %s", r.node, strings.Join(msgs, "; "))
	}
	return nil
}

func (r *apiRun) loop(ctx context.Context, out chan<- Update) {
	defer r.stop()
	r.connect(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case r.q.ch(out) <- r.q.value():
			r.q.sent()
		case <-timerC(r.retryTimer):
			r.retryTimer = nil
			r.connect(ctx)
		case <-r.poke:
			r.rebuild()
		case <-timerC(r.holdTimer):
			r.holdTimer = nil
			r.rebuild()
		}
	}
}

// timerC is t's channel, or nil (a case select never takes) when t is nil.
func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// stop ends every goroutine the run started, and waits for them.
func (r *apiRun) stop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	stopTimer(&r.retryTimer)
	stopTimer(&r.holdTimer)
}

// connect asks for a client and, with one, starts the pod informer; without,
// it reports why and tries again after a back-off.
func (r *apiRun) connect(ctx context.Context) {
	client, err := r.s.Client()
	if err == nil && client == nil {
		err = errors.New("no client")
	}
	if err != nil {
		r.connErr = fmt.Errorf("connect to the apiserver: %w", err)
		r.backoff = min(max(2*r.backoff, minBackoff), r.maxWait)
		r.retryTimer = r.clock.NewTimer(r.backoff)
		r.rebuild()
		return
	}
	r.client, r.connErr = client, nil
	r.logger.Info("connected to the apiserver", "node", r.node)
	r.runCtx, r.cancel = context.WithCancel(ctx)
	r.pods = r.newPodInformer()
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.pods.RunWithContext(r.runCtx)
	}()
	go func() {
		defer r.wg.Done()
		// The handlers may see the first list's pods before the informer
		// says it has synced (client-go marks it once they were handed
		// over), and a snapshot is only sent once it has: one rebuild
		// more when it does, or a node whose pods were all in that list
		// would wait for the next change of one of them.
		select {
		case <-r.pods.HasSyncedChecker().Done():
			r.signal()
		case <-r.runCtx.Done():
		}
	}()
	r.rebuild()
}

// signal pokes the loop without blocking: one pending poke is enough.
func (r *apiRun) signal() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// newPodInformer is the informer of the pods bound to the node, as the
// kubelet lists them (field selector spec.nodeName=<node>, which the node
// authorizer requires).
//
// Whether the apiserver answers is learnt from the informer's own list
// and watch calls: a reflector whose watch is refused retries without
// reporting it (it will resume where it was), so each call's outcome sets
// or clears the source's error.
func (r *apiRun) newPodInformer() cache.SharedIndexInformer {
	pods := cache.NewListWatchFromClient(r.client.CoreREST(), "pods", metav1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", r.node))
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := pods.ListWithContext(ctx, opts)
			r.track("list", err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := pods.WatchWithContext(ctx, opts)
			r.track("watch", err)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	// Set before Run, so these calls cannot fail.
	_ = inf.SetTransform(dropManagedFields)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// A failed list or watch call is tracked already, in its own
		// words; this reports what else ends a watch.
		if isExpectedWatchEnd(err) || r.podsErr.get() != nil {
			return
		}
		r.track("watch", err)
	})
	changed := func() {
		r.podsErr.set(nil)
		r.signal()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	})
	return inf
}

// dropManagedFields is an informer transform: managed fields are large
// and podrun never reads them.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// isExpectedWatchEnd reports whether err is a watch ending the way watches
// do (closed, expired, cut) rather than a failure worth reporting: the
// reflector lists or watches again at once, and reports that attempt's
// error if the apiserver is really gone.
func isExpectedWatchEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// track records the outcome of a list or watch of the node's pods (called
// on the informer's goroutines): an error is the source's error until a
// call succeeds.
func (r *apiRun) track(verb string, err error) {
	if err != nil {
		err = fmt.Errorf("%s the pods of node %s: %w", verb, r.node, err)
	}
	if r.podsErr.set(err) {
		r.signal()
	}
}

// rebuild makes the update of what the informers hold now and queues it
// (unless it says what the last one said).
func (r *apiRun) rebuild() {
	var u Update
	var ready bool
	switch {
	case r.client == nil:
		u = Update{Source: r.name, Err: r.connErr, Failing: []string{r.name}}
		r.problems.update(map[string]error{"apiserver": r.connErr}, "apiserver source problem")
	default:
		u, ready = r.snapshot()
	}
	if !ready && r.client != nil && u.Err == nil {
		// Connected, not listed yet, no error: nothing to say yet.
		r.s.hooks.onScanned(false)
		return
	}
	if u.Snapshot != nil {
		r.sentOnce = true
		r.included = map[types.UID]bool{}
		for _, p := range u.Snapshot.Pods {
			r.included[p.UID] = true
		}
	}
	r.s.hooks.onScanned(r.q.offer(u))
}

// snapshot builds the update from the informers' stores. It reports false
// while there is nothing to send but, maybe, an error: the pods are not
// listed yet, or this would be the first snapshot and pods are still held
// back for their objects.
func (r *apiRun) snapshot() (Update, bool) {
	err := r.podsErr.get()
	problems := map[string]error{}
	if err != nil {
		problems["apiserver"] = err
	}
	u := Update{Source: r.name, Err: err}
	if !r.pods.HasSynced() {
		u.Failing = []string{r.name}
		r.problems.update(problems, "apiserver source problem")
		return u, false
	}

	now := r.clock.Now()
	var apiPods []*v1.Pod
	for _, obj := range r.pods.GetStore().List() {
		if p, ok := obj.(*v1.Pod); ok {
			apiPods = append(apiPods, p)
		}
	}
	slices.SortFunc(apiPods, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})

	present := map[types.UID]bool{}
	wanted := map[objectKey]bool{}
	var pods []*v1.Pod
	var podErrs []error
	var nextHold time.Time
	held := 0
	for _, api := range apiPods {
		if !r.runsHere(api) {
			continue
		}
		uid := api.UID
		present[uid] = true
		if _, ok := r.firstSeen[uid]; !ok {
			r.firstSeen[uid] = now
		}
		if isTerminal(api) && !r.included[uid] {
			continue // done before podrun saw it: never run again
		}
		refs := referencedObjects(api)
		for _, k := range refs {
			wanted[k] = true
		}
		if !r.included[uid] && !r.objectsSynced(refs) {
			deadline := r.firstSeen[uid].Add(r.wait)
			if now.Before(deadline) {
				held++
				if nextHold.IsZero() || deadline.Before(nextHold) {
					nextHold = deadline
				}
				continue
			}
		}
		p, err := r.convert(api)
		if err != nil {
			key := "pod " + api.Namespace + "/" + api.Name
			problems[key] = err
			podErrs = append(podErrs, err)
			continue
		}
		pods = append(pods, p)
	}
	for uid := range r.firstSeen {
		if !present[uid] {
			delete(r.firstSeen, uid)
			delete(r.converted, uid)
		}
	}
	r.watchObjects(wanted)
	stopTimer(&r.holdTimer)
	if held > 0 {
		r.holdTimer = r.clock.NewTimer(max(nextHold.Sub(now), time.Millisecond))
	}
	r.problems.update(problems, "apiserver source problem")
	if len(podErrs) > 0 {
		u.Err = errors.Join(append([]error{u.Err}, podErrs...)...)
	}
	if held > 0 && !r.sentOnce {
		// The first snapshot says what runs: it waits (at most
		// ObjectWait) for every pod, lest a pod podrun runs from before a
		// restart look removed.
		u.Failing = []string{r.name}
		return u, false
	}

	snap := &manifest.Snapshot{Source: r.name, Pods: pods}
	for _, k := range slices.SortedFunc(maps.Keys(wanted), compareObjectKeys) {
		w := r.objects[k]
		if w == nil {
			continue
		}
		obj, ok, _ := w.store.GetByKey(k.namespace + "/" + k.name)
		if !ok {
			continue
		}
		// Marked as the API's (a copy: the informer's cache is shared),
		// so that only the API's pods see it (manifest.FromAPI).
		switch o := obj.(type) {
		case *v1.ConfigMap:
			o = o.DeepCopy()
			manifest.SetConfigSource(o, manifest.ConfigSourceAPI)
			snap.ConfigMaps = append(snap.ConfigMaps, o)
		case *v1.Secret:
			o = o.DeepCopy()
			manifest.SetConfigSource(o, manifest.ConfigSourceAPI)
			snap.Secrets = append(snap.Secrets, o)
		}
	}
	u.Snapshot = snap
	return u, true
}

// runsHere reports whether an API pod is one this source runs: bound to
// the node, and not a mirror pod (those are podrun's own reflection of a
// static pod).
func (r *apiRun) runsHere(p *v1.Pod) bool {
	if p.Spec.NodeName != r.node {
		return false
	}
	_, mirror := p.Annotations[v1.MirrorPodAnnotationKey]
	return !mirror
}

func isTerminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// convert returns the pod podrun runs for an API pod, reusing the last one
// while the API object is unchanged.
func (r *apiRun) convert(api *v1.Pod) (*v1.Pod, error) {
	if c := r.converted[api.UID]; c != nil && c.rv == api.ResourceVersion && api.ResourceVersion != "" {
		return c.pod, c.err
	}
	p, err := APIPod(api, r.name, r.firstSeen[api.UID])
	r.converted[api.UID] = &conv{rv: api.ResourceVersion, pod: p, err: err}
	return p, err
}

// APIPod turns a pod read from the apiserver into the pod podrun runs: a
// copy, defaulted, without status and managed fields, with the annotations
// of the apiserver source named source (config.source "api",
// podrun.io/source, config.seen = seen, config.hash). Its name, namespace
// and UID stay the API's; a UID, namespace or name that is not a safe path
// element (the API's are UUIDs and DNS names) is an error.
func APIPod(api *v1.Pod, source string, seen time.Time) (*v1.Pod, error) {
	what := fmt.Sprintf("pod %s/%s", api.Namespace, api.Name)
	// The UID names the pod's directory; namespace and name appear in
	// container names. The apiserver validated them, but no string becomes
	// a path unchecked: a UUID, a namespace and a name are all DNS-1123
	// labels or subdomains, which are safe path elements.
	if msgs := validation.IsDNS1123Label(string(api.UID)); len(msgs) > 0 || api.UID == "" {
		return nil, fmt.Errorf("%s: metadata.uid %q is not a safe name (want a UUID): refused", what, api.UID)
	}
	if msgs := validation.IsDNS1123Label(api.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("%s: metadata.namespace is invalid: %s: refused", what, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(api.Name); len(msgs) > 0 || strings.Contains(api.Name, "..") {
		return nil, fmt.Errorf("%s: metadata.name is invalid: %s: refused", what, strings.Join(msgs, "; "))
	}
	// Container names name log files and termination-message files, and
	// volume names directories under the pod's; ephemeral containers come
	// later, through a subresource, and are checked here all the same.
	// Each name must also be the only one of its kind: a container's name
	// is its log file (CRI: <pod dir>/<name>_<attempt>.log), its
	// termination-message file and how the runner finds its spec, so an
	// ephemeral container named as an app container would share (and, on
	// removal, delete) that container's log and be taken for it.
	names := map[string]string{}
	containers := map[string]string{}
	volumes := map[string]string{}
	add := func(seen map[string]string, field, name string) error {
		if prev, dup := seen[name]; dup {
			return fmt.Errorf("%s: %s: %q is also %s's name: refused", what, field, name, prev)
		}
		seen[name] = field
		names[field+": "+name] = name
		return nil
	}
	var errs []error
	for _, c := range api.Spec.InitContainers {
		errs = append(errs, add(containers, "spec.initContainers", c.Name))
	}
	for _, c := range api.Spec.Containers {
		errs = append(errs, add(containers, "spec.containers", c.Name))
	}
	for _, c := range api.Spec.EphemeralContainers {
		errs = append(errs, add(containers, "spec.ephemeralContainers", c.Name))
	}
	for _, vol := range api.Spec.Volumes {
		errs = append(errs, add(volumes, "spec.volumes", vol.Name))
	}
	for field, name := range names {
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			return nil, fmt.Errorf("%s: %s: not a safe name: %s: refused", what, field, strings.Join(msgs, "; "))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p := api.DeepCopy()
	p.ManagedFields = nil
	p.ResourceVersion = ""
	p.Status = v1.PodStatus{}
	manifest.SetDefaults(p)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[manifest.AnnotationSource] = source
	manifest.SetConfigSource(p, manifest.ConfigSourceAPI)
	p.Annotations[manifest.AnnotationConfigSeen] = seen.UTC().Format(time.RFC3339Nano)
	p.Annotations[manifest.AnnotationConfigHash] = manifest.ContentHash(p)
	return p, nil
}

// errBox holds an error that other goroutines set.
type errBox struct {
	mu  sync.Mutex
	err error
}

// set sets the error (nil: none) and reports whether that changed it.
func (b *errBox) set(err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := (b.err == nil) != (err == nil) || err != nil && b.err.Error() != err.Error()
	b.err = err
	return changed
}

func (b *errBox) get() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Objects the node's pods reference.

// objectKey names a ConfigMap or Secret.
type objectKey struct {
	kind      string // "ConfigMap" or "Secret"
	namespace string
	name      string
}

func compareObjectKeys(a, b objectKey) int {
	return strings.Compare(a.kind+"/"+a.namespace+"/"+a.name, b.kind+"/"+b.namespace+"/"+b.name)
}

// referencedObjects returns the ConfigMaps and Secrets a pod references:
// in volumes (configMap, secret, and their projections), in env
// (configMapKeyRef, secretKeyRef), envFrom and imagePullSecrets; sorted,
// each once.
func referencedObjects(pod *v1.Pod) []objectKey {
	set := map[objectKey]bool{}
	add := func(kind, name string) {
		if name != "" {
			set[objectKey{kind: kind, namespace: pod.Namespace, name: name}] = true
		}
	}
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.ConfigMap != nil:
			add("ConfigMap", vol.ConfigMap.Name)
		case vol.Secret != nil:
			add("Secret", vol.Secret.SecretName)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if src.ConfigMap != nil {
					add("ConfigMap", src.ConfigMap.Name)
				}
				if src.Secret != nil {
					add("Secret", src.Secret.Name)
				}
			}
		}
	}
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for i := range pod.Spec.EphemeralContainers {
		containers = append(containers, v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for _, c := range containers {
		for _, env := range c.Env {
			if env.ValueFrom == nil {
				continue
			}
			if ref := env.ValueFrom.ConfigMapKeyRef; ref != nil {
				add("ConfigMap", ref.Name)
			}
			if ref := env.ValueFrom.SecretKeyRef; ref != nil {
				add("Secret", ref.Name)
			}
		}
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil {
				add("ConfigMap", from.ConfigMapRef.Name)
			}
			if from.SecretRef != nil {
				add("Secret", from.SecretRef.Name)
			}
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		add("Secret", ref.Name)
	}
	return slices.SortedFunc(maps.Keys(set), compareObjectKeys)
}

// objectWatch is the watch of one ConfigMap or Secret: a reflector listing
// and watching it by name (field selector metadata.name=<name> in its
// namespace, which the node authorizer allows for an object the node's
// pods reference), into a store of its own.
type objectWatch struct {
	cancel context.CancelFunc
	store  *notifyStore
}

// notifyStore is a store that tells the loop of every change and knows
// whether it has been listed once.
type notifyStore struct {
	cache.Store
	changed func()

	mu     sync.Mutex
	synced bool
}

func (s *notifyStore) Add(obj any) error    { return s.notify(s.Store.Add(obj)) }
func (s *notifyStore) Update(obj any) error { return s.notify(s.Store.Update(obj)) }
func (s *notifyStore) Delete(obj any) error { return s.notify(s.Store.Delete(obj)) }
func (s *notifyStore) Resync() error        { return nil }

func (s *notifyStore) Replace(list []any, rv string) error {
	err := s.Store.Replace(list, rv)
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	return s.notify(err)
}

func (s *notifyStore) notify(err error) error {
	s.changed()
	return err
}

func (s *notifyStore) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// objectsSynced reports whether every object of keys has been read once
// (found or not).
func (r *apiRun) objectsSynced(keys []objectKey) bool {
	for _, k := range keys {
		w := r.objects[k]
		if w == nil || !w.store.hasSynced() {
			return false
		}
	}
	return true
}

// watchObjects starts the watches of the objects wanted and stops the
// others.
func (r *apiRun) watchObjects(wanted map[objectKey]bool) {
	for k, w := range r.objects {
		if !wanted[k] {
			w.cancel()
			delete(r.objects, k)
			r.logger.Debug("stopped watching", "kind", k.kind, "object", k.namespace+"/"+k.name)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(wanted), compareObjectKeys) {
		if r.objects[k] == nil {
			r.objects[k] = r.startObjectWatch(k)
		}
	}
}

func (r *apiRun) startObjectWatch(k objectKey) *objectWatch {
	// One object by name: what the node authorizer lets a node watch.
	resource, expected := "secrets", runtime.Object(&v1.Secret{})
	if k.kind == "ConfigMap" {
		resource, expected = "configmaps", &v1.ConfigMap{}
	}
	lw := cache.NewListWatchFromClient(r.client.CoreREST(), resource, k.namespace,
		fields.OneTermEqualSelector("metadata.name", k.name))
	store := &notifyStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), changed: r.signal}
	refl := cache.NewReflectorWithOptions(lw, expected, &transformingStore{notifyStore: store}, cache.ReflectorOptions{
		Name:            fmt.Sprintf("podrun %s %s/%s", k.kind, k.namespace, k.name),
		MinWatchTimeout: 30 * time.Minute,
	})
	// A child of the run's context: stop ends every watch.
	ctx, cancel := context.WithCancel(r.runCtx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		refl.RunWithContext(ctx)
	}()
	r.logger.Debug("watching", "kind", k.kind, "object", k.namespace+"/"+k.name)
	return &objectWatch{cancel: cancel, store: store}
}

// transformingStore drops managed fields of the objects before they are
// stored.
type transformingStore struct{ *notifyStore }

func (s *transformingStore) Add(obj any) error {
	obj, _ = dropManagedFields(obj)
	return s.notifyStore.Add(obj)
}

func (s *transformingStore) Update(obj any) error {
	obj, _ = dropManagedFields(obj)
	return s.notifyStore.Update(obj)
}

func (s *transformingStore) Replace(list []any, rv string) error {
	for i := range list {
		list[i], _ = dropManagedFields(list[i])
	}
	return s.notifyStore.Replace(list, rv)
}
