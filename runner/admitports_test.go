package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// refused is the status of a pod refused its host ports.
func refused(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == runner.ReasonNodePorts
}

// sandboxesOf returns the states of the pod's sandboxes in the fake.
func (h *harness) sandboxesOf(uid string) []engine.State {
	h.t.Helper()
	sbs, err := h.fake.ListSandboxes(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []engine.State
	for _, sb := range sbs {
		if sb.Pod.UID == uid {
			out = append(out, sb.State)
		}
	}
	return out
}

// TestHostPortConflictRefusesTheLaterPod: of two pods asking for one host
// port, the one given first runs; the other is Failed with the kubelet's
// reason and a message that names the port and the pod holding it, and
// nothing of it is made.
func TestHostPortConflictRefusesTheLaterPod(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	a := portPod("a", "a-node1", hostPort(8080))
	a.Annotations = map[string]string{"podrun.io/source": "/etc/pods/a.yaml"}
	b := portPod("b", "b-node1", hostPort(8080))
	c := portPod("c", "c-node1", hostPort(8081))
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b, c}}
	h.waitStatus("a", "a running", allRunning)
	h.waitStatus("c", "c running", allRunning)
	p := h.waitStatus("b", "b refused", refused)
	want := "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: " +
		"spec.containers[0].ports[0].hostPort: host port 8080/TCP of container app is held by pod default/a-node1 " +
		"(spec.containers[0].ports[0].hostPort in /etc/pods/a.yaml)"
	if !strings.HasPrefix(p.Status.Message, want) {
		t.Errorf("message %q\nwant it to begin %q", p.Status.Message, want)
	}
	if n, sbs := len(h.containers("b")), h.sandboxesOf("b"); n != 0 || len(sbs) != 0 {
		t.Errorf("refused pod has %d containers and sandboxes %v", n, sbs)
	}
	if n := fake.Calls("RunSandbox"); n != 2 {
		t.Errorf("%d sandboxes run, want 2 (a and c)", n)
	}
}

// runThenRestart runs pod until it is running, stops that runner, and
// returns a new one on the same fake, its call counts reset: podrun
// restarted with the pod running.
func runThenRestart(t *testing.T, fake *enginetest.Fake, pod *v1.Pod) *harness {
	t.Helper()
	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus(string(pod.UID), pod.Name+" running", allRunning)
	h.stop()
	fake.ResetCalls()
	return start(t, fake, nil)
}

// TestHostPortRunningPodIsNeverRefused: a restarted runner keeps the pod
// that runs with the port, although a pod given before it asks for the
// port too: that one is refused, and nothing is stopped.
func TestHostPortRunningPodIsNeverRefused(t *testing.T) {
	fake := newFake(t)
	b := portPod("b", "b-node1", hostPort(8080))
	h2 := runThenRestart(t, fake, b)
	a := portPod("a", "a-node1", hostPort(8080))
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b.DeepCopy()}}
	p := h2.waitStatus("a", "a refused", refused)
	if !strings.Contains(p.Status.Message, "held by pod default/b-node1") {
		t.Errorf("message %q does not name b", p.Status.Message)
	}
	h2.waitStatus("b", "b running", allRunning)
	for _, m := range []string{"RunSandbox", "StopSandbox", "StopContainer", "CreateContainer"} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times", m, n)
		}
	}
}

// TestHostPortRefusedPodIsAskedAgain: a refused pod is asked again when
// its manifest changes, and when the pod holding its port goes: then it
// runs, whichever of the two changes came first. A pod of the apiserver
// stays refused then, as the kubelet's.
func TestHostPortRefusedPodIsAskedAgain(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	a := portPod("a", "a-node1", hostPort(8080))
	b := portPod("b", "b-node1", hostPort(8080))
	api := portPod("c", "c", hostPort(8080))
	api.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b, api}}
	h.waitStatus("b", "b refused", refused)
	p := h.waitStatus("c", "c refused", refused)
	if strings.Contains(p.Status.Message, "tried again") {
		t.Errorf("an apiserver pod's message promises a retry: %s", p.Status.Message)
	}

	// Still held: an edit is refused again.
	edited := b.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"serve", "--v2"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitStatus("b", "b refused again", func(p *v1.Pod) bool {
		return refused(p) && len(p.Spec.Containers[0].Command) == 2
	})

	// The holder goes (its manifest moved, say): b comes up, at once or,
	// if a's sandbox still held the port, at the next try.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{a}}
	h.stepUntilStatus("b", "b running", time.Second, allRunning)
	if p, _ := h.r.Pod("c"); !refused(p) || len(h.containers("c")) != 0 {
		t.Errorf("the apiserver's pod after the holder went: %+v", p.Status)
	}
}

// TestHostPortUpdateIntoAConflictStopsThePod: a running pod whose edit
// asks for a port another pod holds is refused (as the kubelet refuses the
// new version of a static pod) and stopped; the holder is untouched.
func TestHostPortUpdateIntoAConflictStopsThePod(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	a := portPod("a", "a-node1", hostPort(8080))
	b := portPod("b", "b-node1", hostPort(9090))
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b}}
	h.waitStatus("a", "a running", allRunning)
	h.waitStatus("b", "b running", allRunning)
	first := h.containers("a")

	moved := portPod("b", "b-node1", hostPort(8080))
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{moved}}
	h.waitStatus("b", "b refused", refused)
	waitUntil(t, "b stopped", func() bool {
		for _, c := range h.containers("b") {
			if c.State == engine.StateRunning {
				return false
			}
		}
		for _, s := range h.sandboxesOf("b") {
			if s == engine.StateRunning {
				return false
			}
		}
		return true
	})
	h.waitStatus("a", "a still running", allRunning)
	h.sameContainer("a", first[0])
}

// TestMissingSecretIsAConfigError: a container whose env needs a Secret
// that no source defines waits with CreateContainerConfigError naming it;
// a missing imagePullSecret only is not used (the kubelet's way): the
// image is here, the pod runs.
func TestMissingSecretIsAConfigError(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}}}
	pulled := newPod("u2", "pulled-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pulled.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod, pulled}}
	p := h.waitStatus("u1", "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if w := p.Status.ContainerStatuses[0].State.Waiting; w.Message != `secret "creds" not found` {
		t.Errorf("waiting message %q", w.Message)
	}
	h.waitStatus("u2", "running without its pull secret", allRunning)
}

// TestHostPortRunningPodIsNeverRefusedAmongMany: the running pod comes
// last of many in one update. Every pod's claim is recorded before any
// worker decides, so the first worker cannot admit its pod before the
// running one's claim is known (it did: apply started each worker as it
// went, and a busy machine let the first decide alone).
func TestHostPortRunningPodIsNeverRefusedAmongMany(t *testing.T) {
	fake := newFake(t)
	z := portPod("z", "z-node1", hostPort(8080))
	h2 := runThenRestart(t, fake, z)
	var pods []*v1.Pod
	for i := range 60 {
		uid := fmt.Sprintf("p%02d", i)
		pods = append(pods, portPod(uid, uid+"-node1", hostPort(8080)))
	}
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: append(pods, z.DeepCopy())}
	for _, p := range pods {
		h2.waitStatus(string(p.UID), p.Name+" refused", refused)
	}
	h2.waitStatus("z", "z running", allRunning)
	if n := fake.Calls("RunSandbox"); n != 0 {
		t.Errorf("RunSandbox called %d times", n)
	}
}
