package runner_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// stalledPulls is the fake with a registry that never sends a byte of
// one image: its pull returns only when its context ends.
type stalledPulls struct {
	*enginetest.Fake
	ref     string
	pulling chan struct{} // told each time the stalled pull begins
	// release, when set, ends the stall once closed: the pull succeeds.
	release chan struct{}
	calls   atomic.Int32
}

func (s *stalledPulls) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	if ref != s.ref {
		return s.Fake.PullImage(ctx, ref, auth)
	}
	s.calls.Add(1)
	select {
	case s.pulling <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.release:
		s.AddImage(ref)
		return s.Fake.ImageStatus(ctx, ref)
	}
}

// TestRemovalEndsAStalledPull: a pod removed while its image is being
// pulled, from a registry that has stalled, goes at once: the removal
// ends the sync under way, as the kubelet's pod worker cancels the sync of
// a pod it is told to kill. Its worker waited for the pull, that is for
// good, before it looked at the removal.
func TestRemovalEndsAStalledPull(t *testing.T) {
	fake := newFake(t)
	rt := &stalledPulls{Fake: fake, ref: "stalled:1", pulling: make(chan struct{}, 1)}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Image = rt.ref
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	select {
	case <-rt.pulling:
	case <-time.After(10 * time.Second):
		t.Fatal("the image was never pulled")
	}
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	waitUntil(t, "the removed pod's sandbox gone", func() bool { return len(h.sandboxesOf("u1")) == 0 })
}

// TestRemovalLeavesAPullSharedWithAnotherPod: two pods pulling one image
// share the pull. The removal of the pod whose sync began it does not end
// it for the other, which then starts from that one pull; the removal
// of the pod that joined it does not wait for it.
func TestRemovalLeavesAPullSharedWithAnotherPod(t *testing.T) {
	fake := newFake(t)
	rt := &stalledPulls{Fake: fake, ref: "stalled:1", pulling: make(chan struct{}, 1), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := func(uid string) *v1.Pod {
		p := newPod(uid, "p-"+uid, v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
		p.Spec.Containers[0].Image = rt.ref
		return p
	}
	first, second, third := pod("u1"), pod("u2"), pod("u3")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{first}}
	select {
	case <-rt.pulling:
	case <-time.After(10 * time.Second):
		t.Fatal("the image was never pulled")
	}
	// The others join the pull under way (there is but one): their
	// sandboxes are made before it.
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{second, third}}
	waitUntil(t, "the other pods' sandboxes", func() bool { return len(h.sandboxesOf("u2")) == 1 && len(h.sandboxesOf("u3")) == 1 })
	// A pod's sandbox is made before its sync asks for the image: wait
	// until all three wait for the one pull.
	waitUntil(t, "the three pods waiting for the pull", func() bool { return runner.PullWaiters(h.r) == 3 })

	// The pod that joined goes, without waiting for the pull.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{third}}
	waitUntil(t, "the joined pod's sandbox gone", func() bool { return len(h.sandboxesOf("u3")) == 0 })
	// The pod whose sync began the pull goes; the pull goes on.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{first}}
	waitUntil(t, "the first pod's sandbox gone", func() bool { return len(h.sandboxesOf("u1")) == 0 })
	close(rt.release)
	h.stepUntilStatus("u2", "the second pod running", time.Second, allRunning)
	if n := rt.calls.Load(); n != 1 {
		t.Errorf("%d pulls, want the one shared: the first pod's removal ended the pull the second waited for", n)
	}
}

// gatedExport is the fake whose image filesystem exports wait until the
// test releases them; started gets each export's context as it begins.
type gatedExport struct {
	*enginetest.Fake
	started chan context.Context
	release chan struct{}
}

func (g *gatedExport) ExportImageFilesystem(ctx context.Context, ref string) (io.ReadCloser, error) {
	g.started <- ctx
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Fake.ExportImageFilesystem(ctx, ref)
}

// TestRemovalLeavesAnImageCopyToOtherPods: the copy of an image volume's
// image is shared by the pods that need it at once, so the removal of the
// pod whose sync began it, which ends that sync, does not end the copy.
func TestRemovalLeavesAnImageCopyToOtherPods(t *testing.T) {
	fake := newFake(t)
	fake.AddImage("data:1")
	rt := &gatedExport{Fake: fake, started: make(chan context.Context, 4), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = rt
		c.SourcesReady = func() bool { return true }
	})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(rt.release) }) })
	a := imageVolumePod("u1", "a-node1", "data:1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a}}
	var export context.Context
	select {
	case export = <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the image was never exported")
	}
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{a}}
	// The removal has been handed over once a later update has.
	other := newPod("u9", "other-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{other}}
	waitUntil(t, "a later pod's sandbox", func() bool { return len(h.sandboxesOf("u9")) == 1 })
	if err := export.Err(); err != nil {
		t.Errorf("the copy ended with the removal of the pod that began it: %v", err)
	}
	once.Do(func() { close(rt.release) })
	waitUntil(t, "the removed pod's sandbox gone", func() bool { return len(h.sandboxesOf("u1")) == 0 })
}
