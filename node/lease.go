package node

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// LeaseAPI gets, creates and updates Leases in one namespace
// (kubeclient.Leases is one).
type LeaseAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// The kubelet's node-lease controller's retry bounds
// (k8s.io/component-helpers/apimachinery/lease).
const (
	leaseUpdateRetries  = 5
	leaseEnsureBackoff  = 100 * time.Millisecond
	leaseMaxBackoff     = 7 * time.Second
	leaseRenewJitterPct = 0.04
)

// leaseRenewer renews the node's heartbeat Lease as the kubelet's
// node-lease controller does (that controller takes client-go's whole
// clientset, which podrun does not link): every renewInterval (plus up to
// 4 % jitter, counted from the end of the last renewal) it updates the
// Lease it last saw, and on a conflict or another failure gets or creates
// the Lease again.
type leaseRenewer struct {
	leases        LeaseAPI
	name, holder  string
	durationSec   int32
	renewInterval time.Duration
	// prepare is called on every Lease about to be written (the agent
	// sets its owner); an error skips that write.
	prepare func(*coordinationv1.Lease) error
	clock   clock.WithTicker
	log     *slog.Logger

	latest *coordinationv1.Lease
}

// run renews the Lease until ctx ends.
func (l *leaseRenewer) run(ctx context.Context) {
	for {
		l.sync(ctx)
		wait := l.renewInterval + time.Duration(rand.Float64()*leaseRenewJitterPct*float64(l.renewInterval))
		if !l.sleep(ctx, wait) {
			return
		}
	}
}

// sync is one renewal.
func (l *leaseRenewer) sync(ctx context.Context) {
	if l.latest != nil {
		err := l.update(ctx, l.latest)
		if err == nil {
			return
		}
		l.log.Info("lease update from the last lease failed; getting it again", "lease", l.name, "err", err)
	}
	lease, created := l.ensureWithBackoff(ctx)
	l.latest = lease
	if !created && lease != nil {
		if err := l.update(ctx, lease); err != nil {
			l.log.Warn("lease not renewed; will retry", "lease", l.name, "err", err, "retry", l.renewInterval)
		}
	}
}

// ensureWithBackoff gets or creates the Lease, trying again with back-off
// until it can or ctx ends (nil).
func (l *leaseRenewer) ensureWithBackoff(ctx context.Context) (*coordinationv1.Lease, bool) {
	wait := leaseEnsureBackoff
	for {
		lease, created, err := l.ensure(ctx)
		if err == nil {
			return lease, created
		}
		wait = min(2*wait, leaseMaxBackoff)
		l.log.Warn("cannot get or create the lease; will retry", "lease", l.name, "err", err, "retry", wait)
		if !l.sleep(ctx, wait) {
			return nil, false
		}
	}
}

// ensure gets the Lease, or creates it when there is none; a Lease that
// prepare refuses is not created yet (nil, no error), as the kubelet's.
func (l *leaseRenewer) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	rctx, cancel := l.callContext(ctx)
	lease, err := l.leases.Get(rctx, l.name, metav1.GetOptions{})
	cancel()
	if err == nil {
		return lease, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("get lease %s: %w", l.name, err)
	}
	want, err := l.next(nil)
	if err != nil {
		return nil, false, nil
	}
	rctx, cancel = l.callContext(ctx)
	defer cancel()
	created, err := l.leases.Create(rctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("create lease %s: %w", l.name, err)
	}
	return created, true, nil
}

// update writes base renewed, getting the Lease again after a conflict.
func (l *leaseRenewer) update(ctx context.Context, base *coordinationv1.Lease) error {
	for range leaseUpdateRetries {
		want, err := l.next(base)
		if err != nil {
			l.log.Info("lease not ready to renew", "lease", l.name, "err", err)
			continue
		}
		rctx, cancel := l.callContext(ctx)
		got, err := l.leases.Update(rctx, want, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			l.latest = got
			return nil
		}
		if apierrors.IsConflict(err) {
			base, _ = l.ensureWithBackoff(ctx)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("lease %s: %d updates failed", l.name, leaseUpdateRetries)
}

// callContext bounds one call to the apiserver by the renew interval, as
// the kubelet's heartbeat client's timeout (the least of the status update
// frequency and the lease duration) bounds its: an apiserver that takes a
// request and never answers must not stop the renewals for good.
func (l *leaseRenewer) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.renewInterval)
}

// next is base (or a new Lease) renewed now.
func (l *leaseRenewer) next(base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	if base == nil {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: LeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: new(l.holder)},
		}
	} else {
		lease = base.DeepCopy()
	}
	lease.Spec.LeaseDurationSeconds = new(l.durationSec)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: l.clock.Now()}
	if l.prepare != nil {
		if err := l.prepare(lease); err != nil {
			return nil, err
		}
	}
	return lease, nil
}

// sleep waits d on the clock; false when ctx ended first.
func (l *leaseRenewer) sleep(ctx context.Context, d time.Duration) bool {
	t := l.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
