package paritytest

func addSecurityCases(b *corpusBuilder) {
	sc := "spec.containers[0].securityContext"
	b.mut("sec/privileged", "minimal", set(sc+".privileged", true))
	b.mut("sec/privileged-no-escalation", "full", set(sc+".privileged", true))
	b.mut("sec/sys-admin-no-escalation", "full", set(sc+".capabilities.add[1]", "SYS_ADMIN"))
	b.mut("sec/cap-sys-admin-no-escalation", "full", set(sc+".capabilities.add[1]", "CAP_SYS_ADMIN"))
	b.mut("sec/cap-lower", "full", set(sc+".capabilities.add[0]", "net_bind_service"))
	b.mut("sec/cap-unknown", "full", set(sc+".capabilities.add[0]", "NOT A CAP"))
	b.mut("sec/cap-all-add", "minimal", set(sc+".capabilities.add", L{"ALL"}))
	b.mut("sec/run-as-user-negative", "full", set(sc+".runAsUser", -1))
	b.mut("sec/run-as-user-over-int32", "full", set(sc+".runAsUser", int64(1<<31)))
	b.mut("sec/run-as-group-negative", "full", set(sc+".runAsGroup", -1))
	b.mut("sec/run-as-non-root", "full", set(sc+".runAsNonRoot", true))
	b.mut("sec/run-as-non-root-uid-0", "minimal", set(sc+".runAsNonRoot", true), set(sc+".runAsUser", 0))
	b.mut("sec/proc-mount-unmasked", "minimal", set(sc+".procMount", "Unmasked"))
	b.mut("sec/proc-mount-unmasked-userns", "minimal", set(sc+".procMount", "Unmasked"), set("spec.hostUsers", false))
	b.mut("sec/proc-mount-bad", "minimal", set(sc+".procMount", "Masked"))
	b.mut("sec/seccomp-localhost-abs", "full", set(sc+".seccompProfile", M{"type": "Localhost", "localhostProfile": "/etc/seccomp/audit.json"}))
	b.mut("sec/seccomp-localhost-up", "full", set(sc+".seccompProfile", M{"type": "Localhost", "localhostProfile": "a/../../audit.json"}))
	b.mut("sec/seccomp-localhost-ok", "full", set(sc+".seccompProfile", M{"type": "Localhost", "localhostProfile": "audit.json"}))
	b.mut("sec/seccomp-unconfined", "full", set(sc+".seccompProfile.type", "Unconfined"))
	b.mut("sec/seccomp-type-bad", "full", set(sc+".seccompProfile.type", "unconfined"))
	b.mut("sec/apparmor-localhost-none", "full", set(sc+".appArmorProfile.type", "Localhost"))
	b.mut("sec/apparmor-localhost-ok", "full", set(sc+".appArmorProfile", M{"type": "Localhost", "localhostProfile": "k8s-nginx"}))
	b.mut("sec/apparmor-mismatch-annotation", "full", set(sc+".appArmorProfile.type", "Unconfined"),
		set(`metadata.annotations["container.apparmor.security.beta.kubernetes.io/app"]`, "runtime/default"))
	b.mut("sec/selinux", "full", set(sc+".seLinuxOptions", M{"type": "spc_t"}))
	b.mut("sec/windows-opts", "minimal", set(sc+".windowsOptions", M{"runAsUserName": "ContainerUser"}))
	b.mut("sec/windows-user-control-char", "minimal", set(sc+".windowsOptions", M{"runAsUserName": "user\x01"}))
	b.mut("sec/windows-host-process-mismatch", "minimal", set("spec.securityContext.windowsOptions.hostProcess", true),
		set(sc+".windowsOptions.hostProcess", false), set("spec.hostNetwork", true))
	b.mut("sec/read-only-root", "minimal", set(sc+".readOnlyRootFilesystem", true))
	b.mut("sec/escalation-true", "full", set(sc+".allowPrivilegeEscalation", true))
}
