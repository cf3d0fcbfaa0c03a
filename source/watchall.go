package source

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// listWatcher lists and watches every object of one kind (a kubeclient
// resource of all namespaces is one).
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// watchAll asks client for the API, with back-off (doubling from
// minBackoff to maxBackoff, zero: DefaultMaxBackoff) until it gives it,
// then runs one informer of every object of the kind of example until ctx
// ends: deliver gets the objects once the first list is in, then after
// each change, from this goroutine, one call at a time. what names the
// kind in log lines; nil logger and clock are the defaults.
func watchAll[T runtime.Object, L runtime.Object, C listWatcher[L]](ctx context.Context, logger *slog.Logger, clk clock.Clock,
	maxBackoff time.Duration, what string, client func() (C, error), example T, deliver func([]T)) {
	log := cmp.Or(logger, slog.Default()).With("watch", strings.ToLower(what))
	if client == nil || deliver == nil {
		log.Error("cannot watch "+what, "err", errors.New("no client or no receiver given"))
		return
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	backoff, maxBackoff := minBackoff, orDefault(maxBackoff, DefaultMaxBackoff)
	for {
		c, err := client()
		if err == nil && any(c) != nil {
			watchWith[T, L](ctx, log, what, c, example, deliver)
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
		backoff = min(2*backoff, maxBackoff)
	}
}

func watchWith[T runtime.Object, L runtime.Object](ctx context.Context, log *slog.Logger, what string, api listWatcher[L], example T, deliver func([]T)) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return api.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return api.Watch(ctx, opts)
		},
	}
	// As client-go's generated informers: a client that cannot stream a
	// list (a fake) says so, and is listed the old way.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, api), example, 0, cache.Indexers{})
	// Set before Run, so this cannot fail. The reflector retries with
	// back-off; meanwhile the last delivery holds.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		log.Warn(what+" list or watch failed", "err", err)
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
	log.Info("watching the cluster's " + what)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	for {
		objs := inf.GetStore().List()
		out := make([]T, 0, len(objs))
		for _, o := range objs {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		}
		deliver(out)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
