package runner_test

import (
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// TestPodForAnotherOSIsRefused: as the kubelet's admission, a pod whose
// spec.os or kubernetes.io/os nodeSelector names another operating system
// is Failed with the kubelet's reason and runs nothing; one naming this
// node's runs.
func TestPodForAnotherOSIsRefused(t *testing.T) {
	cases := []struct {
		name   string
		set    func(*v1.Pod)
		reason string
	}{
		{"spec.os windows", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }, runner.ReasonPodOSNotSupported},
		{"nodeSelector windows", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelOSStable: "windows"} },
			runner.ReasonPodOSSelectorNodeLabelDoesNotMatch},
		{"this OS", func(p *v1.Pod) {
			p.Spec.OS = &v1.PodOS{Name: v1.OSName(runtime.GOOS)}
			p.Spec.NodeSelector = map[string]string{v1.LabelOSStable: runtime.GOOS}
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := newFake(t)
			h := start(t, fake, nil)
			pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			c.set(pod)
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
			if c.reason == "" {
				h.waitStatus("u1", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
				return
			}
			p := h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != c.reason {
				t.Errorf("reason %q, want %q (%s)", p.Status.Reason, c.reason, p.Status.Message)
			}
			if n := fake.Calls("RunSandbox"); n != 0 {
				t.Errorf("a refused pod made %d sandboxes", n)
			}
		})
	}
}
