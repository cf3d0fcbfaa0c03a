package manifest

import (
	"fmt"
	"path"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	core "k8s.io/kubernetes/pkg/apis/core"
	corev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/node"
	nodeinternalv1 "k8s.io/kubernetes/pkg/apis/node/v1"
	nodevalidation "k8s.io/kubernetes/pkg/apis/node/validation"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/kubernetes/pkg/features"
)

// A pod is valid when kube-apiserver would create it and podrun can run it.
//
// The first half is the API server's own code, not a copy of it: the pod is
// given the API's defaults, converted to the API's internal form, prepared
// as the pod registry prepares a create, and checked by ValidatePodCreate
// with the options the kubelet's file source uses. So podrun accepts no pod
// the API server of the Kubernetes release it is built with (KubernetesVersion)
// rejects, and words each problem as the API server does.
//
// The second half, podrunChecks, is what podrun refuses beyond the API
// server, each message saying why podrun differs (a static pod needs a fixed
// name; Docker needs absolute paths; the uid names a directory). The
// differential test (manifest/paritytest) runs a generated corpus through both
// podrun and a real kube-apiserver and holds podrun to this.

// KubernetesVersion is the Kubernetes release whose Pod API, defaults and
// validation podrun implements.
const KubernetesVersion = "v1.37.2"

// validatePod validates a pod whose namespace is set. nodeName is used to
// check that the static pod name (<name>-<nodeName>) is valid too. It does
// not change pod.
func validatePod(pod *v1.Pod, nodeName string) field.ErrorList {
	errs := append(apiValidatePod(pod), priorityAdmission(&pod.Spec)...)
	reported := make(map[string]bool, len(errs))
	for _, e := range errs {
		reported[e.Field] = true
	}
	// A field the API server already faults needs no second word.
	for _, e := range podrunChecks(pod, nodeName) {
		if !reported[e.Field] {
			errs = append(errs, e)
		}
	}
	return errs
}

// apiValidatePod is kube-apiserver's validation of a pod create.
func apiValidatePod(pod *v1.Pod) field.ErrorList {
	// Privileged containers pass validation, as on the kubelet, which
	// allows them; whether podrun runs them is --allow-privileged's to say.
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})
	defaulted := pod.DeepCopy()
	corev1.SetObjectDefaults_Pod(defaulted)
	// As the API server's create: the field manager replaces managedFields,
	// and a name is generated from generateName before validation.
	defaulted.ManagedFields = nil
	if defaulted.Name == "" && defaulted.GenerateName != "" {
		defaulted.Name = generatedName(defaulted.GenerateName)
	}
	var internal core.Pod
	if err := corev1.Convert_v1_Pod_To_core_Pod(defaulted, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("convert the pod to the API's internal form: %w", err))}
	}
	// As the pod registry's PrepareForCreate: fields of disabled features
	// are dropped, pod-level resources defaulted from the containers'.
	podutil.DropDisabledPodFields(&internal, nil)
	mergeLabelKeys(&internal)
	podutil.DefaultPodLevelResources(&internal)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	opts.ResourceIsPod = true
	return corevalidation.ValidatePodCreate(&internal, opts)
}

