package cmd

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// stall makes an engine call, once armed, block until its context ends:
// an engine that takes a request and never answers.
type stall struct {
	armed   atomic.Bool
	entered chan struct{} // closed when the first blocked call begins
	enter   sync.Once
	ended   chan error // the blocked call's context's error, when it returns
}

func newStall() *stall { return &stall{entered: make(chan struct{}), ended: make(chan error, 1)} }

// block blocks until ctx ends when s is armed, and returns ctx's error
// (nil when it is not armed).
func (s *stall) block(ctx context.Context) error {
	if !s.armed.Load() {
		return nil
	}
	s.enter.Do(func() { close(s.entered) })
	<-ctx.Done()
	select {
	case s.ended <- ctx.Err():
	default:
	}
	return ctx.Err()
}

// awaitEntered waits until a call blocks; the minute only keeps a broken
// podrun from hanging the test.
func (s *stall) awaitEntered(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(time.Minute):
		t.Fatalf("%s never began", what)
	}
}

// awaitEnded checks that the blocked call returned because its context
// was cancelled.
func (s *stall) awaitEnded(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-s.ended:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s returned with %v, want its context cancelled", what, err)
		}
	case <-time.After(time.Minute):
		t.Errorf("%s still blocks: its context was never cancelled", what)
	}
}

// receive is what comes from ch; the minute only keeps a broken podrun
// from hanging the test.
func receive(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not end", what)
		return nil
	}
}

// stalledLists is a runtime without events whose sandbox list, the
// runner's relist, never answers once armed.
type stalledLists struct {
	noEvents
	*stall
}

func (e *stalledLists) ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error) {
	if err := e.block(ctx); err != nil {
		return nil, err
	}
	return e.noEvents.ListSandboxes(ctx)
}

// TestWaitForBoundsTheRecheck: --timeout bounds the whole wait, the last
// reading of the pods' state (runner.Recheck) too. An engine that takes
// that list and never answers ends the wait when the timeout passes, as a
// timeout that says what it waited for, not never.
func TestWaitForBoundsTheRecheck(t *testing.T) {
	pod := podOfOne("u-recheck", "web", v1.RestartPolicyAlways)
	eng := &stalledLists{noEvents: noEvents{fakeNode1()}, stall: newStall()}
	// Checked after the runner stops (cleanups run last first): the
	// relist left blocked ends with it.
	t.Cleanup(func() { eng.awaitEnded(t, "the relist the engine never answered") })
	// Nothing but the wait's Recheck lists the pods.
	r := runPodQuietly(t, eng, pod)
	ctx := context.Background()
	if _, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, time.Minute, nil); err != nil {
		t.Fatal(err)
	}

	eng.armed.Store(true)
	clk := testingclock.NewFakeClock(time.Now())
	result := make(chan error, 1)
	go func() {
		_, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 5*time.Minute, clk)
		result <- err
	}()
	eng.awaitEntered(t, "the Recheck's list")
	clk.Step(5 * time.Minute)
	err := receive(t, result, "the wait, when its timeout passed during the Recheck,")
	if err == nil || !strings.Contains(err.Error(), "timed out after 5m0s waiting for pods to be running") ||
		!strings.Contains(err.Error(), "did not answer") {
		t.Errorf("wait: %v; want a time-out that says the engine did not answer", err)
	}
	wantExit(t, "once's error of that wait", podsFailed(err), exitPodFailed)
}

// stalledRemovals is the env's engine whose removals never answer once
// armed.
type stalledRemovals struct {
	*fakeEngine
	*stall
}

func (e *stalledRemovals) RemoveContainer(ctx context.Context, id string) error {
	if err := e.block(ctx); err != nil {
		return err
	}
	return e.fakeEngine.RemoveContainer(ctx, id)
}

func (e *stalledRemovals) RemoveSandbox(ctx context.Context, id string) error {
	if err := e.block(ctx); err != nil {
		return err
	}
	return e.fakeEngine.RemoveSandbox(ctx, id)
}

// TestOnceRmBoundsTheRemoval: once --rm's removal is bounded (the pods'
// longest grace period, 30 s by default, and a minute): an engine that
// never answers a removal ends it when the bound passes, and once names
// the pods it left and exits 1.
func TestOnceRmBoundsTheRemoval(t *testing.T) {
	e := newCmdEnv(t)
	clk := testingclock.NewFakeClock(time.Now())
	e.g.Clock = clk
	eng := &stalledRemovals{fakeEngine: e.eng, stall: newStall()}
	eng.armed.Store(true) // nothing removes anything before --rm does
	job := e.write("job.yaml", jobPod("job", "echo", "hello"))
	done := make(chan error, 1)
	go func() {
		done <- e.onceWith(func(context.Context) (podEngine, error) { return eng, nil },
			job, "--wait", "complete", "--timeout", "10m", "--rm")
	}()
	eng.awaitEntered(t, "the removal")
	clk.Step(90 * time.Second)
	err := receive(t, done, "once --rm, when its removal's bound passed,")
	wantExit(t, "once --rm", err, exitPodFailed, "timed out after 1m30s removing the pods",
		"left on the node: default/job-node1")
	eng.awaitEnded(t, "the removal the engine never answered")
}
