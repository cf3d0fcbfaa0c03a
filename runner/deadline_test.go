package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// TestActiveDeadlineFailsPodForGood: a pod with activeDeadlineSeconds runs
// until its deadline (counted from its startTime on the runner's clock),
// then has everything of it stopped and is Failed with reason
// DeadlineExceeded; nothing of it starts again until its spec is edited,
// and then it is a new pod with a deadline of its own.
// The sync at the deadline is scheduled by the worker itself: the resync
// period is far off, so nothing else would wake it.
func TestActiveDeadlineFailsPodForGood(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) { c.SyncFrequency = 24 * time.Hour })
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	deadline := int64(60)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "running", allRunning)
	if p.Status.StartTime == nil || !p.Status.StartTime.Time.Equal(epoch) {
		t.Fatalf("startTime %v, want the clock's %v", p.Status.StartTime, epoch)
	}

	// One second short of the deadline, a sync (an edit of an annotation
	// forces one) leaves the pod running.
	h.step(59 * time.Second)
	edited := pod.DeepCopy()
	edited.Annotations = map[string]string{"step": "1"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p = h.waitStatus("u1", "the edit synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "1" })
	if p.Status.Phase != v1.PodRunning || p.Status.Reason != "" || !allRunning(p) {
		t.Fatalf("before the deadline: phase %s reason %q, want Running", p.Status.Phase, p.Status.Reason)
	}

	// At the deadline: the worker's own timer fires (once the worker,
	// done with the edit, waits on it).
	waitUntil(t, "the worker's deadline timer", func() bool { return h.timers() > 0 })
	h.step(time.Second)
	p = h.waitStatus("u1", "DeadlineExceeded", func(p *v1.Pod) bool {
		return p.Status.Reason == runner.ReasonDeadlineExceeded
	})
	if p.Status.Phase != v1.PodFailed || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("phase %s message %q, want Failed with the kubelet's message", p.Status.Phase, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			t.Error("a pod past its deadline is Ready")
		}
	}
	waitUntil(t, "every container and the sandbox stopped", func() bool {
		for _, c := range h.containers("u1") {
			if c.State == engine.StateRunning {
				return false
			}
		}
		sbs, _ := fake.ListSandboxes(t.Context())
		for _, sb := range sbs {
			if sb.Pod.UID == "u1" && sb.State == engine.StateRunning {
				return false
			}
		}
		return true
	})
	h.waitStatus("u1", "the containers' terminated states", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				return false
			}
		}
		return true
	})
	made := len(h.containers("u1"))

	// Long after, the manifest re-sent as it was (a rescan: only an
	// annotation differs) leaves the pod Failed and starts nothing.
	h.step(time.Hour)
	edited = edited.DeepCopy()
	edited.Annotations["step"] = "2"
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p = h.waitStatus("u1", "the re-sent pod synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "2" })
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != runner.ReasonDeadlineExceeded {
		t.Errorf("after a re-send: phase %s reason %q, want Failed DeadlineExceeded", p.Status.Phase, p.Status.Reason)
	}
	if n := len(h.containers("u1")); n != made {
		t.Errorf("%d containers after the re-send, want the %d there were: nothing starts again", n, made)
	}
	for _, c := range h.containers("u1") {
		if c.State == engine.StateRunning {
			t.Errorf("container %s runs again", c.Name)
		}
	}

	// An edit of the spec makes a new pod of it, as of an evicted pod: it
	// runs again, started now, and its deadline counts from now.
	edited = edited.DeepCopy()
	edited.Annotations["step"] = "3"
	edited.Spec.Containers[0].Command = []string{"run", "again"}
	restarted := epoch.Add(time.Minute + time.Hour)
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p = h.waitStatus("u1", "running again after an edit", func(p *v1.Pod) bool {
		return p.Annotations["step"] == "3" && allRunning(p)
	})
	if p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
		t.Errorf("after an edit: phase %s reason %q, want Running", p.Status.Phase, p.Status.Reason)
	}
	if p.Status.StartTime == nil || !p.Status.StartTime.Time.Equal(restarted) {
		t.Errorf("startTime after the edit %v, want the edit's %v", p.Status.StartTime, restarted)
	}
	waitUntil(t, "the worker's new deadline timer", func() bool { return h.timers() > 0 })
	h.step(59 * time.Second)
	edited = edited.DeepCopy()
	edited.Annotations["step"] = "4"
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p = h.waitStatus("u1", "the fourth edit synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "4" })
	if p.Status.Phase != v1.PodRunning || !allRunning(p) {
		t.Errorf("59 s after the edit: phase %s reason %q, want Running", p.Status.Phase, p.Status.Reason)
	}
	waitUntil(t, "the worker's deadline timer", func() bool { return h.timers() > 0 })
	h.step(time.Second)
	h.waitStatus("u1", "DeadlineExceeded again", func(p *v1.Pod) bool {
		return p.Status.Reason == runner.ReasonDeadlineExceeded
	})
}

// TestActiveDeadlineSparesFinishedPod: a pod that completed before its
// deadline stays Succeeded when the deadline passes.
func TestActiveDeadlineSparesFinishedPod(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p", v1.RestartPolicyNever, map[string][]string{"a": {enginetest.FakeScript, "exit", "0"}})
	deadline := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })

	h.step(time.Minute)
	edited := pod.DeepCopy()
	edited.Annotations = map[string]string{"step": "1"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p := h.waitStatus("u1", "the edit synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "1" })
	if p.Status.Phase != v1.PodSucceeded || p.Status.Reason != "" {
		t.Errorf("phase %s reason %q, want Succeeded: it finished before its deadline", p.Status.Phase, p.Status.Reason)
	}
}

// sandboxRemovalBlocker holds the first sandbox removal until release is
// closed.
type sandboxRemovalBlocker struct {
	*enginetest.Fake
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *sandboxRemovalBlocker) RemoveSandbox(ctx context.Context, id string) error {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
	return b.Fake.RemoveSandbox(ctx, id)
}

// TestPodPastItsDeadlineDefinedAgainRunsAnew: a pod past its deadline
// whose manifest is deleted and written back while the pod is being
// removed is a new pod, as a new manifest's: it runs, with a start time
// and a deadline from now, rather than staying Failed for the deadline of
// the pod removed.
func TestPodPastItsDeadlineDefinedAgainRunsAnew(t *testing.T) {
	fake := newFake(t)
	b := &sandboxRemovalBlocker{Fake: fake, entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = b
		c.SyncFrequency = 24 * time.Hour
	})
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(60))
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	waitUntil(t, "the worker's deadline timer", func() bool { return h.timers() > 0 })
	h.step(time.Minute)
	h.waitStatus("u1", "DeadlineExceeded", func(p *v1.Pod) bool {
		return p.Status.Reason == runner.ReasonDeadlineExceeded
	})

	h.defineAgainWhileRemoved(pod, b.entered, b.release)

	p := h.waitStatus("u1", "running anew", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && allRunning(p)
	})
	if p.Status.StartTime == nil || !p.Status.StartTime.Time.Equal(epoch.Add(time.Minute)) {
		t.Errorf("startTime %v, want now (%v)", p.Status.StartTime, epoch.Add(time.Minute))
	}
}