// mergeLabelKeys does what the pod registry's PrepareForCreate does with
// the matchLabelKeys (and mismatchLabelKeys) of pod affinity terms and
// topology spread constraints: each key the pod has as a label becomes a
// requirement of the term's labelSelector. Validation then finds a key
// given both ways.
func mergeLabelKeys(pod *core.Pod) {
	add := func(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator) {
		for _, key := range keys {
			if value, ok := pod.Labels[key]; ok {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: []string{value}})
			}
		}
	}
	term := func(t *core.PodAffinityTerm) {
		if t.LabelSelector != nil {
			add(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn)
			add(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
		}
	}
	gates := utilfeature.DefaultFeatureGate
	if a := pod.Spec.Affinity; a != nil && gates.Enabled(features.MatchLabelKeysInPodAffinity) {
		// Affinity and anti-affinity terms have the same fields.
		for _, affinity := range []*core.PodAffinity{a.PodAffinity, (*core.PodAffinity)(a.PodAntiAffinity)} {
			if affinity == nil {
				continue
			}
			for i := range affinity.RequiredDuringSchedulingIgnoredDuringExecution {
				term(&affinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
			for i := range affinity.PreferredDuringSchedulingIgnoredDuringExecution {
				term(&affinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
		}
	}
	if gates.Enabled(features.MatchLabelKeysInPodTopologySpread) && gates.Enabled(features.MatchLabelKeysInPodTopologySpreadSelectorMerge) {
		for i := range pod.Spec.TopologySpreadConstraints {
			if c := &pod.Spec.TopologySpreadConstraints[i]; c.LabelSelector != nil {
				add(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn)
			}
		}
	}
}

// generatedName is a name as the API server generates one from
// generateName: the prefix, cut to leave room, and five characters.
func generatedName(prefix string) string {
	const suffix, maxPrefix = "xxxxx", validation.DNS1123SubdomainMaxLength - 5
	return prefix[:min(len(prefix), maxPrefix)] + suffix
}

// systemPriorityClasses are the PriorityClasses every cluster has, with
// their values.
var systemPriorityClasses = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// priorityAdmission is kube-apiserver's Priority admission of a create for
// the classes podrun knows: a priority or preemptionPolicy given must be
// the class's. Other class names are the cluster's to know; podrun accepts
// them (a mirror pod of one is refused by the API server if it lacks it).
func priorityAdmission(spec *v1.PodSpec) field.ErrorList {
	var want int32
	known := spec.PriorityClassName == ""
	if v, ok := systemPriorityClasses[spec.PriorityClassName]; ok {
		want, known = v, true
	}
	if !known {
		return nil
	}
	var errs field.ErrorList
	fld := field.NewPath("spec")
	if spec.Priority != nil && *spec.Priority != want {
		errs = append(errs, field.Forbidden(fld.Child("priority"), fmt.Sprintf(
			"must not differ from the priority of its class (%d), as kube-apiserver's Priority admission requires", want)))
	}
	if p := spec.PreemptionPolicy; p != nil && *p != v1.PreemptLowerPriority {
		errs = append(errs, field.Forbidden(fld.Child("preemptionPolicy"), fmt.Sprintf(
			"must not differ from the policy of its class (%s), as kube-apiserver's Priority admission requires", v1.PreemptLowerPriority)))
	}
	return errs
}

// podrunChecks are what podrun refuses that the API server accepts. Each
// message starts with "podrun" and says why.
func podrunChecks(pod *v1.Pod, nodeName string) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" && pod.GenerateName != "" {
		errs = append(errs, field.Forbidden(meta.Child("generateName"),
			"podrun runs static pods, which need a fixed name: set metadata.name instead"))
	}
	if uid := string(pod.UID); uid != "" && !isSafeName(uid) {
		errs = append(errs, field.Invalid(meta.Child("uid"), uid, fmt.Sprintf(
			"podrun: must be a safe name such as a UUID (1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit, without '..'): "+
				"it names the pod's directory under the root dir", maxUIDLength)))
	}
	if pod.Name != "" && len(validation.IsDNS1123Subdomain(pod.Name)) == 0 {
		full := staticPodName(pod.Name, nodeName)
		for _, msg := range validation.IsDNS1123Subdomain(full) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name,
				fmt.Sprintf("podrun (as the kubelet) names a static pod <name>-<node>, and %q is invalid: %s", full, msg)))
		}
	}

	spec := field.NewPath("spec")
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && sc.SeccompProfile.LocalhostProfile != nil {
		errs = append(errs, dockerPath(spec.Child("securityContext", "seccompProfile", "localhostProfile"), *sc.SeccompProfile.LocalhostProfile, false)...)
	}
	for i := range pod.Spec.Volumes {
		errs = append(errs, podrunVolumeChecks(&pod.Spec.Volumes[i], spec.Child("volumes").Index(i))...)
	}
	for i := range pod.Spec.InitContainers {
		errs = append(errs, podrunContainerChecks(&pod.Spec.InitContainers[i], spec.Child("initContainers").Index(i))...)
	}
	for i := range pod.Spec.Containers {
		errs = append(errs, podrunContainerChecks(&pod.Spec.Containers[i], spec.Child("containers").Index(i))...)
	}
	return errs
}

