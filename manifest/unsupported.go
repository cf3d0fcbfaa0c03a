package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// Every field of a Pod is one of three kinds to podrun:
//   - implemented: it does on podrun what it does on a kubelet
//     (supportedPodFields);
//   - without effect on one machine: scheduling constraints (nodeSelector,
//     affinity, tolerations, topologySpreadConstraints, schedulingGates,
//     priority), and what the API server itself sets aside on a create
//     (status, metadata other than names, labels and annotations). They are
//     validated as the API server validates them, then accepted quietly
//     (noEffectPodFields);
//   - neither: the pod is refused, with the reason (refusalReason), rather
//     than run as something other than what the manifest says. A field
//     dropped while the pod then fails (a PersistentVolumeClaim, a service
//     account token without an apiserver) helps nobody.
//
// Empty values (null, "", {}, []) are never refused: `nodeSelector: {}` says
// nothing. Some values are refused by what they are rather than where
// (refusedValues): resources podrun cannot enforce (extended resources are
// admitted at run time, with a warning).
// (runAsNonRoot is the runner's to check, as the kubelet's: it needs the
// image's user.)
func supportedPodFields() []string {
	var fields []string
	add := func(prefix string, names ...string) {
		for _, n := range names {
			fields = append(fields, joinPath(prefix, n))
		}
	}
	add("", "apiVersion", "kind")

	add("spec", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy",
		"dnsConfig.nameservers", "dnsConfig.searches", "dnsConfig.options[].name", "dnsConfig.options[].value",
		"nodeName", "hostNetwork", "hostPID", "hostIPC", "hostname", "hostnameOverride", "subdomain",
		// A RuntimeClass of the sources or of --runtime-class (runner).
		"runtimeClassName",
		// The pod's own cgroup (runner).
		"resources.limits.*", "resources.requests.*",
		"securityContext.runAsUser", "securityContext.runAsGroup", "securityContext.runAsNonRoot",
		"securityContext.sysctls[].name", "securityContext.sysctls[].value",
		"securityContext.seccompProfile.type=RuntimeDefault|Unconfined|Localhost",
		"securityContext.seccompProfile.localhostProfile", "securityContext.supplementalGroups",
		"securityContext.fsGroup", "securityContext.fsGroupChangePolicy",
		"securityContext.appArmorProfile.type", "securityContext.appArmorProfile.localhostProfile",
		"hostAliases[].ip", "hostAliases[].hostnames",
		// Secrets of type kubernetes.io/dockerconfigjson or dockercfg found
		// in the same sources.
		"imagePullSecrets[].name",
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
		"projected.defaultMode", "projected.sources[].configMap.name", "projected.sources[].secret.name",
		"image.reference", "image.pullPolicy")
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
			"volumeMounts[].subPathExpr", "resizePolicy[].resourceName", "resizePolicy[].restartPolicy=NotRequired",
			"volumeMounts[].mountPropagation=None|HostToContainer|Bidirectional",
			"securityContext.capabilities.add", "securityContext.capabilities.drop", "securityContext.privileged",
			"securityContext.runAsUser", "securityContext.runAsGroup", "securityContext.runAsNonRoot",
			"securityContext.readOnlyRootFilesystem", "securityContext.allowPrivilegeEscalation",
			"securityContext.seccompProfile.type=RuntimeDefault|Unconfined|Localhost",
			"securityContext.seccompProfile.localhostProfile", "securityContext.procMount=Default",
			"securityContext.appArmorProfile.type", "securityContext.appArmorProfile.localhostProfile")
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
	// Container restart rules (KEP-5307; runner/restartrules.go). The
	// action RestartAllContainers is refused: podrun does not restart a
	// whole pod on one container's exit.
	for _, prefix := range []string{"spec.containers[]", "spec.initContainers[]"} {
		add(prefix, "restartPolicy", "restartPolicyRules[].action=Restart",
			"restartPolicyRules[].exitCodes.operator", "restartPolicyRules[].exitCodes.values")
	}
	return fields
}

// noEffectPodFields are the fields without effect on one machine: accepted
// quietly, once the API server's validation has passed them.
func noEffectPodFields() []string {
	return []string{
		"metadata.**", "status.**",
		"spec.nodeSelector.**", "spec.affinity.**", "spec.tolerations.**", "spec.topologySpreadConstraints.**",
		"spec.schedulingGates.**", "spec.schedulerName", "spec.priority", "spec.priorityClassName",
		"spec.preemptionPolicy", "spec.enableServiceLinks",
	}
}

