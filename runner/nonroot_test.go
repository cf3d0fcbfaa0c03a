package runner_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

// TestRunAsNonRootOverRootImage: a container that must run as non-root,
// of an image that runs as root, is not made; it waits with
// CreateContainerConfigError and the kubelet's message, while one of the
// same pod with a non-root runAsUser runs.
func TestRunAsNonRootOverRootImage(t *testing.T) {
	fake := newFake(t)
	fake.PutImage(engine.Image{ID: "sha256:named", RepoTags: []string{"named:1"}, User: "app"})
	h := start(t, fake, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"a-root": {"serve"}, "b-user": {"serve"},
		"c-named": {"serve"}})
	yes, uid := true, int64(1000)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: &yes}
	pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{RunAsUser: &uid}
	pod.Spec.Containers[2].Image = "named:1"
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	waiting := func(p *v1.Pod, i int) *v1.ContainerStateWaiting {
		cs := p.Status.ContainerStatuses
		if len(cs) != 3 || cs[i].State.Waiting == nil || cs[i].State.Waiting.Reason != "CreateContainerConfigError" {
			return nil
		}
		return cs[i].State.Waiting
	}
	// The status shows b-user running from the next relist on.
	cond := func(p *v1.Pod) bool {
		return waiting(p, 0) != nil && waiting(p, 2) != nil && p.Status.ContainerStatuses[1].State.Running != nil
	}
	h.stepUntilStatus("u1", "a-root and c-named refused, b-user running", relistPeriod, cond)
	p := h.waitStatus("u1", "the same", cond)
	if got, want := waiting(p, 0).Message,
		`container has runAsNonRoot and image will run as root (pod: "web-node1_default(u1)", container: a-root)`; got != want {
		t.Errorf("a-root: message %q, want %q", got, want)
	}
	if got := waiting(p, 2).Message; !strings.Contains(got, "non-numeric user (app)") {
		t.Errorf("c-named: message %q", got)
	}
	for _, c := range h.containers("u1") {
		if c.Name != "b-user" {
			t.Errorf("container %s was made", c.Name)
		}
	}
}