func podrunVolumeChecks(vol *v1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	keyToPaths := func(items []v1.KeyToPath, p *field.Path) {
		for i, it := range items {
			errs = append(errs, volumeFilePath(p.Index(i).Child("path"), it.Path)...)
		}
	}
	downwardFiles := func(items []v1.DownwardAPIVolumeFile, p *field.Path) {
		for i, it := range items {
			errs = append(errs, volumeFilePath(p.Index(i).Child("path"), it.Path)...)
		}
	}
	switch src := vol.VolumeSource; {
	case src.HostPath != nil:
		errs = append(errs, dockerPath(fld.Child("hostPath", "path"), src.HostPath.Path, true)...)
	case src.ConfigMap != nil:
		keyToPaths(src.ConfigMap.Items, fld.Child("configMap", "items"))
	case src.Secret != nil:
		keyToPaths(src.Secret.Items, fld.Child("secret", "items"))
	case src.DownwardAPI != nil:
		downwardFiles(src.DownwardAPI.Items, fld.Child("downwardAPI", "items"))
	case src.Projected != nil:
		for i, s := range src.Projected.Sources {
			p := fld.Child("projected", "sources").Index(i)
			if s.ConfigMap != nil {
				keyToPaths(s.ConfigMap.Items, p.Child("configMap", "items"))
			}
			if s.Secret != nil {
				keyToPaths(s.Secret.Items, p.Child("secret", "items"))
			}
			if s.DownwardAPI != nil {
				downwardFiles(s.DownwardAPI.Items, p.Child("downwardAPI", "items"))
			}
			if s.ServiceAccountToken != nil {
				errs = append(errs, volumeFilePath(p.Child("serviceAccountToken", "path"), s.ServiceAccountToken.Path)...)
			}
		}
	}
	return errs
}

// volumeFilePath checks the path of a file podrun writes into a configMap,
// secret, downwardAPI or projected volume, beyond the API's checks (relative,
// no ".." element, not starting with ".."), which a path such as "./..data"
// or "." passes.
func volumeFilePath(fld *field.Path, p string) field.ErrorList {
	if errs := dockerPath(fld, p, false); len(errs) > 0 {
		return errs
	}
	switch clean := path.Clean(p); {
	case p == "" || path.IsAbs(p):
		return nil // reported by the API's checks
	case clean == ".":
		return field.ErrorList{field.Invalid(fld, p, "podrun: must name a file in the volume, not the volume itself")}
	case strings.HasPrefix(clean, ".."):
		return field.ErrorList{field.Invalid(fld, p,
			"podrun: must not start with '..' once cleaned: podrun keeps the volume's own ..data and ..<timestamp> entries there")}
	}
	return nil
}

func podrunContainerChecks(c *v1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.WorkingDir != "" {
		errs = append(errs, dockerPath(fld.Child("workingDir"), c.WorkingDir, true)...)
	}
	if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil && sc.SeccompProfile.LocalhostProfile != nil {
		errs = append(errs, dockerPath(fld.Child("securityContext", "seccompProfile", "localhostProfile"), *sc.SeccompProfile.LocalhostProfile, false)...)
	}
	if c.TerminationMessagePath != "" {
		errs = append(errs, dockerPath(fld.Child("terminationMessagePath"), c.TerminationMessagePath, true)...)
	}
	mountPaths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		p := fld.Child("volumeMounts").Index(i)
		if m.MountPath != "" {
			errs = append(errs, dockerPath(p.Child("mountPath"), m.MountPath, true)...)
			clean := path.Clean(m.MountPath)
			if mountPaths[clean] && m.MountPath != clean {
				// The API compares mount paths as written; Docker compares
				// them cleaned.
				errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath,
					"podrun: Docker refuses two mounts at one path, and this is the same path as another mount's"))
			}
			mountPaths[clean] = true
		}
		errs = append(errs, dockerPath(p.Child("subPath"), m.SubPath, false)...)
		errs = append(errs, dockerPath(p.Child("subPathExpr"), m.SubPathExpr, false)...)
	}
	for _, probe := range []struct {
		name string
		p    *v1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if probe.p == nil {
			continue
		}
		if h := probe.p.HTTPGet; h != nil {
			errs = append(errs, namedPort(fld.Child(probe.name, "httpGet", "port"), h.Port, c)...)
		}
		if t := probe.p.TCPSocket; t != nil {
			errs = append(errs, namedPort(fld.Child(probe.name, "tcpSocket", "port"), t.Port, c)...)
		}
	}
	return errs
}

