package runner_test

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

// TestFirstCrashRestartsAtTheDieEvent: a container's first crash is
// restarted at its die event, with no back-off, as the kubelet does: the
// fake clock never moves (relist, resync and housekeeping are an hour
// apart), so a restart that waited for any timer would never come. A
// container replaced by an edit after it had exited is not new to the
// back-off: as the kubelet's doBackOff, the start of its new spec counts
// from the newest exited run, so the edited container's first crash waits
// 10 s.
func TestFirstCrashRestartsAtTheDieEvent(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = withEvents{fake, fake, dieEvents{fake}}
		c.RelistPeriod, c.SyncFrequency, c.HousekeepingPeriod = time.Hour, time.Hour, time.Hour
	})
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	exitRunning := func() {
		t.Helper()
		for _, c := range h.containers("u1") {
			if c.State == engine.StateRunning {
				if err := fake.Exit(c.ID, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	crash := func(restarts int32) {
		t.Helper()
		exitRunning()
		h.waitStatus("u1", "the restart at the die event", func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount == restarts && cs[0].State.Running != nil
		})
	}
	crash(1)

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "edited"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	waitUntil(t, "the edited container to run", func() bool {
		for _, c := range h.containers("u1") {
			if c.State == engine.StateRunning && strings.Join(fake.ContainerConfig(c.ID).Command, " ") == "run edited" {
				return true
			}
		}
		return false
	})
	exitRunning()
	h.waitStatus("u1", "the edited container's first crash backing off", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 2 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == "CrashLoopBackOff" && strings.HasPrefix(cs[0].State.Waiting.Message, "back-off 10s ")
	})
}
