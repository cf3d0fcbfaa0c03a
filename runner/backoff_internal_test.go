package runner

import (
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// TestCrashLoopBackOffMessage: the waiting message names the pod as the
// kubelet's doBackOff does (format.Pod: name_namespace(uid)), which is what
// kubectl shows for a crash-looping container.
func TestCrashLoopBackOffMessage(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	bo := newBackoff(clk)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &pod.Spec.Containers[0]
	st := newState(pod).sandbox("s", 0, engine.StateRunning).build()
	st.Containers = []*engine.Container{{ID: "a", SandboxID: "s", Name: "a", State: engine.StateExited, ExitCode: 1,
		Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c), CreatedAt: t0, StartedAt: t0, FinishedAt: t0}}
	bo.Next(backoffKey(pod, c), t0.Add(-time.Second))
	w, held := inBackoff(pod, c, st.Containers[0], bo)
	if !held {
		t.Fatal("not held in back-off")
	}
	if want := "back-off 10s restarting failed container=a pod=p-node_default(uid-1)"; w.Message != want {
		t.Errorf("message %q, want %q", w.Message, want)
	}
}

// TestResourcesChangeEndsCrashLoopBackOff: a container crash-looping
// (OOM-killed, say) whose memory limit is changed is started at once, as
// by the kubelet, whose GetBackoffKey covers container.Resources: the new
// resources have a fresh back-off. A change back to resources that
// crash-looped before starts fresh too (freshStartForEdits), as every
// edit of a static pod is a new pod to the kubelet.
func TestResourcesChangeEndsCrashLoopBackOff(t *testing.T) {
	for _, tc := range []struct{ name, from, to string }{
		{"limit raised", "64Mi", "256Mi"},
		{"limit put back to one that crash-looped before", "64Mi", "64Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Hour)
			clk := testclock.NewFakeClock(now)
			r := New(Config{Runtime: enginetest.NewFake("node1"), Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			withLimit := func(q string) *v1.Pod {
				pod := testPod(v1.RestartPolicyAlways, nil, "a")
				pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(q)}
				return pod
			}
			old := withLimit(tc.from)
			c := &old.Spec.Containers[0]
			st := newState(old).sandbox("s", 0, engine.StateRunning).build()
			finished := now.Add(-2 * time.Second)
			st.Containers = []*engine.Container{{ID: "a-3", SandboxID: "s", Name: "a", Type: engine.ContainerTypeApp, Attempt: 3,
				State: engine.StateExited, ExitCode: 137, OOMKilled: true, Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c),
				CreatedAt: finished.Add(-time.Second), StartedAt: finished.Add(-time.Second), FinishedAt: finished}}
			// Three restarts so far: 10s, 20s, 40s.
			for range 3 {
				r.backoff.Next(backoffKey(old, c), finished)
			}
			if a := computePodActions(old, st, r.backoff, nil); a.Waiting["a"].Reason != "CrashLoopBackOff" {
				t.Fatalf("precondition: a not in back-off: %+v", a)
			}
			w := newPodWorker(r, old)
			if tc.from == tc.to {
				// A limit tried meanwhile, then the old one again.
				between := withLimit("128Mi")
				w.update(between)
			}
			pod := withLimit(tc.to)
			w.update(pod)
			a := computePodActions(pod, st, r.backoff, nil)
			if !eq(names(a.StartApps), []string{"a"}) {
				t.Errorf("a is not started at once after its resources changed: StartApps %v, Waiting %+v",
					names(a.StartApps), a.Waiting)
			}
		})
	}
}

// TestSandboxEditEndsCrashLoopBackOff: an edit of the sandbox's part of a
// pod (hostNetwork, say) makes the pod again, and its crash-looping
// container starts in the new sandbox at once, as in the kubelet, to
// which an edited static pod is a new pod (a new UID): the back-off that
// a new sandbox keeps is only that of a sandbox that died.
func TestSandboxEditEndsCrashLoopBackOff(t *testing.T) {
	now := t0.Add(time.Hour)
	r := New(Config{Runtime: enginetest.NewFake("node1"), Clock: testclock.NewFakeClock(now),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	old := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &old.Spec.Containers[0]
	st := newState(old).sandbox("s", 0, engine.StateRunning).build()
	finished := now.Add(-2 * time.Second)
	st.Containers = []*engine.Container{{ID: "a-3", SandboxID: "s", Name: "a", Type: engine.ContainerTypeApp, Attempt: 3,
		State: engine.StateExited, ExitCode: 1, Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c),
		CreatedAt: finished.Add(-time.Second), StartedAt: finished.Add(-time.Second), FinishedAt: finished}}
	for range 3 {
		r.backoff.Next(backoffKey(old, c), finished)
	}
	pod := old.DeepCopy()
	pod.Spec.HostNetwork = true
	newPodWorker(r, old).update(pod)
	a := computePodActions(pod, st, r.backoff, nil)
	if !a.CreateSandbox || !eq(names(a.StartApps), []string{"a"}) {
		t.Errorf("after a sandbox edit: CreateSandbox %v, StartApps %v, Waiting %+v; want a started in a new sandbox",
			a.CreateSandbox, names(a.StartApps), a.Waiting)
	}
}