// refusalReasons say why podrun refuses a field, by the field's path with
// list indexes as []; a field without one of its own takes its nearest
// parent's, or the default.
var refusalReasons = map[string]string{
	"spec.volumes[].persistentVolumeClaim": "a PersistentVolumeClaim needs a cluster to bind and provision it",
	"spec.volumes[].ephemeral":             "an ephemeral volume is a PersistentVolumeClaim that a cluster makes",
	"spec.volumes[].projected.sources[].serviceAccountToken": "a static pod may not use a service account token " +
		"(the kubelet refuses it too): there is no apiserver to issue it",
	"spec.serviceAccountName":                              "a static pod may not name a service account (the kubelet refuses it too)",
	"spec.serviceAccount":                                  "a static pod may not name a service account (the kubelet refuses it too)",
	"spec.automountServiceAccountToken":                    "a static pod has no service account token to mount",
	"spec.containers[].resizePolicy[].restartPolicy":       "podrun resizes a container in place, without a restart",
	"spec.initContainers[].resizePolicy[].restartPolicy":   "podrun resizes a container in place, without a restart",
	"spec.containers[].lifecycle.postStart.tcpSocket":      "the kubelet does not run tcpSocket hooks either",
	"spec.containers[].lifecycle.preStop.tcpSocket":        "the kubelet does not run tcpSocket hooks either",
	"spec.initContainers[].lifecycle.postStart.tcpSocket":  "the kubelet does not run tcpSocket hooks either",
	"spec.initContainers[].lifecycle.preStop.tcpSocket":    "the kubelet does not run tcpSocket hooks either",
	"spec.containers[].restartPolicyRules[].action":        "podrun does not restart all of a pod's containers on one container's exit",
	"spec.initContainers[].restartPolicyRules[].action":    "podrun does not restart all of a pod's containers on one container's exit",
	"spec.ephemeralContainers":                             "ephemeral containers are added to a running pod through the API, not by a manifest",
	"spec.readinessGates":                                  "nothing would set the gates' conditions, so the pod would never be Ready",
	"spec.overhead":                                        "podrun does not account a runtime's overhead (it has no scheduler or pod cgroup to charge it to)",
	"spec.resourceClaims":                                  "dynamic resource allocation needs a cluster's resource drivers",
	"spec.securityContext.seLinuxOptions":                  "podrun does not pass SELinux labels to Docker yet",
	"spec.containers[].securityContext.seLinuxOptions":     "podrun does not pass SELinux labels to Docker yet",
	"spec.initContainers[].securityContext.seLinuxOptions": "podrun does not pass SELinux labels to Docker yet",
	"spec.containers[].securityContext.procMount":          "Unmasked /proc needs a user namespace (hostUsers: false), which podrun does not make",
	"spec.initContainers[].securityContext.procMount":      "Unmasked /proc needs a user namespace (hostUsers: false), which podrun does not make",
	"spec.hostUsers":                                       "podrun does not run pods in user namespaces",
	"spec.shareProcessNamespace":                           "podrun does not share a process namespace between a pod's containers",
	"spec.setHostnameAsFQDN":                               "podrun sets the pod's short hostname",
	"spec.os.name":                                         "podrun runs Linux pods",
}

