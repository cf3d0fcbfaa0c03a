package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// memLeases is an apiserver's Leases in memory, with resourceVersion
// checks; conflicts makes the next Updates fail with a conflict.
type memLeases struct {
	lease     *coordinationv1.Lease
	version   int
	conflicts int
	calls     []string
}

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (m *memLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	m.calls = append(m.calls, "get")
	if m.lease == nil {
		return nil, apierrors.NewNotFound(leaseGR, name)
	}
	return m.lease.DeepCopy(), nil
}

func (m *memLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	m.calls = append(m.calls, "create")
	m.version++
	m.lease = l.DeepCopy()
	m.lease.ResourceVersion = strconv.Itoa(m.version)
	return m.lease.DeepCopy(), nil
}

func (m *memLeases) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	m.calls = append(m.calls, "update")
	if m.conflicts > 0 {
		m.conflicts--
		m.version++ // someone else wrote it
		m.lease.ResourceVersion = strconv.Itoa(m.version)
	}
	if l.ResourceVersion != m.lease.ResourceVersion {
		return nil, apierrors.NewConflict(leaseGR, l.Name, errors.New("resourceVersion changed"))
	}
	m.version++
	m.lease = l.DeepCopy()
	m.lease.ResourceVersion = strconv.Itoa(m.version)
	return m.lease.DeepCopy(), nil
}

// TestLeaseRenewer follows the kubelet's node-lease controller: no Lease
// before the owner is known, created once it is, then renewed from the
// last Lease written, and got again after a conflict.
func TestLeaseRenewer(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &memLeases{}
	owned := false
	l := &leaseRenewer{leases: api, name: "n1", holder: "n1", durationSec: 40, renewInterval: 10 * time.Second,
		prepare: func(lease *coordinationv1.Lease) error {
			if !owned {
				return errors.New("node not registered yet")
			}
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"}}
			return nil
		},
		clock: clk, log: slog.New(slog.DiscardHandler)}

	l.sync(ctx)
	if api.lease != nil {
		t.Fatalf("a lease was created before its owner was known: %+v", api.lease)
	}

	owned = true
	l.sync(ctx)
	if api.lease == nil || *api.lease.Spec.HolderIdentity != "n1" || *api.lease.Spec.LeaseDurationSeconds != 40 ||
		len(api.lease.OwnerReferences) != 1 || !api.lease.Spec.RenewTime.Time.Equal(clk.Now()) {
		t.Fatalf("created lease: %+v", api.lease)
	}

	clk.Step(10 * time.Second)
	api.calls = nil
	l.sync(ctx)
	if got := api.lease.Spec.RenewTime.Time; !got.Equal(clk.Now()) {
		t.Errorf("renew time %v, want %v", got, clk.Now())
	}
	if len(api.calls) != 1 || api.calls[0] != "update" {
		t.Errorf("a renewal from the last lease made calls %v, want one update", api.calls)
	}

	clk.Step(10 * time.Second)
	api.calls, api.conflicts = nil, 1
	l.sync(ctx)
	if got := api.lease.Spec.RenewTime.Time; !got.Equal(clk.Now()) {
		t.Errorf("after a conflict: renew time %v, want %v", got, clk.Now())
	}
	if want := []string{"update", "get", "update"}; !slices.Equal(api.calls, want) {
		t.Errorf("after a conflict: calls %v, want %v", api.calls, want)
	}
}

// stallingLeases is an apiserver that takes every Lease update and never
// answers it: each Update returns only when its context ends (or the test
// lets it go). Get answers.
type stallingLeases struct {
	memLeases
	release chan struct{}
}

func (s *stallingLeases) Update(ctx context.Context, _ *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.release:
		return nil, errors.New("released by the test")
	}
}

// TestLeaseRenewalOutlivesAStalledRequest: a renewal whose request the
// apiserver never answers ends (each call is bounded, as the kubelet's
// heartbeat client's timeout bounds its), so that the next renewal comes;
// without a bound it would wait for an answer for good and the Lease
// would expire while podrun runs.
func TestLeaseRenewalOutlivesAStalledRequest(t *testing.T) {
	api := &stallingLeases{release: make(chan struct{})}
	t.Cleanup(func() { close(api.release) })
	api.lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: LeaseNamespace, ResourceVersion: "1"}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &leaseRenewer{leases: api, name: "n1", holder: "n1", durationSec: 40, renewInterval: 20 * time.Millisecond,
		clock: clk, log: slog.New(slog.DiscardHandler), latest: api.lease.DeepCopy()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.sync(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a lease renewal still waits for an apiserver that never answers, after 10 s")
	}
}
