package paritytest

func addContainerCases(b *corpusBuilder) {
	c := "spec.containers[0]"
	// Names.
	forEach(map[string]any{
		"upper": "App", "underscore": "my_app", "dotted": "my.app", "63": label63, "64": label64,
		"leading-dash": "-app", "digits": "123", "empty": "",
	}, func(name string, value any) {
		b.mut("ctr/name-"+name, "minimal", set(c+".name", value))
	})
	b.mut("ctr/name-missing", "minimal", del(c+".name"))
	b.mut("ctr/name-dup", "full", set("spec.containers[1].name", "app"))
	b.mut("ctr/name-dup-init", "full", set("spec.initContainers[0].name", "app"))
	b.mut("ctr/name-dup-inits", "full", set("spec.initContainers[1].name", "init"))

	// Image.
	b.mut("ctr/image-missing", "minimal", del(c+".image"))
	b.mut("ctr/image-empty", "minimal", set(c+".image", ""))
	b.mut("ctr/image-leading-space", "minimal", set(c+".image", " podrun/busybox:test"))
	b.mut("ctr/image-trailing-newline", "minimal", set(c+".image", "podrun/busybox:test\n"))
	b.mut("ctr/image-inner-space", "minimal", set(c+".image", "podrun/busy box:test"))
	b.mut("ctr/image-upper", "minimal", set(c+".image", "Podrun/Busybox:test"))
	b.mut("ctr/image-digest", "minimal", set(c+".image",
		"podrun/busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"))
	b.mut("ctr/image-init-space", "full", set("spec.initContainers[0].image", "podrun/busybox:test "))
	b.mut("ctr/pull-policy-bad", "minimal", set(c+".imagePullPolicy", "Sometimes"))
	b.mut("ctr/pull-policy-lower", "minimal", set(c+".imagePullPolicy", "always"))
	b.mut("ctr/pull-policy-never", "minimal", set(c+".imagePullPolicy", "Never"))

	// Command, args, working directory, termination message.
	b.mut("ctr/command-empty", "minimal", set(c+".command", L{}))
	b.mut("ctr/args-only", "minimal", set(c+".args", L{"sleep", "1"}))
	b.mut("ctr/workdir-relative", "full", set(c+".workingDir", "www"))
	b.mut("ctr/workdir-dotdot", "full", set(c+".workingDir", "/www/../etc"))
	b.mut("ctr/term-path-relative", "full", set(c+".terminationMessagePath", "termination-log"))
	b.mut("ctr/term-path-dotdot", "full", set(c+".terminationMessagePath", "/dev/../termination-log"))
	b.mut("ctr/term-policy-bad", "full", set(c+".terminationMessagePolicy", "Logs"))
	b.mut("ctr/stdin-once", "minimal", set(c+".stdinOnce", true))
	b.mut("ctr/tty-stdin", "minimal", set(c+".tty", true), set(c+".stdin", true))

	// Ports.
	p := c + ".ports"
	b.mut("ctr/port-zero", "full", set(p+"[0].containerPort", 0))
	b.mut("ctr/port-negative", "full", set(p+"[0].containerPort", -1))
	b.mut("ctr/port-65535", "full", set(p+"[0].containerPort", 65535))
	b.mut("ctr/port-65536", "full", set(p+"[0].containerPort", 65536))
	b.mut("ctr/port-missing", "full", del(p+"[0].containerPort"))
	b.mut("ctr/host-port-65536", "full", set(p+"[1].hostPort", 65536))
	b.mut("ctr/host-port-negative", "full", set(p+"[1].hostPort", -1))
	b.mut("ctr/protocol-bad", "full", set(p+"[0].protocol", "ICMP"))
	b.mut("ctr/protocol-lower", "full", set(p+"[0].protocol", "tcp"))
	b.mut("ctr/protocol-sctp", "full", set(p+"[0].protocol", "SCTP"))
	b.mut("ctr/port-name-16", "full", set(p+"[2].name", "dns-alternative"))
	b.mut("ctr/port-name-15", "full", set(p+"[2].name", "dns-alternativ"))
	b.mut("ctr/port-name-upper", "full", set(p+"[2].name", "DNS"))
	b.mut("ctr/port-name-digits", "full", set(p+"[2].name", "5353"))
	b.mut("ctr/port-name-double-dash", "full", set(p+"[2].name", "dns--udp"))
	b.mut("ctr/port-name-dup", "full", set(p+"[2].name", "http"))
	b.mut("ctr/host-ip-name", "full", set(p+"[1].hostIP", "localhost"))
	b.mut("ctr/host-ip-v6", "full", set(p+"[1].hostIP", "::1"))
	b.mut("ctr/host-ip-leading-zero", "full", set(p+"[1].hostIP", "127.000.0.1"))
	b.mut("ctr/host-port-dup", "full", set("spec.containers[1].ports", L{M{"containerPort": 9091, "hostPort": 19090, "hostIP": "127.0.0.1"}}))
	b.mut("ctr/host-port-dup-other-ip", "full", set("spec.containers[1].ports", L{M{"containerPort": 9091, "hostPort": 19090, "hostIP": "127.0.0.2"}}))
	b.mut("ctr/host-port-dup-udp", "full", set("spec.containers[1].ports", L{M{"containerPort": 9091, "hostPort": 19090, "hostIP": "127.0.0.1", "protocol": "UDP"}}))
	b.mut("ctr/host-port-dup-init", "full", set("spec.initContainers[0].ports", L{M{"containerPort": 9091, "hostPort": 19090, "hostIP": "127.0.0.1"}}))
	b.mut("ctr/container-port-dup", "full", set("spec.containers[1].ports", L{M{"containerPort": 8080}}))
	b.mut("ctr/hostnet-port-differs", "etcd", set(c+".ports[0].hostPort", 2382))
	b.mut("ctr/hostnet-init-port-differs", "etcd", set("spec.initContainers", L{M{
		"name": "init", "image": "podrun/busybox:test",
		"ports": L{M{"containerPort": 8081, "hostPort": 8082}}}}))

	// Environment.
	e := c + ".env"
	forEach(map[string]any{
		"digit": "1VAR", "equals": "A=B", "space": "MY VAR", "dash": "my-var", "dot": "my.var",
		"dot-only": ".", "unicode": "VÄR", "tab": "A\tB", "lower": "my_var",
	}, func(name string, value any) {
		b.mut("ctr/env-name-"+name, "full", set(e+"[0].name", value))
	})
	b.mut("ctr/env-name-empty", "full", set(e+"[0].name", ""))
	b.mut("ctr/env-value-from-empty", "full", set(e+"[0].valueFrom", M{}))
	b.mut("ctr/env-value-and-from", "full", set(e+"[1].value", "x"))
	b.mut("ctr/env-two-sources", "full", set(e+"[1].valueFrom.configMapKeyRef", M{"name": "full-config", "key": "k"}))
	b.mut("ctr/env-field-bad", "full", set(e+"[1].valueFrom.fieldRef.fieldPath", "spec.hostname"))
	b.mut("ctr/env-field-empty", "full", set(e+"[1].valueFrom.fieldRef.fieldPath", ""))
	b.mut("ctr/env-field-api-v2", "full", set(e+"[1].valueFrom.fieldRef.apiVersion", "v2"))
	b.mut("ctr/env-field-labels-all", "full", set(e+"[1].valueFrom.fieldRef.fieldPath", "metadata.labels"))
	b.mut("ctr/env-field-label-key-bad", "full", set(e+"[3].valueFrom.fieldRef.fieldPath", "metadata.labels['bad key']"))
	b.mut("ctr/env-field-label-unclosed", "full", set(e+"[3].valueFrom.fieldRef.fieldPath", "metadata.labels['app"))
	b.mut("ctr/env-field-ann-upper", "full", set(e+"[3].valueFrom.fieldRef.fieldPath", "metadata.annotations['Example.com/Note']"))
	b.mut("ctr/env-field-name-subscript", "full", set(e+"[3].valueFrom.fieldRef.fieldPath", "metadata.name['x']"))
	b.mut("ctr/env-field-host-ips", "full", set(e+"[1].valueFrom.fieldRef.fieldPath", "status.hostIPs"))
	b.mut("ctr/env-field-sa-name", "full", set(e+"[1].valueFrom.fieldRef.fieldPath", "spec.serviceAccountName"))
	b.mut("ctr/env-res-bad", "full", set(e+"[4].valueFrom.resourceFieldRef.resource", "limits.gpu"))
	b.mut("ctr/env-res-empty", "full", set(e+"[4].valueFrom.resourceFieldRef.resource", ""))
	b.mut("ctr/env-res-cpu-divisor-2", "full", set(e+"[4].valueFrom.resourceFieldRef.divisor", "2"))
	b.mut("ctr/env-res-cpu-divisor-1", "full", set(e+"[4].valueFrom.resourceFieldRef.divisor", "1"))
	b.mut("ctr/env-res-cpu-divisor-10m", "full", set(e+"[4].valueFrom.resourceFieldRef.divisor", "10m"))
	b.mut("ctr/env-res-cpu-divisor-negative", "full", set(e+"[4].valueFrom.resourceFieldRef.divisor", "-1"))
	b.mut("ctr/env-res-mem-divisor-3mi", "full", set(e+"[5].valueFrom.resourceFieldRef.divisor", "3Mi"))
	b.mut("ctr/env-res-mem-divisor-1k", "full", set(e+"[5].valueFrom.resourceFieldRef.divisor", "1k"))
	b.mut("ctr/env-res-container-unknown", "full", set(e+"[5].valueFrom.resourceFieldRef.containerName", "nosuch"))
	b.mut("ctr/env-res-hugepages", "full", set(e+"[5].valueFrom.resourceFieldRef.resource", "limits.hugepages-2Mi"))
	b.mut("ctr/env-res-storage-divisor-bad", "full", set(e+"[5].valueFrom.resourceFieldRef.resource", "requests.ephemeral-storage"),
		set(e+"[5].valueFrom.resourceFieldRef.divisor", "1m"))
	b.mut("ctr/env-cm-name-empty", "full", set(e+"[6].valueFrom.configMapKeyRef.name", ""))
	b.mut("ctr/env-cm-name-bad", "full", set(e+"[6].valueFrom.configMapKeyRef.name", "Bad_Name"))
	b.mut("ctr/env-cm-key-empty", "full", set(e+"[6].valueFrom.configMapKeyRef.key", ""))
	b.mut("ctr/env-cm-key-space", "full", set(e+"[6].valueFrom.configMapKeyRef.key", "bad key"))
	b.mut("ctr/env-cm-key-dotdot", "full", set(e+"[6].valueFrom.configMapKeyRef.key", ".."))
	b.mut("ctr/env-secret-name-bad", "full", set(e+"[7].valueFrom.secretKeyRef.name", "Bad_Name"))
	b.mut("ctr/env-secret-key-space", "full", set(e+"[7].valueFrom.secretKeyRef.key", "bad key"))
	b.mut("ctr/env-file-key-ref", "full", set(e+"[0]", M{"name": "FROM_FILE", "valueFrom": M{"fileKeyRef": M{
		"volumeName": "scratch", "path": "env", "key": "FROM_FILE"}}}))
	b.mut("ctr/env-expansion-unclosed", "full", set(e+"[8].value", "hello $(POD_NAME"))
	ef := c + ".envFrom"
	b.mut("ctr/envfrom-prefix-digit", "full", set(ef+"[1].prefix", "1_"))
	b.mut("ctr/envfrom-prefix-equals", "full", set(ef+"[1].prefix", "A="))
	b.mut("ctr/envfrom-both", "full", set(ef+"[0].secretRef", M{"name": "full-secret"}))
	b.mut("ctr/envfrom-neither", "full", set(ef+"[0]", M{"prefix": "X_"}))
	b.mut("ctr/envfrom-cm-name-bad", "full", set(ef+"[0].configMapRef.name", "Bad_Name"))
	b.mut("ctr/envfrom-secret-name-empty", "full", set(ef+"[1].secretRef.name", ""))

	// Volume mounts.
	vm := c + ".volumeMounts"
	b.mut("ctr/mount-name-missing", "full", del(vm+"[0].name"))
	b.mut("ctr/mount-name-unknown", "full", set(vm+"[0].name", "nosuch"))
	b.mut("ctr/mount-path-empty", "full", set(vm+"[0].mountPath", ""))
	b.mut("ctr/mount-path-relative", "full", set(vm+"[0].mountPath", "scratch"))
	b.mut("ctr/mount-path-dotdot", "full", set(vm+"[0].mountPath", "/a/../scratch"))
	b.mut("ctr/mount-path-dup", "full", set(vm+"[1].mountPath", "/scratch"))
	b.mut("ctr/mount-path-dup-slash", "full", set(vm+"[1].mountPath", "/scratch/"))
	b.mut("ctr/mount-path-colon", "full", set(vm+"[0].mountPath", "/scratch:rw"))
	b.mut("ctr/mount-path-root", "full", set(vm+"[0].mountPath", "/"))
	b.mut("ctr/subpath-absolute", "full", set(vm+"[7].subPath", "/app.conf"))
	b.mut("ctr/subpath-dotdot", "full", set(vm+"[7].subPath", "../app.conf"))
	b.mut("ctr/subpath-inner-dotdot", "full", set(vm+"[7].subPath", "a/../../app.conf"))
	b.mut("ctr/subpath-dotdot-name", "full", set(vm+"[7].subPath", "..app.conf"))
	b.mut("ctr/subpath-nested", "full", set(vm+"[7].subPath", "conf/app.conf"))
	b.mut("ctr/subpath-expr", "full", set(vm+"[0].subPathExpr", "$(POD_NAME)"))
	b.mut("ctr/subpath-expr-and-subpath", "full", set(vm+"[7].subPathExpr", "$(POD_NAME)"))
	b.mut("ctr/subpath-expr-absolute", "full", set(vm+"[0].subPathExpr", "/$(POD_NAME)"))
	b.mut("ctr/propagation-bad", "full", set(vm+"[2].mountPropagation", "Shared"))
	b.mut("ctr/propagation-none", "full", set(vm+"[2].mountPropagation", "None"))
	b.mut("ctr/propagation-bidir", "full", set(vm+"[2].mountPropagation", "Bidirectional"))
	b.mut("ctr/propagation-bidir-privileged", "full", set(vm+"[2].mountPropagation", "Bidirectional"),
		set(c+".securityContext.privileged", true), set(c+".securityContext.allowPrivilegeEscalation", true))
	b.mut("ctr/rro-enabled", "full", set(vm+"[3].recursiveReadOnly", "Enabled"))
	b.mut("ctr/rro-not-read-only", "full", set(vm+"[0].recursiveReadOnly", "Enabled"))
	b.mut("ctr/rro-bad", "full", set(vm+"[3].recursiveReadOnly", "Always"))
	b.mut("ctr/rro-with-propagation", "full", set(vm+"[2].recursiveReadOnly", "IfPossible"), set(vm+"[2].readOnly", true))
	b.mut("ctr/volume-devices-emptydir", "full", set(c+".volumeDevices", L{M{"name": "scratch", "devicePath": "/dev/xvda"}}))

	// Restart policies and resize policies.
	b.mut("ctr/restart-policy-app", "minimal", set(c+".restartPolicy", "Always"))
	b.mut("ctr/restart-policy-init-never", "full", set("spec.initContainers[0].restartPolicy", "Never"))
	b.mut("ctr/restart-policy-init-bad", "full", set("spec.initContainers[0].restartPolicy", "Sometimes"))
	b.mut("ctr/restart-rules", "minimal", set(c+".restartPolicy", "Never"), set(c+".restartPolicyRules", L{M{
		"action": "Restart", "exitCodes": M{"operator": "In", "values": L{42}}}}))
	b.mut("ctr/restart-rules-no-policy", "minimal", set(c+".restartPolicyRules", L{M{
		"action": "Restart", "exitCodes": M{"operator": "In", "values": L{42}}}}))
	b.mut("ctr/restart-rules-bad-operator", "minimal", set(c+".restartPolicy", "Never"), set(c+".restartPolicyRules", L{M{
		"action": "Restart", "exitCodes": M{"operator": "Equals", "values": L{42}}}}))
	b.mut("ctr/restart-rules-all", "minimal", set(c+".restartPolicy", "Never"), set(c+".restartPolicyRules", L{M{
		"action": "RestartAllContainers", "exitCodes": M{"operator": "In", "values": L{42}}}}))
	b.mut("ctr/restart-policy-app-bad", "minimal", set(c+".restartPolicy", "Sometimes"))
	b.mut("ctr/resize-ok", "minimal", set(c+".resizePolicy", L{M{"resourceName": "cpu", "restartPolicy": "NotRequired"}}))
	b.mut("ctr/resize-bad-resource", "minimal", set(c+".resizePolicy", L{M{"resourceName": "gpu", "restartPolicy": "NotRequired"}}))
	b.mut("ctr/resize-bad-policy", "minimal", set(c+".resizePolicy", L{M{"resourceName": "cpu", "restartPolicy": "Sometimes"}}))
	b.mut("ctr/resize-dup", "minimal", set(c+".resizePolicy", L{
		M{"resourceName": "cpu", "restartPolicy": "NotRequired"}, M{"resourceName": "cpu", "restartPolicy": "RestartContainer"}}))
	b.mut("ctr/resize-restart-never-pod", "minimal", set("spec.restartPolicy", "Never"),
		set(c+".resizePolicy", L{M{"resourceName": "memory", "restartPolicy": "RestartContainer"}}))
	b.mut("ctr/resize-init", "full", set("spec.initContainers[0].resizePolicy", L{M{"resourceName": "cpu", "restartPolicy": "NotRequired"}}))
	b.mut("ctr/resize-sidecar", "full", set("spec.initContainers[1].resizePolicy", L{M{"resourceName": "cpu", "restartPolicy": "NotRequired"}}))

	// Probes and hooks on init containers: only sidecars may have them.
	b.mut("ctr/init-liveness", "full", set("spec.initContainers[0].livenessProbe", M{"exec": M{"command": L{"true"}}}))
	b.mut("ctr/init-readiness", "full", set("spec.initContainers[0].readinessProbe", M{"exec": M{"command": L{"true"}}}))
	b.mut("ctr/init-lifecycle", "full", set("spec.initContainers[0].lifecycle", M{"postStart": M{"exec": M{"command": L{"true"}}}}))
	b.mut("ctr/sidecar-liveness", "full", set("spec.initContainers[1].livenessProbe", M{"exec": M{"command": L{"true"}}}))
	b.mut("ctr/stop-signal", "minimal", set(c+".lifecycle.stopSignal", "SIGUSR1"))
	b.mut("ctr/stop-signal-linux", "minimal", set(c+".lifecycle.stopSignal", "SIGUSR1"), set("spec.os.name", "linux"))
	b.mut("ctr/unknown-field", "minimal", set(c+".imagee", "podrun/busybox:test"))
	b.mut("ctr/field-case", "minimal", set(c+".Image", "podrun/busybox:test"))
}