// refusalReason is why podrun refuses the field at path.
func refusalReason(path string) string {
	key := listIndexes.ReplaceAllString(path, "[]")
	for key != "" {
		if r := refusalReasons[key]; r != "" {
			return r
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return "podrun does not implement it yet"
}

var listIndexes = regexp.MustCompile(`\[\d+\]`)

// podFields is the tree of the fields podrun accepts in a pod, built once.
var podFields = sync.OnceValue(func() *fieldTree {
	return newFieldTree(append(supportedPodFields(), noEffectPodFields()...))
})

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

// unsupportedFields walks a pod, as a generic JSON value, beside the tree
// of the fields podrun accepts and returns the refusal of the first field
// outside it in each subtree.
func unsupportedFields(t *fieldTree, pod map[string]any) []pathError {
	var out []pathError
	walkUnsupported(t, pod, "", &out)
	return out
}

func walkUnsupported(t *fieldTree, v any, path string, out *[]pathError) {
	if t.anything || isEmptyValue(v) {
		return
	}
	if t.supportedLeaf() {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		// The keys in order, in an array on the stack for the small
		// mappings of most pods: this runs for every mapping of every pod.
		var array [16]string
		keys := array[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			child := t.children[k]
			if child == nil {
				child = t.children["*"]
			}
			switch {
			case child == nil:
				if !isEmptyValue(x[k]) {
					childPath := joinPath(path, k)
					*out = append(*out, pathError{path: childPath, message: refused(childPath, "")})
				}
			case child.anything || child.supportedLeaf() || isEmptyValue(x[k]):
				// Nothing to refuse below: no path to build for it.
			default:
				walkUnsupported(child, x[k], joinPath(path, k), out)
			}
		}
	case []any:
		child := t.children["[]"]
		if child == nil {
			*out = append(*out, pathError{path: path, message: refused(path, "")})
			return
		}
		for i, item := range x {
			walkUnsupported(child, item, path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		text, isString := x.(string)
		if !isString {
			text = fmt.Sprint(x)
		}
		if t.values != nil && !slices.Contains(t.values, text) {
			*out = append(*out, pathError{path: path, message: refused(path, describeValue(x))})
		}
	}
}

// supportedLeaf reports whether t accepts any value: a scalar, or a list
// or map of scalars (command, limits).
func (t *fieldTree) supportedLeaf() bool {
	return len(t.children) == 0 && t.values == nil
}

// refused words the refusal of the field at path, or of its value.
func refused(path, value string) string {
	if value != "" {
		return fmt.Sprintf("Unsupported value: %s: podrun does not support this value: %s", value, refusalReason(path))
	}
	return "Forbidden: podrun does not support this field: " + refusalReason(path)
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

// refusedValues are the refusals that depend on values rather than on
// which fields are set.
func refusedValues(pod *v1.Pod) []pathError {
	var out []pathError
	spec := &pod.Spec
	check := func(c *v1.Container, list string, i int) {
		for _, kind := range []string{"limits", "requests"} {
			resources := c.Resources.Limits
			if kind == "requests" {
				resources = c.Resources.Requests
			}
			if len(resources) == 0 {
				continue // the common case, which needs no sorted keys
			}
			for _, name := range slices.Sorted(maps.Keys(resources)) {
				if reason := unenforcedResource(name, kind); reason != "" {
					out = append(out, pathError{path: fmt.Sprintf("spec.%s[%d].resources.%s[%s]", list, i, kind, name),
						message: "Forbidden: podrun does not support this resource: " + reason})
				}
			}
		}
	}
	if r := spec.Resources; r != nil {
		for _, kind := range []string{"limits", "requests"} {
			list := r.Limits
			if kind == "requests" {
				list = r.Requests
			}
			for _, name := range slices.Sorted(maps.Keys(list)) {
				if name != v1.ResourceCPU && name != v1.ResourceMemory {
					out = append(out, pathError{path: fmt.Sprintf("spec.resources.%s[%s]", kind, name),
						message: "Forbidden: podrun's pod cgroup limits cpu and memory only"})
				}
			}
		}
	}
	for i := range spec.InitContainers {
		check(&spec.InitContainers[i], "initContainers", i)
	}
	for i := range spec.Containers {
		check(&spec.Containers[i], "containers", i)
	}
	return out
}

// localStorageNote is what the support table says of local storage
// limits: enforced by eviction, as the kubelet enforces them.
const localStorageNote = "a disk emptyDir's sizeLimit and ephemeral-storage limits are enforced by `watch`'s eviction, " +
	"as the kubelet's (the pod is evicted when over); `once` does not evict"

// unenforcedResource is why podrun cannot honour a container's request or
// limit of the resource name, or "" when it can. Extended resources are
// the sync core's to admit, at run time: what the node has of them is
// known only there (extendedResourceNote).
func unenforcedResource(name v1.ResourceName, kind string) string {
	switch {
	case name == v1.ResourceCPU, name == v1.ResourceMemory:
		return ""
	case name == v1.ResourceEphemeralStorage:
		return "" // enforced by eviction (localStorageNote)
	case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
		return "podrun does not reserve huge pages: Docker's API has no hugetlb limit"
	case v1helper.IsExtendedResourceName(name):
		return ""
	}
	return "podrun has no device plugins to allocate it"
}

// Resources podrun admits at run time.
const (
	resourceNvidiaGPU v1.ResourceName = "nvidia.com/gpu"
	// extendedNote is what the support table says of extended resources.
	extendedNote = "extended resources are admitted at run time: nvidia.com/gpu through Docker's NVIDIA runtime " +
		"(`--gpus`), others when declared with --extended-resource NAME=COUNT; else the pod fails admission (reason OutOfexample.com/dongle, say)"
)

// extendedResourceNotes are the warnings of the pod's extended resources:
// whether it runs depends on the node, which validation does not know.
func extendedResourceNotes(pod *v1.Pod) []pathError {
	var out []pathError
	note := func(c *v1.Container, list string, i int) {
		if len(c.Resources.Limits) == 0 {
			return // the common case, which needs no sorted keys
		}
		for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
			if !v1helper.IsExtendedResourceName(name) {
				continue
			}
			msg := fmt.Sprintf("podrun admits this pod only if the node has %s: declare it with --extended-resource %s=COUNT; "+
				"else the pod fails OutOf%s", name, name, name)
			if name == resourceNvidiaGPU {
				msg = "podrun gives the container GPUs through Docker's NVIDIA runtime (docker run --gpus); " +
					"without that runtime the pod fails OutOfnvidia.com/gpu"
			}
			out = append(out, pathError{path: fmt.Sprintf("spec.%s[%d].resources.limits[%s]", list, i, name), message: msg})
		}
	}
	for i := range pod.Spec.InitContainers {
		note(&pod.Spec.InitContainers[i], "initContainers", i)
	}
	for i := range pod.Spec.Containers {
		note(&pod.Spec.Containers[i], "containers", i)
	}
	return out
}
