package runner

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is the kubelet's status reason of a pod refused for
// a sysctl the node does not allow (pkg/kubelet/sysctl).
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are the kubelet's safe sysctls (pkg/kubelet/sysctl
// safe_sysctls.go): namespaced, and without effect on other pods. The
// kubelet drops those a kernel older than 4.15 does not namespace; podrun
// allows them all and leaves such a kernel's refusal to the engine.
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle",
	"net.ipv4.tcp_notsent_lowat",
}

// SysctlAllowlist is the sysctls pods may set: the safe ones and the
// unsafe ones the node allows (--allowed-unsafe-sysctls), each by name or
// by a prefix pattern ending in *, as the kubelet's patternAllowlist.
type SysctlAllowlist struct {
	sysctls  map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctlAllowlist returns the allowlist of the safe sysctls and unsafe,
// the node's allowed unsafe sysctls or patterns; an unsafe one that is not
// a sysctl name (or pattern) or not known to be namespaced is an error.
func NewSysctlAllowlist(unsafe []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{sysctls: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, s := range append(append([]string{}, safeSysctls...), unsafe...) {
		if s == "" || len(s) > 253 || strings.Contains(strings.TrimSuffix(s, "*"), "*") {
			return nil, fmt.Errorf("sysctl %q is not a sysctl name or a pattern ending in *", s)
		}
		ns, name, prefixed := utilsysctl.GetNamespace(s)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", name)
		}
		if prefixed {
			w.prefixes[name] = ns
		} else {
			w.sysctls[name] = ns
		}
	}
	return w, nil
}

// check is why the sysctl may not be set in a pod sharing the host's
// network, IPC or user namespaces as told, or nil.
func (w *SysctlAllowlist) check(sysctl string, hostNet, hostIPC, hostUsers bool) error {
	sysctl = utilsysctl.NormalizeName(sysctl)
	ns, found := w.sysctls[sysctl]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(sysctl, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", sysctl)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) ||
		(ns == utilsysctl.UserNamespace && hostUsers) {
		return fmt.Errorf("%q not allowed with host %s enabled", sysctl, ns)
	}
	return nil
}

// sysctlRejection is why pod may not run for its sysctls, as the kubelet's
// admission refuses it (SysctlForbidden); nil when it may.
func sysctlRejection(pod *v1.Pod, w *SysctlAllowlist) *rejection {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	// A pod shares the host's user namespace unless hostUsers is false.
	hostUsers := pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
	for _, s := range sc.Sysctls {
		if err := w.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC, hostUsers); err != nil {
			return &rejection{reason: ReasonSysctlForbidden, message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return nil
}
