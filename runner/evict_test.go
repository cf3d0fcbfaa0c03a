package runner_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

// TestEvictStopsAndKeepsFailedUntilSpecChanges: an evicted pod is stopped
// and Failed with reason Evicted and the DisruptionTarget condition; it
// stays so across syncs; an edit of its spec runs it again.
func TestEvictStopsAndKeepsFailedUntilSpecChanges(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Generation = 2
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	if !h.r.Evict("u1", "The node was low on resource: memory.") {
		t.Fatal("Evict: the runner does not hold the pod")
	}
	if h.r.Evict("nope", "x") {
		t.Error("Evict of an unknown pod reported true")
	}
	p := h.waitStatus("u1", "evicted", func(p *v1.Pod) bool { return p.Status.Reason == runner.ReasonEvicted })
	if p.Status.Phase != v1.PodFailed || p.Status.Message != "The node was low on resource: memory." {
		t.Errorf("status %s %q, want Failed with the message", p.Status.Phase, p.Status.Message)
	}
	// The kubelet's eviction manager and status manager: the condition
	// and the status carry the pod's generation.
	if p.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", p.Status.ObservedGeneration)
	}
	found := false
	for _, c := range p.Status.Conditions {
		found = found || (c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == "TerminationByKubelet" &&
			c.ObservedGeneration == 2)
	}
	if !found {
		t.Errorf("conditions %+v lack DisruptionTarget", p.Status.Conditions)
	}
	// The whole status, as the kubelet's for an evicted pod: Failed is
	// reported once the containers have stopped, with their terminated
	// states and the conditions of a Failed pod.
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("container statuses %+v, want a terminated one", p.Status.ContainerStatuses)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		ok := false
		for _, c := range p.Status.Conditions {
			ok = ok || (c.Type == ct && c.Status == v1.ConditionFalse && c.Reason == "PodFailed")
		}
		if !ok {
			t.Errorf("conditions %+v: %s not False with reason PodFailed", p.Status.Conditions, ct)
		}
	}
	if p.Status.StartTime == nil || p.Status.QOSClass == "" {
		t.Errorf("startTime %v qosClass %q, want both", p.Status.StartTime, p.Status.QOSClass)
	}
	waitUntil(t, "the evicted pod's containers to stop", func() bool {
		for _, c := range h.containers("u1") {
			if c.State == engine.StateRunning {
				return false
			}
		}
		return true
	})

	// The same spec again (a rescan; only an annotation differs, which
	// shows when the runner has synced it) keeps it evicted.
	resent := pod.DeepCopy()
	resent.Annotations = map[string]string{"resent": "yes"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{resent}}
	p = h.waitStatus("u1", "the re-sent pod synced", func(p *v1.Pod) bool { return p.Annotations["resent"] == "yes" })
	if p.Status.Reason != runner.ReasonEvicted {
		t.Fatalf("a re-sent spec ran the evicted pod again: %s %s", p.Status.Phase, p.Status.Reason)
	}

	// An edit makes it a pod to run.
	edited := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "again"}})
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitStatus("u1", "running again after an edit", allRunning)
}

// TestEvictedPodEmptyDirsRemoved: once an evicted pod's containers are
// stopped its emptyDirs are removed, its status staying Evicted, and the
// runner names it to container GC; an edit takes it off that list and
// makes its emptyDir anew, empty.
func TestEvictedPodEmptyDirsRemoved(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	dir := filepath.Join(root, "pods", "u1", "volumes", "kubernetes.io~empty-dir", "scratch")
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := h.r.EvictedPods(); len(got) != 0 {
		t.Errorf("EvictedPods = %v before any eviction", got)
	}

	h.r.Evict("u1", "The node was low on resource: ephemeral-storage.")
	waitUntil(t, "the evicted pod's emptyDirs removed", func() bool {
		_, err := os.Lstat(filepath.Dir(dir))
		return errors.Is(err, fs.ErrNotExist)
	})
	for _, c := range h.containers("u1") {
		if c.State == engine.StateRunning {
			t.Errorf("container %s runs while its emptyDir was removed", c.Name)
		}
	}
	if p, _ := h.r.Pod("u1"); p == nil || p.Status.Reason != runner.ReasonEvicted || p.Status.Phase != v1.PodFailed {
		t.Errorf("status after the emptyDirs went: %+v, want Failed Evicted", p)
	}
	if got := h.r.EvictedPods(); !got["u1"] || len(got) != 1 {
		t.Errorf("EvictedPods = %v, want u1", got)
	}

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "again"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitStatus("u1", "running again after an edit", allRunning)
	if got := h.r.EvictedPods(); len(got) != 0 {
		t.Errorf("EvictedPods = %v after the edit", got)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("the emptyDir after the edit: %v, %v; want it made anew, empty", ents, err)
	}
}
