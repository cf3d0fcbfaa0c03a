package runner_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podrun/podrun/runner"
)

// eventLog is an EventRecorder that keeps "<fieldPath> <type> <reason>: <message>".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(obj runtime.Object, eventtype, reason, message string) {
	ref := obj.(*v1.ObjectReference)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s/%s %s %s %s: %s", ref.Namespace, ref.Name, ref.FieldPath, eventtype, reason, message))
}

func (l *eventLog) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.events, func(e string) bool { return strings.Contains(e, sub) })
}

// all returns the events recorded so far.
func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *eventLog) wait(t *testing.T, h *harness, sub string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !l.has(sub) {
		if time.Now().After(deadline) {
			l.mu.Lock()
			t.Fatalf("no event %q in %q", sub, l.events)
		}
		h.clk.Step(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
}

// The sync core records the kubelet's events: an image present, a
// container created and started, a start that failed, a container killed.
func TestPodEventsRecorded(t *testing.T) {
	fake := newFake(t)
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	missing := newPod("u2", "broken-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	missing.Spec.Containers[0].Image = "absent:1"
	missing.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod, missing}}
	h.waitStatus("u1", "running", allRunning)
	for _, want := range []string{
		`default/web-node1 spec.containers{app} Normal Pulled: Container image "` + image + `" already present on machine`,
		"default/web-node1 spec.containers{app} Normal Created: Created container app",
		"default/web-node1 spec.containers{app} Normal Started: Started container app",
	} {
		events.wait(t, h, want)
	}
	events.wait(t, h, "default/broken-node1 spec.containers{app} Warning Failed: Error: ErrImageNeverPull")

	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	events.wait(t, h, "default/web-node1 spec.containers{app} Normal Killing: Stopping container app")
}

// A pod refused its host ports gets the kubelet's NodePorts event; a pull
// without a pull secret that is missing gets FailedToRetrieveImagePullSecret.
func TestRefusalAndMissingPullSecretEvents(t *testing.T) {
	fake := newFake(t)
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	a := portPod("a", "a-node1", hostPort(8080))
	b := portPod("b", "b-node1", hostPort(8080))
	pulled := newPod("u3", "pulled-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pulled.Spec.Containers[0].Image = "remote:1"
	pulled.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b, pulled}}
	events.wait(t, h, "default/b-node1  Warning NodePorts: Predicate NodePorts failed: node(s) didn't have free ports")
	events.wait(t, h, "default/pulled-node1  Warning FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (regcred)")
	h.waitStatus("u3", "running", allRunning)
}

// An HTTP probe answered with a redirect to another host passes, with the
// kubelet's ProbeWarning event (the spec "should *not* be restarted with a
// non-local redirect http liveness probe" looks for it); the container is
// not restarted.
func TestProbeWarningEvent(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://0.0.0.0/", http.StatusFound))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	fake := newFake(t)
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	pod := newPod("u1", "redirect-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1",
			Path: "/redirect?loc=" + url.QueryEscape("http://0.0.0.0/"), Port: intstr.FromInt32(int32(port))}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	events.wait(t, h, `default/redirect-node1 spec.containers{app} Warning ProbeWarning: Liveness probe warning: `+
		`Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`)
	if events.has("Unhealthy") || events.has("Killing") {
		t.Fatalf("a redirect to another host failed the probe: %q", events.events)
	}
	h.waitStatus("u1", "running, never restarted", func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].RestartCount == 0
	})
}
