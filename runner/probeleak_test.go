package runner_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// probeWorkers counts the goroutines probing a container (the health
// manager's workers), of every runner of the test binary.
func probeWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "health.(*worker).loop(")
}

// TestProbesOfAContainerRemovedBehindPodrunsBackEnd: a container removed
// by someone else (docker rm -f) while podrun did not look is gone from
// the runtime's state, never seen exited: its probes end all the same.
// They went on for the pod's life, one goroutine each, probing a
// container that no longer exists (a failed probe, and its Unhealthy
// event, every period).
func TestProbesOfAContainerRemovedBehindPodrunsBackEnd(t *testing.T) {
	base := probeWorkers()
	fake := newFake(t)
	fake.SetExecHandler(func(string, []string) (int, []byte, error) { return 0, nil, nil })
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].ReadinessProbe = everySecond("ready")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.stepUntilStatus("u1", "ready", time.Second, func(p *v1.Pod) bool { return allRunning(p) && isPodReady(p) })
	waitUntil(t, "the readiness probe's worker", func() bool { return probeWorkers() == base+1 })

	// Removed while the engine's events were away (dockerd restarting):
	// the next look at the pod finds it gone, never exited.
	old := h.idOf("u1", "a")
	fake.CutEvents()
	if err := fake.RemoveContainer(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	fake.Resync()
	// Its successor, after a back-off if there is one, ready: its own
	// probe has run.
	h.stepUntilStatus("u1", "a successor, ready", time.Second, func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].Ready && cs[0].ContainerID != "" && !strings.HasSuffix(cs[0].ContainerID, old)
	})
	deadline := time.Now().Add(10 * time.Second)
	for probeWorkers() != base+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d probe workers run for the pod, want 1 (its successor's): the removed container's still probes", probeWorkers()-base)
		}
		time.Sleep(time.Millisecond)
	}
}