// dockerPath checks a path podrun hands to Docker and the kernel: no NUL
// byte (the API allows one; no system call does), and absolute where Docker
// needs it to be.
func dockerPath(fld *field.Path, p string, absolute bool) field.ErrorList {
	switch {
	case strings.ContainsRune(p, 0):
		return field.ErrorList{field.Invalid(fld, p, "podrun: must not contain a NUL byte, which no path passed to the kernel can hold")}
	case absolute && p != "" && !path.IsAbs(p):
		return field.ErrorList{field.Invalid(fld, p, "podrun: Docker needs an absolute path here")}
	}
	return nil
}

// namedPort checks that a probe's port given by name is one of the
// container's ports. The API accepts any well-formed name; the kubelet then
// fails the probe on every run, restarting a container over a typo.
func namedPort(fld *field.Path, port intstr.IntOrString, c *v1.Container) field.ErrorList {
	if port.Type != intstr.String || len(validation.IsValidPortName(port.StrVal)) > 0 {
		return nil // a number, or a malformed name the API reports
	}
	if slices.ContainsFunc(c.Ports, func(p v1.ContainerPort) bool { return p.Name == port.StrVal }) {
		return nil
	}
	return field.ErrorList{field.Invalid(fld, port.StrVal, fmt.Sprintf(
		"podrun: container %q has no port named %q, so the probe could never succeed (the kubelet would restart the container forever): name one of its ports, or give a number",
		c.Name, port.StrVal))}
}

// maxUIDLength bounds a metadata.uid: a UUID is 36 characters, a hex
// SHA-256 64.
const maxUIDLength = 128

// isSafeName reports whether s is 1 to maxUIDLength characters of
// [A-Za-z0-9._-], starts with a letter or digit and does not contain "..":
// a name that is one path element and means no other directory.
func isSafeName(s string) bool {
	if s == "" || len(s) > maxUIDLength || strings.Contains(s, "..") {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// validateConfigMap is the API server's validation of a ConfigMap create.
func validateConfigMap(cm *v1.ConfigMap) field.ErrorList {
	var internal core.ConfigMap
	if err := corev1.Convert_v1_ConfigMap_To_core_ConfigMap(cm, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return corevalidation.ValidateConfigMap(&internal)
}

// validateSecret is the API server's validation of a Secret create. The
// conversion merges stringData into data, as the API server does.
func validateSecret(s *v1.Secret) field.ErrorList {
	defaulted := s.DeepCopy()
	if defaulted.Namespace == "" {
		defaulted.Namespace = metav1.NamespaceDefault
	}
	corev1.SetObjectDefaults_Secret(defaulted)
	var internal core.Secret
	if err := corev1.Convert_v1_Secret_To_core_Secret(defaulted, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	errs := corevalidation.ValidateSecret(&internal)
	// The API reports a bad stringData key as data[key], after the merge:
	// name the field the key is written in.
	for _, e := range errs {
		if key, ok := strings.CutPrefix(e.Field, "data["); ok {
			key = strings.TrimSuffix(key, "]")
			if _, inData := s.Data[key]; !inData {
				if _, inString := s.StringData[key]; inString {
					e.Field = "stringData[" + key + "]"
				}
			}
		}
	}
	return errs
}

// validateRuntimeClass is the API server's validation of a RuntimeClass
// create: a DNS subdomain name, a handler that is a DNS label (so Docker
// runtimes with dots in their names, such as io.containerd.runc.v2, can be
// named by --runtime-class alone), valid overhead and scheduling.
func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var internal node.RuntimeClass
	if err := nodeinternalv1.Convert_v1_RuntimeClass_To_node_RuntimeClass(rc, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return nodevalidation.ValidateRuntimeClass(&internal)
}
