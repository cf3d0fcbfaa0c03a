package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestPrivilegedSandbox: a pod with a privileged container of any kind
// gets a privileged sandbox (a CRI runtime refuses the container in any
// other), and making one privileged by an edit changes the sandbox hash;
// a pod without one hashes as before the field existed.
func TestPrivilegedSandbox(t *testing.T) {
	pod := func(privileged *bool) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Image: "x", SecurityContext: &v1.SecurityContext{Privileged: privileged}}},
			Containers:     []v1.Container{{Name: "app", Image: "x"}},
		}}
	}
	r := &Runner{}
	plain, unset, priv := pod(ptr.To(false)), pod(nil), pod(ptr.To(true))
	if r.sandboxConfig(plain, 0).Privileged || r.sandboxConfig(unset, 0).Privileged {
		t.Error("a pod without a privileged container has a privileged sandbox")
	}
	if !r.sandboxConfig(priv, 0).Privileged {
		t.Error("a privileged init container's pod has no privileged sandbox")
	}
	if SandboxHash(plain) == SandboxHash(priv) {
		t.Error("making a container privileged keeps the sandbox hash")
	}
	if got := string(sandboxRecord(plain)); got != `{}` {
		t.Errorf("the sandbox record of an unprivileged pod is %s: its hash changed", got)
	}
	ephemeral := pod(nil)
	ephemeral.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debug", Image: "x", SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}}}}
	if !r.sandboxConfig(ephemeral, 0).Privileged || SandboxHash(ephemeral) != SandboxHash(unset) {
		t.Error("a privileged ephemeral container: want a privileged sandbox when it is made, and the same hash")
	}
}
