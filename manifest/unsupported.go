package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// podrun warns about every field of a Pod that it does not implement, rather
// than silently running something other than what the manifest says. The
// list below is what it implements (or, for a few scheduling fields that
// mean nothing on one machine, accepts on purpose); a field not on it, or
// set to a value not listed, yields a warning naming the field and its line.
// Empty values (null, "", {}, []) never warn: `status: {}` and
// `nodeSelector: {}` say nothing.
//
// Accepted without a warning although podrun does nothing with them:
// spec.priority, priorityClassName, preemptionPolicy, tolerations,
// schedulerName and enableServiceLinks (every kubeadm static pod has some of
// them; they are about scheduling and cluster services), nodeName (replaced by
// the node's name, as the kubelet does), and automountServiceAccountToken:
// false, serviceAccountName: default, hostUsers: true, os.name: linux, which
// ask for what podrun does anyway.
//
// Warned about, among others: affinity, nodeSelector,
// topologySpreadConstraints (the kubelet would refuse the pod when they do
// not match the node; podrun runs it), ephemeralContainers,
// readinessGates, runtimeClassName, overhead, resourceClaims,
// pod-level resources, fsGroup (volumes are not chowned), seLinuxOptions,
// appArmorProfile, runAsNonRoot: true (not enforced), volume types other than
// hostPath, emptyDir, configMap, secret, downwardAPI and projected (of
// configMap, secret, downwardAPI), resizePolicy, volumeDevices, subPathExpr,
// lifecycle tcpSocket hooks and stopSignal, restartPolicy on app containers, and status.
func supportedPodFields() []string {
	var fields []string
	add := func(prefix string, names ...string) {
		for _, n := range names {
			fields = append(fields, joinPath(prefix, n))
		}
	}
	add("", "apiVersion", "kind")
	add("metadata", "name", "namespace", "uid", "labels.**", "annotations.**", "creationTimestamp")

	add("spec", "restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy",
		"dnsConfig.nameservers", "dnsConfig.searches", "dnsConfig.options[].name", "dnsConfig.options[].value",
		"nodeName", "hostNetwork", "hostPID", "hostIPC", "hostname",
		"securityContext.runAsUser", "securityContext.runAsGroup", "securityContext.runAsNonRoot=false",
		"securityContext.sysctls[].name", "securityContext.sysctls[].value",
		"securityContext.seccompProfile.type=RuntimeDefault|Unconfined|Localhost",
		"securityContext.seccompProfile.localhostProfile", "securityContext.supplementalGroups",
		"hostAliases[].ip", "hostAliases[].hostnames",
		// Secrets of type kubernetes.io/dockerconfigjson or dockercfg found
		// in the same sources.
		"imagePullSecrets[].name",
		// Scheduling fields, meaningless on one machine; kubeadm writes them.
		"schedulerName", "priority", "priorityClassName", "preemptionPolicy", "tolerations.**", "enableServiceLinks",
		// Values that ask for what podrun does anyway.
		"automountServiceAccountToken=false", "serviceAccountName=default", "serviceAccount=default",
		"shareProcessNamespace=false", "hostUsers=true", "setHostnameAsFQDN=false", "os.name=linux")

	keyToPaths := func(prefix string) {
		add(prefix, "items[].key", "items[].path", "items[].mode", "optional")
	}
	downwardFiles := func(prefix string) {
		add(prefix, "items[].path", "items[].mode", "items[].fieldRef.apiVersion", "items[].fieldRef.fieldPath",
			"items[].resourceFieldRef.containerName", "items[].resourceFieldRef.resource", "items[].resourceFieldRef.divisor")
	}
	add("spec.volumes[]", "name", "hostPath.path", "hostPath.type", "emptyDir.medium=Memory", "emptyDir.sizeLimit",
		"configMap.name", "configMap.defaultMode", "secret.secretName", "secret.defaultMode", "downwardAPI.defaultMode",
		"projected.defaultMode", "projected.sources[].configMap.name", "projected.sources[].secret.name")
	keyToPaths("spec.volumes[].configMap")
	keyToPaths("spec.volumes[].secret")
	keyToPaths("spec.volumes[].projected.sources[].configMap")
	keyToPaths("spec.volumes[].projected.sources[].secret")
	downwardFiles("spec.volumes[].downwardAPI")
	downwardFiles("spec.volumes[].projected.sources[].downwardAPI")

	container := func(prefix string) {
		add(prefix, "name", "image", "command", "args", "workingDir", "imagePullPolicy",
			"terminationMessagePath", "terminationMessagePolicy", "stdin", "tty", "stdinOnce",
			"ports[].name", "ports[].hostPort", "ports[].containerPort", "ports[].protocol", "ports[].hostIP",
			"envFrom[].prefix", "envFrom[].configMapRef.name", "envFrom[].configMapRef.optional",
			"envFrom[].secretRef.name", "envFrom[].secretRef.optional",
			"env[].name", "env[].value",
			"env[].valueFrom.fieldRef.apiVersion", "env[].valueFrom.fieldRef.fieldPath",
			"env[].valueFrom.resourceFieldRef.containerName", "env[].valueFrom.resourceFieldRef.resource",
			"env[].valueFrom.resourceFieldRef.divisor",
			"env[].valueFrom.configMapKeyRef.name", "env[].valueFrom.configMapKeyRef.key", "env[].valueFrom.configMapKeyRef.optional",
			"env[].valueFrom.secretKeyRef.name", "env[].valueFrom.secretKeyRef.key", "env[].valueFrom.secretKeyRef.optional",
			"resources.limits.*", "resources.requests.*",
			"volumeMounts[].name", "volumeMounts[].readOnly", "volumeMounts[].mountPath", "volumeMounts[].subPath",
			"volumeMounts[].mountPropagation=None|HostToContainer|Bidirectional",
			"securityContext.capabilities.add", "securityContext.capabilities.drop", "securityContext.privileged",
			"securityContext.runAsUser", "securityContext.runAsGroup", "securityContext.runAsNonRoot=false",
			"securityContext.readOnlyRootFilesystem", "securityContext.allowPrivilegeEscalation",
			"securityContext.seccompProfile.type=RuntimeDefault|Unconfined|Localhost",
			"securityContext.seccompProfile.localhostProfile", "securityContext.procMount=Default")
		httpGet := func(prefix string) {
			add(prefix, "httpGet.path", "httpGet.port", "httpGet.host", "httpGet.scheme",
				"httpGet.httpHeaders[].name", "httpGet.httpHeaders[].value")
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			p := joinPath(prefix, probe)
			add(p, "exec.command", "tcpSocket.port", "tcpSocket.host", "grpc.port", "grpc.service",
				"initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold",
				"terminationGracePeriodSeconds")
			httpGet(p)
		}
		for _, hook := range []string{"lifecycle.postStart", "lifecycle.preStop"} {
			p := joinPath(prefix, hook)
			add(p, "exec.command", "sleep.seconds")
			httpGet(p)
		}
	}
	container("spec.containers[]")
	container("spec.initContainers[]")
	add("spec.initContainers[]", "restartPolicy")
	return fields
}

