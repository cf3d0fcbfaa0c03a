package runner_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// withEphemeral is pod with an ephemeral container debug added, as the
// API's pods/ephemeralcontainers subresource adds it, targeting target.
func withEphemeral(pod *v1.Pod, name, target string, command ...string) *v1.Pod {
	p := pod.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name, Image: image, Command: command,
			ImagePullPolicy: v1.PullIfNotPresent},
		TargetContainerName: target,
	})
	return p
}

func ephemeralStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

// TestEphemeralContainerStartsOnceInPlace: an ephemeral container added to
// a running pod is started once in the pod's sandbox, in its target's PID
// namespace, without touching the sandbox or the other containers (their
// hashes do not change), is reported in ephemeralContainerStatuses, and is
// not started again after it exits, even under restartPolicy Always.
func TestEphemeralContainerStartsOnceInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	before := map[string]string{}
	for _, c := range h.containers("u1") {
		before[c.Name] = c.ID
	}
	if runner.SandboxHash(pod) != runner.SandboxHash(withEphemeral(pod, "debug", "app")) {
		t.Fatal("adding an ephemeral container changes the sandbox hash")
	}

	debug := withEphemeral(pod, "debug", "app", "run")
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{debug}}
	p := h.waitStatus("u1", "the ephemeral container running", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "debug")
		return st != nil && st.State.Running != nil
	})
	if st := ephemeralStatus(p, "debug"); st.Ready || st.RestartCount != 0 || st.Image != image {
		t.Errorf("ephemeral status %+v: want not ready, no restart, image %s", st, image)
	}
	if !allRunning(p) || len(p.Status.ContainerStatuses) != 1 {
		t.Errorf("app statuses %+v", p.Status.ContainerStatuses)
	}
	var eph *engine.Container
	for _, c := range h.containers("u1") {
		switch {
		case c.Name == "debug":
			eph = c
		case before[c.Name] != c.ID:
			t.Errorf("container %s was made again for an ephemeral container", c.Name)
		}
	}
	if n := fake.Calls("RunSandbox"); n != 1 {
		t.Errorf("sandbox made %d times", n)
	}
	if eph == nil || eph.Type != engine.ContainerTypeEphemeral || eph.SandboxID == "" {
		t.Fatalf("ephemeral container %+v", eph)
	}
	if cfg := fake.ContainerConfig(eph.ID); cfg == nil || cfg.PIDTarget != before["app"] {
		t.Errorf("ephemeral container's PID target %+v, want the app's %s", cfg, before["app"])
	}

	// It exits: never started again, and the pod runs on.
	if err := fake.Exit(eph.ID, 0); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("u1", "the ephemeral container terminated", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "debug")
		return st != nil && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
	})
	// An update of the pod (a label) syncs it again.
	relabelled := debug.DeepCopy()
	relabelled.Labels = map[string]string{"synced": "again"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{relabelled}}
	p = h.waitStatus("u1", "the update synced", func(p *v1.Pod) bool {
		_, converged, ok := h.r.SyncedPod("u1")
		return ok && converged && p.Labels["synced"] == "again"
	})
	if st := ephemeralStatus(p, "debug"); st == nil || st.State.Terminated == nil {
		t.Errorf("ephemeral status after a sync %+v, want terminated", st)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s after the ephemeral container exited", p.Status.Phase)
	}
	n := 0
	for _, c := range h.containers("u1") {
		if c.Name == "debug" {
			n++
		}
		if c.Name == "app" && c.ID != before["app"] {
			t.Errorf("the app was replaced")
		}
	}
	if n != 1 || fake.Calls("CreateContainer") != 2 {
		t.Errorf("%d ephemeral containers, %d creates: an ephemeral container was started again", n, fake.Calls("CreateContainer"))
	}
}

// TestEphemeralContainerWithoutTargetHasItsOwnPIDNamespace: no
// targetContainerName, no PID target.
func TestEphemeralContainerWithoutTargetHasItsOwnPIDNamespace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyNever, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{withEphemeral(pod, "debug", "", enginetest.FakeScript, "exit", "3")}}
	p := h.waitStatus("u1", "the ephemeral container exited", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "debug")
		return st != nil && st.State.Terminated != nil
	})
	if st := ephemeralStatus(p, "debug"); st.State.Terminated.ExitCode != 3 || p.Status.Phase != v1.PodRunning {
		t.Errorf("ephemeral %+v, phase %s: its failure must not fail the pod", st.State, p.Status.Phase)
	}
	for _, c := range h.containers("u1") {
		if c.Name == "debug" {
			if cfg := fake.ContainerConfig(c.ID); cfg == nil || cfg.PIDTarget != "" {
				t.Errorf("PID target %+v, want none", cfg)
			}
		}
	}
}
