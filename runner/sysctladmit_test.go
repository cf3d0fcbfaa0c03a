package runner_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// TestUnsafeSysctlIsRefused: as the kubelet's sysctl admission, a pod
// setting an unsafe sysctl the node does not allow is Failed with
// SysctlForbidden and the kubelet's message, and runs nothing; safe
// sysctls, and unsafe ones the node allows (by name or pattern), run.
func TestUnsafeSysctlIsRefused(t *testing.T) {
	cases := []struct {
		name    string
		allowed []string
		sysctls []v1.Sysctl
		host    bool // hostNetwork
		message string
	}{
		{"unsafe not allowed", nil, []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "0"}, {Name: "kernel.shmmax", Value: "100000000"}}, false,
			`forbidden sysctl: "kernel.shmmax" not allowlisted`},
		{"slash form normalized", nil, []v1.Sysctl{{Name: "kernel/shmmax", Value: "100000000"}}, false,
			`forbidden sysctl: "kernel.shmmax" not allowlisted`},
		{"net with hostNetwork", nil, []v1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}, true,
			`forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{"safe", nil, []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}, false, ""},
		{"unsafe allowed by name", []string{"kernel.shmmax"}, []v1.Sysctl{{Name: "kernel.shmmax", Value: "100000000"}}, false, ""},
		{"unsafe allowed by pattern", []string{"kernel.msg*"}, []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000"}}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			allow, err := runner.NewSysctlAllowlist(c.allowed)
			if err != nil {
				t.Fatal(err)
			}
			fake := newFake(t)
			h := start(t, fake, func(cfg *runner.Config) { cfg.Sysctls = allow })
			pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: c.sysctls}
			pod.Spec.HostNetwork = c.host
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
			if c.message == "" {
				h.waitStatus("u1", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
				return
			}
			p := h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != runner.ReasonSysctlForbidden || p.Status.Message != c.message {
				t.Errorf("refused with %s %q, want SysctlForbidden %q", p.Status.Reason, p.Status.Message, c.message)
			}
			if n := fake.Calls("RunSandbox"); n != 0 {
				t.Errorf("a refused pod made %d sandboxes", n)
			}
		})
	}
}

// TestSysctlAllowlistRefusesWhatIsNotNamespaced: as the kubelet's
// --allowed-unsafe-sysctls, a sysctl that is not known to be namespaced
// (it would change the host) cannot be allowed.
func TestSysctlAllowlistRefusesWhatIsNotNamespaced(t *testing.T) {
	for _, bad := range []string{"vm.swappiness", "kernel.*", "", "net.*.foo*"} {
		if _, err := runner.NewSysctlAllowlist([]string{bad}); err == nil {
			t.Errorf("%q allowed", bad)
		}
	}
	if _, err := runner.NewSysctlAllowlist([]string{"net.*", "kernel.shm*", "kernel.sem"}); err != nil {
		t.Error(err)
	}
}
