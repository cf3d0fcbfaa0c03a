package source

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// RuntimeClassWatch keeps the cluster's RuntimeClass objects
// (node.k8s.io/v1), as the kubelet's runtimeclass manager does: one
// informer on all of them, which the node authorizer lets a node read.
// Until the apiserver has answered a first list nothing is delivered: the
// node keeps the classes it has from elsewhere meanwhile.
type RuntimeClassWatch struct {
	// Client returns the apiserver's RuntimeClasses; required. It is asked
	// again, with back-off, until it gives them.
	Client func() (RuntimeClassAPI, error)
	// OnChange receives every RuntimeClass of the cluster, sorted by name:
	// once the first list is in, then after each change. It is called
	// from Run's goroutine, one call at a time.
	OnChange func([]*nodev1.RuntimeClass)
	// MaxBackoff caps the back-off between attempts to get a client; zero
	// means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Clock drives the back-off; nil is the real clock.
	Clock clock.WithTicker
	// Logger hears when the watch starts and what fails; nil means
	// slog.Default().
	Logger *slog.Logger
}

// RuntimeClassAPI lists and watches the cluster's RuntimeClasses
// (kubeclient.RuntimeClasses is one). One that also says
// IsWatchListSemanticsUnSupported (a fake) is listed the old way.
type RuntimeClassAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*nodev1.RuntimeClassList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Run watches the RuntimeClasses until ctx ends.
func (w *RuntimeClassWatch) Run(ctx context.Context) {
	log := cmp.Or(w.Logger, slog.Default()).With("watch", "runtimeclasses")
	if w.Client == nil || w.OnChange == nil {
		log.Error("cannot watch RuntimeClasses", "err", errors.New("no client or no receiver given"))
		return
	}
	clk := w.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	backoff, maxWait := minBackoff, orDefault(w.MaxBackoff, DefaultMaxBackoff)
	for {
		c, err := w.Client()
		if err == nil && c != nil {
			w.watch(ctx, log, c)
			return
		}
		if err == nil {
			err = errors.New("no client")
		}
		log.Debug("no apiserver client yet", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(backoff):
		}
		backoff = min(2*backoff, maxWait)
	}
}

// watch runs the informer on client's RuntimeClasses until ctx ends,
// delivering its contents once it has synced and after every change.
func (w *RuntimeClassWatch) watch(ctx context.Context, log *slog.Logger, rcs RuntimeClassAPI) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return rcs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return rcs.Watch(ctx, opts)
		},
	}
	// As client-go's generated informers: a client that cannot stream a
	// list (a fake) says so, and is listed the old way.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, rcs), &nodev1.RuntimeClass{}, 0, cache.Indexers{})
	// Set before Run, so this cannot fail. The reflector retries with
	// back-off; a node the authorizer denies keeps its other classes.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		log.Warn("RuntimeClasses list or watch failed", "err", err)
	})
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(runCtx)
	}()
	defer func() { cancel(); <-done }()
	log.Info("watching the cluster's RuntimeClasses")
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	last := ""
	for {
		objs := inf.GetStore().List()
		out := make([]*nodev1.RuntimeClass, 0, len(objs))
		var names []string
		for _, o := range objs {
			if rc, ok := o.(*nodev1.RuntimeClass); ok {
				out = append(out, rc)
			}
		}
		slices.SortFunc(out, func(a, b *nodev1.RuntimeClass) int { return cmp.Compare(a.Name, b.Name) })
		for _, rc := range out {
			names = append(names, rc.Name+"="+rc.Handler)
		}
		// An update of another field (overhead, scheduling) changes
		// nothing podrun uses: delivered, but logged only when a
		// mapping changed.
		if now := strings.Join(names, ","); now != last {
			log.Info("cluster RuntimeClasses", "classes", names)
			last = now
		}
		w.OnChange(out)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
