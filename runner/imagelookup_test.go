package runner_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// imageBeforeSandbox is the fake engine whose RunSandbox returns only once
// the image of the pod's app container has been looked up: a runner that
// looks it up only after the sandbox runs never gets there, and the
// sandbox fails when holdTimeout ends.
type imageBeforeSandbox struct {
	*enginetest.Fake
	image  string
	looked chan struct{}
	once   sync.Once
}

func (f *imageBeforeSandbox) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	if ref == f.image {
		f.once.Do(func() { close(f.looked) })
	}
	return f.Fake.ImageStatus(ctx, ref)
}

func (f *imageBeforeSandbox) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	select {
	case <-f.looked:
	case <-time.After(holdTimeout):
		return "", errors.New("the app container's image was not looked up while the sandbox started")
	}
	return f.Fake.RunSandbox(ctx, cfg)
}

// holdTimeout is how long a held call waits for what it waits on: the way
// out of a runner that never does it.
const holdTimeout = 10 * time.Second

// A new pod's app container images are looked up while its sandbox
// starts, not after: the sandbox's start is the longest step of a
// bring-up, and the lookup a round trip after it.
func TestImagesLookedUpWhileTheSandboxStarts(t *testing.T) {
	fake := newFake(t)
	rt := &imageBeforeSandbox{Fake: fake, image: image, looked: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	// One lookup for the image both containers run, not one each.
	if n := fake.Calls("ImageStatus"); n != 1 {
		t.Errorf("%d image lookups, want 1", n)
	}
}
