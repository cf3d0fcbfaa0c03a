package source

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
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
	var clk clock.Clock
	if w.Clock != nil {
		clk = w.Clock
	}
	log := cmp.Or(w.Logger, slog.Default()).With("watch", "runtimeclasses")
	var deliver func([]*nodev1.RuntimeClass)
	if w.OnChange != nil {
		last := ""
		deliver = func(out []*nodev1.RuntimeClass) {
			slices.SortFunc(out, func(a, b *nodev1.RuntimeClass) int { return cmp.Compare(a.Name, b.Name) })
			var names []string
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
		}
	}
	watchAll(ctx, w.Logger, clk, w.MaxBackoff, "RuntimeClasses", w.Client, &nodev1.RuntimeClass{}, deliver)
}