// fieldTree is supportedPodFields as a tree, to walk beside a document.
type fieldTree struct {
	children map[string]*fieldTree
	// anything: every field below is accepted ("**").
	anything bool
	// values, when set, are the only accepted values of a scalar.
	values []string
}

func newFieldTree(paths []string) *fieldTree {
	root := &fieldTree{}
	for _, p := range paths {
		p, values, restricted := strings.Cut(p, "=")
		n := root
		for _, elem := range strings.Split(strings.ReplaceAll(p, "[]", ".[]"), ".") {
			if elem == "**" {
				n.anything = true
				break
			}
			if n.children == nil {
				n.children = map[string]*fieldTree{}
			}
			if n.children[elem] == nil {
				n.children[elem] = &fieldTree{}
			}
			n = n.children[elem]
		}
		if restricted {
			n.values = strings.Split(values, "|")
		}
	}
	return root
}

// unsupportedFields walks a generic JSON value beside the tree and reports
// the first unsupported field of each subtree.
func unsupportedFields(t *fieldTree, v any, path string, out *[]pathError) {
	if t.anything || isEmptyValue(v) {
		return
	}
	if len(t.children) == 0 && t.values == nil {
		return // a supported leaf: a scalar, or a list or map of scalars (command, limits)
	}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			child := t.children[k]
			if child == nil {
				child = t.children["*"]
			}
			childPath := joinPath(path, k)
			if child == nil {
				if !isEmptyValue(x[k]) {
					*out = append(*out, pathError{path: childPath, message: "not supported yet by podrun, ignored"})
				}
				continue
			}
			unsupportedFields(child, x[k], childPath, out)
		}
	case []any:
		child := t.children["[]"]
		if child == nil {
			*out = append(*out, pathError{path: path, message: "not supported yet by podrun, ignored"})
			return
		}
		for i, item := range x {
			unsupportedFields(child, item, path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		if t.values != nil && !slices.Contains(t.values, fmt.Sprint(x)) {
			*out = append(*out, pathError{path: path, message: fmt.Sprintf("%s is not supported yet by podrun, ignored", describeValue(x))})
		}
	}
}

func isEmptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// describeValue prints a scalar as it reads in a manifest.
func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
