package runner_test

import (
	"context"
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
}

func (s *stalledPulls) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	if ref != s.ref {
		return s.Fake.PullImage(ctx, ref, auth)
	}
	select {
	case s.pulling <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
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
