package runner_test

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
)

// TestServiceLinksInTheEnvironment: in cluster mode a pod from the API
// waits (CreateContainerConfigError, as the kubelet's "services have not
// yet been read") until the Services are read, then its container's
// environment has the service links of its namespace and the kubernetes
// Service, its own variables winning, and $(VAR) expanding them.
func TestServiceLinksInTheEnvironment(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) { c.ClusterServices = true })
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: manifest.ConfigSourceAPI}
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "FOOSERVICE_SERVICE_PORT", Value: "mine"},
		{Name: "URL", Value: "http://$(FOOSERVICE_SERVICE_HOST):8765"},
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "waiting for the Services", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	svc := func(ns, name, ip string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Port: 8765, Protocol: v1.ProtocolTCP}}}}
	}
	h.r.SetServices([]*v1.Service{svc("default", "kubernetes", "10.96.0.1"), svc("default", "fooservice", "10.96.0.7"),
		svc("other", "elsewhere", "10.96.0.9")})
	// The first Services start the waiting pod at once: the clock (its
	// back-off) does not move.
	h.waitStatus("u1", "running", allRunning)
	p, _ := h.r.Pod("u1")
	env := map[string]string{}
	for _, e := range fake.ContainerConfig(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "fake://")).Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{
		"FOOSERVICE_SERVICE_HOST": "10.96.0.7", "FOOSERVICE_SERVICE_PORT": "mine", "FOOSERVICE_PORT": "tcp://10.96.0.7:8765",
		"FOOSERVICE_PORT_8765_TCP_ADDR": "10.96.0.7", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "URL": "http://10.96.0.7:8765",
		"ELSEWHERE_SERVICE_HOST": "",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

// gatedSandbox holds RunSandbox until released: a sync in the middle.
type gatedSandbox struct {
	*enginetest.Fake
	entered, release chan struct{}
}

func (g *gatedSandbox) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	close(g.entered)
	<-g.release
	return g.Fake.RunSandbox(ctx, cfg)
}

// TestServicesArrivingMidSyncStartThePodAtOnce: the Services come while
// the pod's first sync runs, after it made the environment without them
// (at podrun's start the pods and the Services come together). The
// container's config error holds no back-off: it starts in the next sync,
// the clock (the back-off) never moving.
func TestServicesArrivingMidSyncStartThePodAtOnce(t *testing.T) {
	fake := newFake(t)
	gate := &gatedSandbox{Fake: fake, entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) {
		c.ClusterServices = true
		c.Runtime = gate
	})
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Annotations = map[string]string{manifest.AnnotationConfigSource: manifest.ConfigSourceAPI}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	<-gate.entered
	h.r.SetServices(nil)
	close(gate.release)
	h.waitStatus("u1", "running", allRunning)
}
