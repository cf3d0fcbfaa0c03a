package manifest

import (
	"strings"
	"testing"
)

// podWith returns a pod manifest whose first container "app" has extra
// container fields (indented as container fields) and whose spec has extra
// fields; the container's extra fields start at line 9, the spec's after
// them.
func podWith(container, spec string) string {
	return dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  containers:
		  - name: app
		    image: nginx:1.27
		`) + indent(dedent(container), "    ") + indent(dedent(spec), "  ")
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		line    int
		field   string
		message string
	}{{
		name: "invalid pod name",
		data: strings.Replace(minimalPod, "name: web", "name: Web_1", 1),
		line: 4, field: "metadata.name", message: "Invalid value: \"Web_1\"",
	}, {
		name: "pod name too long once the node name is added",
		data: strings.Replace(minimalPod, "name: web", "name: "+strings.Repeat("a", 250), 1),
		line: 4, field: "metadata.name", message: "names a static pod <name>-<node>",
	}, {
		name: "generateName",
		data: strings.Replace(minimalPod, "name: web", "generateName: web-", 1),
		line: 4, field: "metadata.generateName", message: "set metadata.name instead",
	}, {
		name: "invalid namespace",
		data: strings.Replace(minimalPod, "name: web", "name: web\n  namespace: kube.system", 1),
		line: 5, field: "metadata.namespace", message: "Invalid value",
	}, {
		name: "invalid label value",
		data: strings.Replace(minimalPod, "name: web", "name: web\n  labels:\n    app: a b", 1),
		line: 6, field: "metadata.labels[app]", message: "Invalid value: \"a b\"",
	}, {
		name: "invalid annotation key",
		data: strings.Replace(minimalPod, "name: web", "name: web\n  annotations:\n    a/b/c: x", 1),
		line: 6, field: "metadata.annotations[a/b/c]", message: "Invalid value: \"a/b/c\"",
	}, {
		name: "no containers",
		data: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n",
		line: 6, field: "spec.containers", message: "Required value",
	}, {
		name: "no spec at all",
		data: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n",
		line: 1, field: "spec.containers", message: "Required value",
	}, {
		name: "container name shared by an init and an app container",
		data: podWith("", `
			initContainers:
			- name: app
			  image: busybox
			`),
		line: 10, field: "spec.initContainers[0].name", message: "Duplicate value: \"app\"",
	}, {
		name: "invalid container name",
		data: strings.Replace(minimalPod, "- name: app", "- name: App", 1),
		line: 7, field: "spec.containers[0].name", message: "Invalid value: \"App\"",
	}, {
		name: "missing image",
		data: strings.Replace(minimalPod, "    image: nginx:1.27\n", "", 1),
		line: 7, field: "spec.containers[0].image", message: "Required value",
	}, {
		name: "port out of range",
		data: podWith(`
			ports:
			- containerPort: 70000
			`, ""),
		line: 10, field: "spec.containers[0].ports[0].containerPort", message: "between 1 and 65535",
	}, {
		name: "duplicate port name",
		data: podWith(`
			ports:
			- containerPort: 80
			  name: web
			- containerPort: 81
			  name: web
			`, ""),
		line: 13, field: "spec.containers[0].ports[1].name", message: "Duplicate value: \"web\"",
	}, {
		name: "port name not an IANA service name",
		data: podWith(`
			ports:
			- containerPort: 80
			  name: http_port
			`, ""),
		line: 11, field: "spec.containers[0].ports[0].name", message: "Invalid value",
	}, {
		name: "unknown protocol",
		data: podWith(`
			ports:
			- containerPort: 80
			  protocol: HTTP
			`, ""),
		line: 11, field: "spec.containers[0].ports[0].protocol", message: "Unsupported value: \"HTTP\"",
	}, {
		name: "host port used twice",
		data: podWith(`
			ports:
			- containerPort: 80
			  hostPort: 8080
			- containerPort: 81
			  hostPort: 8080
			`, ""),
		line: 13, field: "spec.containers[0].ports[1].hostPort", message: "Duplicate value",
	}, {
		name: "host network with a different host port",
		data: podWith(`
			ports:
			- containerPort: 80
			  hostPort: 8080
			`, "hostNetwork: true\n"),
		line: 11, field: "spec.containers[0].ports[0].hostPort", message: "must match `containerPort` when `hostNetwork` is true",
	}, {
		name: "env with two sources",
		data: podWith(`
			env:
			- name: A
			  valueFrom:
			    configMapKeyRef: {name: cfg, key: a}
			    secretKeyRef: {name: sec, key: a}
			`, ""),
		line: 11, field: "spec.containers[0].env[0].valueFrom", message: "may not have more than one field specified at a time",
	}, {
		name: "env fieldRef to an unsupported field",
		data: podWith(`
			env:
			- name: A
			  valueFrom:
			    fieldRef:
			      fieldPath: spec.hostname
			`, ""),
		line: 13, field: "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", message: "field label not supported: spec.hostname",
	}, {
		name: "envFrom without a source",
		data: podWith(`
			envFrom:
			- prefix: APP_
			`, ""),
		line: 9, field: "spec.containers[0].envFrom", message: "must specify one of: `configMapRef` or `secretRef`",
	}, {
		name: "request over limit",
		data: podWith(`
			resources:
			  limits:
			    memory: 64Mi
			  requests:
			    memory: 128Mi
			`, ""),
		line: 13, field: "spec.containers[0].resources.requests[memory]", message: "must be less than or equal to memory limit of 64Mi",
	}, {
		name: "unknown resource name",
		data: podWith(`
			resources:
			  limits:
			    gpu: 1
			`, ""),
		line: 11, field: "spec.containers[0].resources.limits[gpu]", message: "must be a standard resource type or fully qualified",
	}, {
		name: "mount of a volume that does not exist",
		data: podWith(`
			volumeMounts:
			- name: data
			  mountPath: /data
			`, ""),
		line: 10, field: "spec.containers[0].volumeMounts[0].name", message: "Not found: \"data\"",
	}, {
		name: "relative mount path",
		data: podWith(`
			volumeMounts:
			- name: data
			  mountPath: data
			`, `
			volumes:
			- name: data
			`),
		line: 11, field: "spec.containers[0].volumeMounts[0].mountPath", message: "podrun: Docker needs an absolute path",
	}, {
		name: "same mount path twice",
		data: podWith(`
			volumeMounts:
			- name: data
			  mountPath: /data
			- name: data
			  mountPath: /data/
			`, `
			volumes:
			- name: data
			`),
		line: 13, field: "spec.containers[0].volumeMounts[1].mountPath", message: "podrun: Docker refuses two mounts at one path",
	}, {
		name: "volume with two sources",
		data: podWith("", `
			volumes:
			- name: data
			  emptyDir: {}
			  hostPath:
			    path: /srv
			`),
		line: 12, field: "spec.volumes[0].hostPath", message: "may not specify more than 1 volume type",
	}, {
		name: "duplicate volume name",
		data: podWith("", `
			volumes:
			- name: data
			- name: data
			`),
		line: 11, field: "spec.volumes[1].name", message: "Duplicate value",
	}, {
		name: "invalid volume name",
		data: podWith("", `
			volumes:
			- name: Data
			`),
		line: 10, field: "spec.volumes[0].name", message: "Invalid value",
	}, {
		name: "relative hostPath",
		data: podWith("", `
			volumes:
			- name: data
			  hostPath:
			    path: srv/data
			`),
		line: 12, field: "spec.volumes[0].hostPath.path", message: "podrun: Docker needs an absolute path",
	}, {
		name: "unknown hostPath type",
		data: podWith("", `
			volumes:
			- name: data
			  hostPath:
			    path: /srv
			    type: Dir
			`),
		line: 13, field: "spec.volumes[0].hostPath.type", message: "Unsupported value: \"Dir\"",
	}, {
		name: "configMap volume without a name",
		data: podWith("", `
			volumes:
			- name: cfg
			  configMap:
			    optional: true
			`),
		line: 11, field: "spec.volumes[0].configMap.name", message: "Required value",
	}, {
		name: "secret item escaping the volume",
		data: podWith("", `
			volumes:
			- name: sec
			  secret:
			    secretName: sec
			    items:
			    - key: a
			      path: ../a
			`),
		line: 15, field: "spec.volumes[0].secret.items[0].path", message: "must not contain '..'",
	}, {
		name: "restart policy",
		data: podWith("", "restartPolicy: Sometimes\n"),
		line: 9, field: "spec.restartPolicy", message: "Unsupported value: \"Sometimes\"",
	}, {
		name: "probe on a plain init container",
		data: podWith("", `
			initContainers:
			- name: init
			  image: busybox
			  readinessProbe:
			    exec:
			      command: [true]
			`),
		line: 12, field: "spec.initContainers[0].readinessProbe", message: "may not be set for init containers without restartPolicy=Always",
	}, {
		name: "probe without a handler",
		data: podWith(`
			livenessProbe:
			  periodSeconds: 5
			`, ""),
		line: 9, field: "spec.containers[0].livenessProbe", message: "must specify a handler type",
	}, {
		name: "probe with two handlers",
		data: podWith(`
			readinessProbe:
			  exec:
			    command: [true]
			  tcpSocket:
			    port: 80
			`, ""),
		line: 12, field: "spec.containers[0].readinessProbe.tcpSocket", message: "may not specify more than 1 handler type",
	}, {
		name: "probe on a named port that does not exist",
		data: podWith(`
			ports:
			- containerPort: 80
			  name: http
			startupProbe:
			  httpGet:
			    port: htp
			`, ""),
		line: 14, field: "spec.containers[0].startupProbe.httpGet.port", message: "no port named \"htp\"",
	}, {
		name: "liveness probe success threshold",
		data: podWith(`
			livenessProbe:
			  successThreshold: 2
			  tcpSocket:
			    port: 80
			`, ""),
		line: 10, field: "spec.containers[0].livenessProbe.successThreshold", message: "must be 1",
	}, {
		name: "probe scheme",
		data: podWith(`
			livenessProbe:
			  httpGet:
			    port: 80
			    scheme: FTP
			`, ""),
		line: 12, field: "spec.containers[0].livenessProbe.httpGet.scheme", message: "Unsupported value: \"FTP\"",
	}, {
		name: "negative user",
		data: podWith(`
			securityContext:
			  runAsUser: -1
			`, ""),
		line: 10, field: "spec.containers[0].securityContext.runAsUser", message: "Invalid value: -1",
	}, {
		name: "privileged without escalation",
		data: podWith(`
			securityContext:
			  privileged: true
			  allowPrivilegeEscalation: false
			`, ""),
		line: 9, field: "spec.containers[0].securityContext", message: "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
	}, {
		name: "seccomp Localhost without a profile",
		data: podWith("", `
			securityContext:
			  seccompProfile:
			    type: Localhost
			`),
		line: 10, field: "spec.securityContext.seccompProfile.localhostProfile", message: "Required value",
	}, {
		name: "invalid sysctl",
		data: podWith("", `
			securityContext:
			  sysctls:
			  - name: "net..ipv4"
			    value: "1"
			`),
		line: 11, field: "spec.securityContext.sysctls[0].name", message: "must have at most 253 characters and match regex",
	}, {
		name: "dnsPolicy None without nameservers",
		data: podWith("", "dnsPolicy: None\n"),
		line: 5, field: "spec.dnsConfig", message: "must provide `dnsConfig` when `dnsPolicy` is None",
	}, {
		name: "too many nameservers",
		data: podWith("", `
			dnsPolicy: None
			dnsConfig:
			  nameservers: [1.1.1.1, 8.8.8.8, 9.9.9.9, 1.0.0.1]
			`),
		line: 11, field: "spec.dnsConfig.nameservers", message: "must not have more than 3 nameservers",
	}, {
		name: "nameserver not an IP",
		data: podWith("", `
			dnsConfig:
			  nameservers: [dns.local]
			`),
		line: 10, field: "spec.dnsConfig.nameservers[0]", message: "Invalid value",
	}, {
		name: "downward API volume resource without a container",
		data: podWith("", `
			volumes:
			- name: info
			  downwardAPI:
			    items:
			    - path: mem
			      resourceFieldRef:
			        resource: limits.memory
			`),
		line: 11, field: "spec.volumes[0].downwardAPI.resourceFieldRef.containerName", message: "Required value",
	}, {
		name: "file mode",
		data: podWith("", `
			volumes:
			- name: cfg
			  configMap:
			    name: cfg
			    defaultMode: 01777
			`),
		line: 13, field: "spec.volumes[0].configMap.defaultMode", message: "must be a number between 0 and 0777 (octal)",
	}, {
		name: "invalid ConfigMap key",
		data: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a/b: x\n",
		line: 6, field: "data[a/b]", message: "Invalid value",
	}, {
		name: "TLS Secret without its key",
		data: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: x\n",
		line: 1, field: "data[tls.key]", message: "Required value",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", tt.data)
			findError(t, errs, tt.line, tt.field, tt.message)
		})
	}
}

func TestValidSpecialCases(t *testing.T) {
	for name, data := range map[string]string{
		"sidecar init container with probes": podWith("", `
			initContainers:
			- name: proxy
			  image: envoy:1
			  restartPolicy: Always
			  readinessProbe:
			    tcpSocket:
			      port: 9901
			`),
		"env from labels and resources": podWith(`
			env:
			- name: APP
			  valueFrom:
			    fieldRef:
			      fieldPath: metadata.labels['app']
			- name: MEM
			  valueFrom:
			    resourceFieldRef:
			      resource: limits.memory
			      divisor: 1Mi
			`, ""),
		"named probe port": podWith(`
			ports:
			- containerPort: 2381
			  name: probe-port
			livenessProbe:
			  httpGet:
			    port: probe-port
			`, ""),
		// The API server accepts it (v1.37).
		"invalid env name": podWith(`
			env:
			- name: 1ABC
			  value: x
			`, ""),
		// The API server accepts it (v1.37).
		"init container restart policy other than Always": podWith("", `
			initContainers:
			- name: init
			  image: busybox
			  restartPolicy: OnFailure
			`),
		// The API server accepts it (v1.37).
		"env resourceFieldRef to another pod's container": podWith(`
			env:
			- name: MEM
			  valueFrom:
			    resourceFieldRef:
			      containerName: db
			      resource: limits.memory
			`, ""),
	} {
		t.Run(name, func(t *testing.T) {
			mustParse(t, "pod.yaml", data)
		})
	}
}

// TestAPIServerCreatePath: what kube-apiserver does around validation on a
// create, podrun does too: the Priority admission of the system classes,
// a name generated from generateName, managedFields set aside, and
// matchLabelKeys merged into selectors.
func TestAPIServerCreatePath(t *testing.T) {
	errs := parseErrors(t, "pod.yaml", podWith("", "priorityClassName: system-node-critical\npriority: 5\n"))
	findError(t, errs, 10, "spec.priority", "must not differ from the priority of its class (2000001000)")
	errs = parseErrors(t, "pod.yaml", podWith("", "priority: 5\n"))
	findError(t, errs, 9, "spec.priority", "must not differ from the priority of its class (0)")
	errs = parseErrors(t, "pod.yaml", podWith("", "preemptionPolicy: Never\n"))
	findError(t, errs, 9, "spec.preemptionPolicy", "Priority admission")
	// A class podrun cannot know is the cluster's to check.
	mustParse(t, "pod.yaml", podWith("", "priorityClassName: team-high\npriority: 5\n"))

	// generateName: only podrun's own refusal, not the API's "name or
	// generateName is required".
	errs = parseErrors(t, "pod.yaml", strings.Replace(minimalPod, "name: web", "generateName: web-", 1))
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "podrun runs static pods") {
		t.Errorf("generateName: %v", errs)
	}
	mustParse(t, "pod.yaml", strings.Replace(minimalPod, "name: web\n",
		"name: web\n  managedFields:\n  - manager: x\n    operation: Bogus\n", 1))

	errs = parseErrors(t, "pod.yaml", strings.Replace(minimalPod, "name: web\n", "name: web\n  labels: {app: web}\n", 1)+dedent(`
		  topologySpreadConstraints:
		  - maxSkew: 1
		    topologyKey: zone
		    whenUnsatisfiable: ScheduleAnyway
		    labelSelector: {matchLabels: {app: web}}
		    matchLabelKeys: [app]
		`))
	findError(t, errs, 11, "spec.topologySpreadConstraints[0][0]", "exists in both matchLabelKeys and labelSelector")
}

// TestMergeKeyOverride: YAML lets a key override one a merge key (<<)
// gives, and so does the kubelet; kube-apiserver's strict decoding does
// not, and neither does --strict.
func TestMergeKeyOverride(t *testing.T) {
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - &c\n    name: app\n    image: img:1\n  - <<: *c\n    name: app2\n"
	snap := mustParse(t, "pod.yaml", data)
	if got := snap.Pods[0].Spec.Containers[1]; got.Name != "app2" || got.Image != "img:1" {
		t.Errorf("merged container = %s %s", got.Name, got.Image)
	}
	errs := parseStrictErrors(t, "pod.yaml", data)
	findError(t, errs, 11, "spec.containers[1].name", "overrides the value a merge key (<<) gives it")
}
