package source

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestRuntimeClassWatch: with no client yet the watch tries again after a
// back-off; then it delivers the cluster's RuntimeClasses, sorted, once
// listed and after every creation, update and deletion; it ends with its
// context.
func TestRuntimeClassWatch(t *testing.T) {
	rc := func(name, handler string) *nodev1.RuntimeClass {
		return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
	}
	cs := fake.NewClientset(rc("safe", "runsc"))
	clk := clocktesting.NewFakeClock(time.Now())
	var asks atomic.Int32
	got := make(chan string, 100)
	w := &RuntimeClassWatch{
		Client: func() (RuntimeClassAPI, error) {
			if asks.Add(1) == 1 {
				return nil, errors.New("kubeconfig not written yet")
			}
			return fakeRuntimeClasses{cs.NodeV1().RuntimeClasses(), cs}, nil
		},
		OnChange: func(rcs []*nodev1.RuntimeClass) {
			var s []string
			for _, r := range rcs {
				s = append(s, r.Name+"="+r.Handler)
			}
			got <- strings.Join(s, ",")
		},
		Clock: clk,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not end with its context")
		}
	}()

	expect := func(want string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case s := <-got:
				if s == want {
					return
				}
			case <-timeout:
				t.Fatalf("RuntimeClasses never delivered as %q", want)
			}
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond) // polls a fake clock's waiters: no timing is asserted
		}
	}
	waitFor("the back-off after no client", clk.HasWaiters)
	select {
	case s := <-got:
		t.Fatalf("delivered %q without a client", s)
	default:
	}
	clk.Step(minBackoff)
	expect("safe=runsc")

	api := cs.NodeV1().RuntimeClasses()
	if _, err := api.Create(ctx, rc("fast", "crun"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("fast=crun,safe=runsc")
	if _, err := api.Update(ctx, rc("fast", "runc"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("fast=runc,safe=runsc")
	if err := api.Delete(ctx, "safe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("fast=runc")
}

// fakeRuntimeClasses are a fake clientset's RuntimeClasses that say, as
// the fake clientset does, that they cannot stream a list.
type fakeRuntimeClasses struct {
	nodev1client.RuntimeClassInterface
	cs *fake.Clientset
}

func (f fakeRuntimeClasses) IsWatchListSemanticsUnSupported() bool {
	return f.cs.IsWatchListSemanticsUnSupported()
}
