package paritytest

import "strings"

func addPodSpecCases(b *corpusBuilder) {
	// Containers.
	b.mut("spec/containers-empty", "minimal", set("spec.containers", L{}))
	b.mut("spec/containers-missing", "minimal", del("spec.containers"))
	b.mut("spec/containers-null", "minimal", set("spec.containers", nil))
	b.mut("spec/no-spec", "minimal", del("spec"))

	// restartPolicy.
	b.mut("spec/restart-never", "minimal", set("spec.restartPolicy", "Never"))
	b.mut("spec/restart-on-failure", "minimal", set("spec.restartPolicy", "OnFailure"))
	b.mut("spec/restart-bad", "minimal", set("spec.restartPolicy", "Sometimes"))
	b.mut("spec/restart-lower", "minimal", set("spec.restartPolicy", "always"))

	// terminationGracePeriodSeconds and activeDeadlineSeconds.
	b.mut("spec/grace-negative", "minimal", set("spec.terminationGracePeriodSeconds", -1))
	b.mut("spec/grace-zero", "minimal", set("spec.terminationGracePeriodSeconds", 0))
	b.mut("spec/grace-max-int64", "minimal", set("spec.terminationGracePeriodSeconds", int64(1<<63-1)))
	b.mut("spec/grace-string", "minimal", set("spec.terminationGracePeriodSeconds", "30"))
	b.mut("spec/deadline-ok", "minimal", set("spec.activeDeadlineSeconds", 3600))
	b.mut("spec/deadline-zero", "minimal", set("spec.activeDeadlineSeconds", 0))
	b.mut("spec/deadline-negative", "minimal", set("spec.activeDeadlineSeconds", -5))
	b.mut("spec/deadline-over-int32", "minimal", set("spec.activeDeadlineSeconds", int64(1<<31)))

	// DNS.
	b.mut("spec/dns-policy-bad", "minimal", set("spec.dnsPolicy", "Cluster"))
	b.mut("spec/dns-policy-default", "minimal", set("spec.dnsPolicy", "Default"))
	b.mut("spec/dns-policy-hostnet", "etcd", set("spec.dnsPolicy", "ClusterFirstWithHostNet"))
	b.mut("spec/dns-none-no-config", "minimal", set("spec.dnsPolicy", "None"))
	b.mut("spec/dns-none-no-servers", "full", set("spec.dnsConfig.nameservers", L{}))
	b.mut("spec/dns-config-with-clusterfirst", "full", set("spec.dnsPolicy", "ClusterFirst"))
	b.mut("spec/dns-4-nameservers", "full", set("spec.dnsConfig.nameservers", L{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}))
	b.mut("spec/dns-nameserver-name", "full", set("spec.dnsConfig.nameservers[0]", "dns.local"))
	b.mut("spec/dns-nameserver-leading-zero", "full", set("spec.dnsConfig.nameservers[0]", "010.0.0.53"))
	b.mut("spec/dns-nameserver-v6-upper", "full", set("spec.dnsConfig.nameservers[1]", "FD00::53"))
	b.mut("spec/dns-nameserver-4in6", "full", set("spec.dnsConfig.nameservers[1]", "::ffff:10.0.0.53"))
	b.mut("spec/dns-nameserver-cidr", "full", set("spec.dnsConfig.nameservers[0]", "10.0.0.0/8"))
	searches := L{}
	for i := range 33 {
		searches = append(searches, "s"+strings.Repeat("x", i%5)+".example.com")
	}
	b.mut("spec/dns-33-searches", "full", set("spec.dnsConfig.searches", searches))
	b.mut("spec/dns-32-searches", "full", set("spec.dnsConfig.searches", searches[:32]))
	long := L{}
	for range 9 {
		long = append(long, strings.Repeat(strings.Repeat("a", 60)+".", 4)+"com")
	}
	b.mut("spec/dns-searches-over-2048", "full", set("spec.dnsConfig.searches", long))
	b.mut("spec/dns-search-underscore", "full", set("spec.dnsConfig.searches[0]", "_tcp.example.com"))
	b.mut("spec/dns-search-dot", "full", set("spec.dnsConfig.searches[0]", "."))
	b.mut("spec/dns-search-trailing-dot", "full", set("spec.dnsConfig.searches[0]", "example.com."))
	b.mut("spec/dns-search-upper", "full", set("spec.dnsConfig.searches[0]", "Example.com"))
	b.mut("spec/dns-search-space", "full", set("spec.dnsConfig.searches[0]", "exa mple.com"))
	b.mut("spec/dns-option-no-name", "full", set("spec.dnsConfig.options[1].name", ""))
	b.mut("spec/dns-option-value-only", "full", set("spec.dnsConfig.options[1]", M{"value": "3"}))

	// Host name and subdomain.
	b.mut("spec/hostname-upper", "full", set("spec.hostname", "Full"))
	b.mut("spec/hostname-dotted", "full", set("spec.hostname", "full.example"))
	b.mut("spec/hostname-63", "full", set("spec.hostname", label63))
	b.mut("spec/hostname-64", "full", set("spec.hostname", label64))
	b.mut("spec/subdomain-ok", "full", set("spec.subdomain", "sub"))
	b.mut("spec/subdomain-dotted", "full", set("spec.subdomain", "sub.example"))
	b.mut("spec/hostname-as-fqdn", "full", set("spec.setHostnameAsFQDN", true))
	b.mut("spec/hostname-override", "minimal", set("spec.hostnameOverride", "web.example"))

	// Host aliases.
	b.mut("spec/alias-ip-bad", "full", set("spec.hostAliases[0].ip", "not-an-ip"))
	b.mut("spec/alias-ip-empty", "full", set("spec.hostAliases[0].ip", ""))
	b.mut("spec/alias-ip-leading-zero", "full", set("spec.hostAliases[0].ip", "010.0.0.1"))
	b.mut("spec/alias-ip-v6-upper", "full", set("spec.hostAliases[1].ip", "FD00::1"))
	b.mut("spec/alias-hostname-bad", "full", set("spec.hostAliases[0].hostnames[0]", "Bad_Host"))
	b.mut("spec/alias-hostname-upper", "full", set("spec.hostAliases[0].hostnames[0]", "DB.local"))
	b.mut("spec/alias-hostname-empty", "full", set("spec.hostAliases[0].hostnames[0]", ""))
	b.mut("spec/alias-no-hostnames", "full", set("spec.hostAliases[0].hostnames", L{}))

	// Host namespaces and what goes with them.
	b.mut("spec/hostnet-hostport-differs", "full", set("spec.hostNetwork", true))
	b.mut("spec/hostnet-net-sysctl", "full", set("spec.hostNetwork", true),
		del("spec.containers[0].ports[1].hostPort"), del("spec.containers[0].ports[1].hostIP"))
	b.mut("spec/hostnet-kernel-sysctl", "full", set("spec.hostNetwork", true),
		del("spec.containers[0].ports[1].hostPort"), del("spec.containers[0].ports[1].hostIP"),
		set("spec.securityContext.sysctls", L{M{"name": "kernel.shm_rmid_forced", "value": "1"}}))
	b.mut("spec/hostipc-ipc-sysctl", "full", set("spec.hostIPC", true))
	b.mut("spec/hostpid", "minimal", set("spec.hostPID", true))
	b.mut("spec/hostipc", "minimal", set("spec.hostIPC", true))
	b.mut("spec/hostpid-share-pns", "minimal", set("spec.hostPID", true), set("spec.shareProcessNamespace", true))
	b.mut("spec/share-pns", "minimal", set("spec.shareProcessNamespace", true))
	b.mut("spec/host-users-false", "minimal", set("spec.hostUsers", false))
	b.mut("spec/host-users-false-hostnet", "etcd", set("spec.hostUsers", false))
	b.mut("spec/host-users-false-hostpid", "minimal", set("spec.hostUsers", false), set("spec.hostPID", true))

	// nodeName (podrun puts its own).
	b.mut("spec/node-name-other", "minimal", set("spec.nodeName", "node2"))
	b.mut("spec/node-name-bad", "minimal", set("spec.nodeName", "Node_1"))
	b.mut("spec/node-name-gates", "minimal", set("spec.nodeName", nodeName), set("spec.schedulingGates", L{M{"name": "example.com/wait"}}))

	// Service accounts and tokens.
	b.mut("spec/sa-other", "minimal", set("spec.serviceAccountName", "builder"))
	b.mut("spec/sa-bad", "minimal", set("spec.serviceAccountName", "Bad_SA"))
	b.mut("spec/sa-deprecated-field", "minimal", set("spec.serviceAccount", "default"))
	b.mut("spec/automount-true", "minimal", set("spec.automountServiceAccountToken", true))
	b.mut("spec/service-links-true", "minimal", set("spec.enableServiceLinks", true))

	// imagePullSecrets: only name.
	b.mut("spec/pull-secret-empty-name", "full", set("spec.imagePullSecrets[0].name", ""))
	b.mut("spec/pull-secret-bad-name", "full", set("spec.imagePullSecrets[0].name", "Bad_Name"))
	b.mut("spec/pull-secret-extra-field", "full", set("spec.imagePullSecrets[0].namespace", "x"))

	// Priority (the Priority admission plugin computes the value from the
	// class).
	b.mut("spec/priority-mismatch", "etcd", set("spec.priority", 5))
	b.mut("spec/priority-without-class", "minimal", set("spec.priority", 5))
	b.mut("spec/priority-class-bad", "minimal", set("spec.priorityClassName", "Bad_Class"))
	b.mut("spec/priority-class-node-critical", "minimal", set("spec.priorityClassName", "system-node-critical"))
	b.mut("spec/preemption-never", "minimal", set("spec.preemptionPolicy", "Never"))
	b.mut("spec/preemption-bad", "minimal", set("spec.preemptionPolicy", "Sometimes"))

	// RuntimeClass and overhead ("runc" exists, without overhead).
	b.mut("spec/runtime-class-ok", "minimal", set("spec.runtimeClassName", "runc"))
	b.mut("spec/runtime-class-bad", "minimal", set("spec.runtimeClassName", "Bad_Class"))
	b.mut("spec/overhead-no-class", "minimal", set("spec.overhead", M{"cpu": "100m"}))
	b.mut("spec/overhead-negative", "minimal", set("spec.overhead", M{"cpu": "-100m"}))

	// os: Linux, Windows, and the fields of the other one.
	b.mut("spec/os-linux", "minimal", set("spec.os.name", "linux"))
	b.mut("spec/os-windows", "minimal", set("spec.os.name", "windows"))
	b.mut("spec/os-bad", "minimal", set("spec.os.name", "plan9"))
	b.mut("spec/os-empty", "minimal", set("spec.os", M{}))
	b.mut("spec/os-linux-pod-windows-opts", "minimal", set("spec.os.name", "linux"),
		set("spec.securityContext.windowsOptions.runAsUserName", "ContainerUser"))
	b.mut("spec/os-linux-ctr-windows-opts", "minimal", set("spec.os.name", "linux"),
		set("spec.containers[0].securityContext.windowsOptions.runAsUserName", "ContainerUser"))
	b.mut("spec/os-windows-seccomp", "etcd", set("spec.os.name", "windows"))
	b.mut("spec/os-windows-run-as-user", "minimal", set("spec.os.name", "windows"), set("spec.securityContext.runAsUser", 1000))
	b.mut("spec/os-windows-host-pid", "minimal", set("spec.os.name", "windows"), set("spec.hostPID", true))
	b.mut("spec/os-windows-sysctls", "full", set("spec.os.name", "windows"))
	b.mut("spec/windows-opts-no-os", "minimal", set("spec.securityContext.windowsOptions.runAsUserName", "ContainerUser"))
	b.mut("spec/windows-host-process", "minimal", set("spec.securityContext.windowsOptions.hostProcess", true))
	b.mut("spec/windows-user-bad", "minimal", set("spec.securityContext.windowsOptions.runAsUserName", `a\b\c`))
	b.mut("spec/windows-gmsa-bad", "minimal", set("spec.securityContext.windowsOptions.gmsaCredentialSpecName", "Bad_Name"))

	// Ephemeral containers cannot be given on create.
	b.mut("spec/ephemeral-containers", "minimal", set("spec.ephemeralContainers", L{M{"name": "debug", "image": "podrun/busybox:test"}}))

	// Scheduling gates.
	b.mut("spec/gates-ok", "minimal", set("spec.schedulingGates", L{M{"name": "example.com/wait"}}))
	b.mut("spec/gates-dup", "minimal", set("spec.schedulingGates", L{M{"name": "example.com/wait"}, M{"name": "example.com/wait"}}))
	b.mut("spec/gates-bad", "minimal", set("spec.schedulingGates", L{M{"name": "bad gate"}}))

	// Resource claims (dynamic resource allocation).
	b.mut("spec/claims-ok", "minimal", set("spec.resourceClaims", L{M{"name": "gpu", "resourceClaimName": "my-gpu"}}))
	b.mut("spec/claims-bad-name", "minimal", set("spec.resourceClaims", L{M{"name": "Bad_Name", "resourceClaimName": "my-gpu"}}))
	b.mut("spec/claims-both-sources", "minimal", set("spec.resourceClaims", L{M{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}}))
	b.mut("spec/claims-ctr-unknown", "minimal", set("spec.containers[0].resources.claims", L{M{"name": "gpu"}}))
	b.mut("spec/claims-ctr-ok", "minimal", set("spec.resourceClaims", L{M{"name": "gpu", "resourceClaimName": "my-gpu"}}),
		set("spec.containers[0].resources.claims", L{M{"name": "gpu"}}))

	// Pod-level resources.
	b.mut("spec/pod-resources-ok", "full", set("spec.resources", M{"limits": M{"cpu": "2", "memory": "1Gi"}}))
	b.mut("spec/pod-resources-below-ctrs", "full", set("spec.resources", M{"requests": M{"cpu": "100m"}}))
	b.mut("spec/pod-resources-limit-below", "full", set("spec.resources", M{"limits": M{"cpu": "500m"}}))
	b.mut("spec/pod-resources-gpu", "minimal", set("spec.resources", M{"limits": M{"example.com/gpu": "1"}}))
	b.mut("spec/pod-resources-storage", "minimal", set("spec.resources", M{"limits": M{"ephemeral-storage": "1Gi"}}))
	b.mut("spec/pod-resources-windows", "minimal", set("spec.resources", M{"limits": M{"cpu": "1"}}), set("spec.os.name", "windows"))

	// status is the server's.
	b.mut("spec/status-given", "minimal", set("status", M{"phase": "Running", "podIP": "10.0.0.5"}))
	b.mut("spec/status-bad-phase", "minimal", set("status", M{"phase": "Sleeping"}))

	// Pod security context.
	b.mut("spec/psc-run-as-user-negative", "full", set("spec.securityContext.runAsUser", -1))
	b.mut("spec/psc-run-as-user-over-int32", "full", set("spec.securityContext.runAsUser", int64(1<<31)))
	b.mut("spec/psc-run-as-user-max", "full", set("spec.securityContext.runAsUser", int64(1<<31-1)))
	b.mut("spec/psc-run-as-group-negative", "full", set("spec.securityContext.runAsGroup", -1))
	b.mut("spec/psc-supplemental-negative", "full", set("spec.securityContext.supplementalGroups[0]", -1))
	b.mut("spec/psc-supplemental-policy-ok", "full", set("spec.securityContext.supplementalGroupsPolicy", "Strict"))
	b.mut("spec/psc-supplemental-policy-bad", "full", set("spec.securityContext.supplementalGroupsPolicy", "Loose"))
	b.mut("spec/psc-fsgroup-ok", "full", set("spec.securityContext.fsGroup", 3000))
	b.mut("spec/psc-fsgroup-negative", "full", set("spec.securityContext.fsGroup", -1))
	b.mut("spec/psc-fsgroup-policy-bad", "full", set("spec.securityContext.fsGroupChangePolicy", "Sometimes"))
	b.mut("spec/psc-run-as-non-root", "full", set("spec.securityContext.runAsNonRoot", true))
	b.mut("spec/psc-sysctl-bad-name", "full", set("spec.securityContext.sysctls[0].name", "Net.IPv4.ip_forward"))
	b.mut("spec/psc-sysctl-slashes", "full", set("spec.securityContext.sysctls[0].name", "net/ipv4/ip_local_port_range"))
	b.mut("spec/psc-sysctl-empty-name", "full", set("spec.securityContext.sysctls[0].name", ""))
	b.mut("spec/psc-sysctl-dup", "full", set("spec.securityContext.sysctls[1].name", "net.ipv4.ip_local_port_range"))
	b.mut("spec/psc-sysctl-254", "full", set("spec.securityContext.sysctls[0].name", "net."+subdomain253[:250]))
	b.mut("spec/psc-seccomp-type-bad", "full", set("spec.securityContext.seccompProfile.type", "Default"))
	b.mut("spec/psc-seccomp-type-empty", "full", set("spec.securityContext.seccompProfile", M{}))
	b.mut("spec/psc-seccomp-localhost-none", "full", set("spec.securityContext.seccompProfile.type", "Localhost"))
	b.mut("spec/psc-seccomp-localhost-ok", "full", set("spec.securityContext.seccompProfile", M{"type": "Localhost", "localhostProfile": "profiles/audit.json"}))
	b.mut("spec/psc-seccomp-localhost-abs", "full", set("spec.securityContext.seccompProfile", M{"type": "Localhost", "localhostProfile": "/var/lib/kubelet/seccomp/audit.json"}))
	b.mut("spec/psc-seccomp-localhost-up", "full", set("spec.securityContext.seccompProfile", M{"type": "Localhost", "localhostProfile": "../audit.json"}))
	b.mut("spec/psc-seccomp-localhost-empty", "full", set("spec.securityContext.seccompProfile", M{"type": "Localhost", "localhostProfile": ""}))
	b.mut("spec/psc-seccomp-default-with-prof", "full", set("spec.securityContext.seccompProfile.localhostProfile", "audit.json"))
	b.mut("spec/psc-apparmor-ok", "full", set("spec.securityContext.appArmorProfile.type", "RuntimeDefault"))
	b.mut("spec/psc-apparmor-localhost-none", "full", set("spec.securityContext.appArmorProfile.type", "Localhost"))
	b.mut("spec/psc-apparmor-localhost-space", "full", set("spec.securityContext.appArmorProfile", M{"type": "Localhost", "localhostProfile": " prof"}))
	b.mut("spec/psc-apparmor-bad-type", "full", set("spec.securityContext.appArmorProfile.type", "Strict"))
	b.mut("spec/psc-apparmor-default-prof", "full", set("spec.securityContext.appArmorProfile", M{"type": "RuntimeDefault", "localhostProfile": "prof"}))
	b.mut("spec/psc-selinux-ok", "full", set("spec.securityContext.seLinuxOptions", M{"level": "s0:c123,c456"}))
	b.mut("spec/psc-selinux-policy-bad", "full", set("spec.securityContext.seLinuxChangePolicy", "Sometimes"))
	b.mut("spec/psc-selinux-policy-mount", "full", set("spec.securityContext.seLinuxChangePolicy", "MountOption"))
}
