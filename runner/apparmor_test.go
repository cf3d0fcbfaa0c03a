package runner_test

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// appArmorHost is an AppArmor validator for a host with or without
// AppArmor, judging pods as the kubelet's does: any profile but Unconfined
// needs it.
type appArmorHost struct{ enabled bool }

func (h appArmorHost) ValidateHost() error {
	if !h.enabled {
		return errors.New("AppArmor is not enabled on the host")
	}
	return nil
}

func (h appArmorHost) Validate(pod *v1.Pod) error {
	for _, c := range pod.Spec.Containers {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != v1.AppArmorProfileTypeUnconfined {
			return h.ValidateHost()
		}
	}
	return nil
}

func appArmorPod(profiles ...v1.AppArmorProfile) *v1.Pod {
	cmds := map[string][]string{}
	names := []string{"a", "b", "c"}
	for i := range profiles {
		cmds[names[i]] = []string{"run"}
	}
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, cmds)
	for i := range pod.Spec.Containers {
		p := profiles[i]
		pod.Spec.Containers[i].SecurityContext = &v1.SecurityContext{AppArmorProfile: &p}
	}
	return pod
}

// TestAppArmorWithoutHostSupportRefusesThePod: a profile the host cannot
// enforce fails the pod at admission, as the kubelet's AppArmor admission.
func TestAppArmorWithoutHostSupportRefusesThePod(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) { c.AppArmor = appArmorHost{enabled: false} })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{appArmorPod(v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault})}}
	p := h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != runner.ReasonAppArmor || p.Status.Message != "Cannot enforce AppArmor: AppArmor is not enabled on the host" {
		t.Errorf("status %s: %q", p.Status.Reason, p.Status.Message)
	}
	if n := fake.Calls("RunSandbox"); n != 0 {
		t.Errorf("a refused pod made %d sandboxes", n)
	}
}

// TestAppArmorProfilesReachTheEngine: on a host with AppArmor, Unconfined
// and Localhost profiles become the engine's setting; RuntimeDefault is
// the runtime's own default.
func TestAppArmorProfilesReachTheEngine(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) { c.AppArmor = appArmorHost{enabled: true} })
	local := "podrun-test"
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{appArmorPod(
		v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault},
		v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined},
		v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &local})}}
	h.waitStatus("u1", "running", allRunning)
	want := map[string]string{"a": "", "b": "unconfined", "c": "podrun-test"}
	for _, c := range h.containers("u1") {
		if got := fake.ContainerConfig(c.ID).Security.AppArmor; got != want[c.Name] {
			t.Errorf("container %s: AppArmor %q, want %q", c.Name, got, want[c.Name])
		}
	}
}
