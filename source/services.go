package source

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// ServiceWatch keeps the cluster's Services, as the kubelet's service
// lister does: one informer on all of them (the node authorizer lets a
// node read them), for the service links of pods' environment.
type ServiceWatch struct {
	// Client returns the apiserver's Services of all namespaces;
	// required. It is asked again, with back-off, until it gives them.
	Client func() (ServiceAPI, error)
	// OnChange receives every Service of the cluster: once the first list
	// is in, then after each change, from Run's goroutine, one call at a
	// time.
	OnChange func([]*v1.Service)
	// MaxBackoff caps the back-off between attempts to get a client; zero
	// means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Clock drives the back-off; nil is the real clock.
	Clock clock.WithTicker
	// Logger: nil means slog.Default().
	Logger *slog.Logger
}

// ServiceAPI lists and watches the cluster's Services
// (kubeclient.Services of all namespaces is one).
type ServiceAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Run watches the Services until ctx ends.
func (w *ServiceWatch) Run(ctx context.Context) {
	var clk clock.Clock
	if w.Clock != nil {
		clk = w.Clock
	}
	watchAll(ctx, w.Logger, clk, w.MaxBackoff, "Services", w.Client, &v1.Service{}, w.OnChange)
}
