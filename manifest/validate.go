package manifest

import (
	"fmt"
	"maps"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation covers what a user can get wrong in a static pod and what
// podrun relies on, following the API server's ValidatePod
// (k8s.io/kubernetes/pkg/apis/core/validation) in what it checks and how it
// words it, with apimachinery's helpers. It runs on the defaulted pod, before
// the static identity is applied (so that the name checked is the one the
// user wrote), and reports every problem with its field path.

// validatePod validates a defaulted pod whose namespace is set. nodeName is
// used to check that the static pod name (<name>-<nodeName>) is valid too.
func validatePod(pod *v1.Pod, nodeName string) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" && pod.GenerateName != "" {
		errs = append(errs, field.Forbidden(meta.Child("generateName"),
			"a static pod needs a fixed name: set metadata.name instead"))
	}
	errs = append(errs, validateObjectMeta(&pod.ObjectMeta)...)
	errs = append(errs, validateUID(meta.Child("uid"), string(pod.UID))...)
	if pod.Name != "" && len(validation.IsDNS1123Subdomain(pod.Name)) == 0 {
		full := staticPodName(pod.Name, nodeName)
		for _, msg := range validation.IsDNS1123Subdomain(full) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name,
				fmt.Sprintf("the static pod name %q (name-node) is invalid: %s", full, msg)))
		}
	}
	return append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validatePodSpec(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes, volErrs := validateVolumes(spec, fld.Child("volumes"))
	errs = append(errs, volErrs...)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), "a pod needs at least one container"))
	}
	errs = append(errs, validateContainerNames(spec, fld)...)
	names := containerNames(spec)
	for i := range spec.InitContainers {
		errs = append(errs, validateContainer(&spec.InitContainers[i], fld.Child("initContainers").Index(i), volumes, names, true)...)
	}
	for i := range spec.Containers {
		errs = append(errs, validateContainer(&spec.Containers[i], fld.Child("containers").Index(i), volumes, names, false)...)
	}
	errs = append(errs, validateHostPorts(spec, fld)...)

	errs = append(errs, oneOf(fld.Child("restartPolicy"), string(spec.RestartPolicy),
		string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever))...)
	errs = append(errs, validateDNS(spec, fld)...)
	if spec.TerminationGracePeriodSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.TerminationGracePeriodSeconds, fld.Child("terminationGracePeriodSeconds"))...)
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(fld.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if spec.Hostname != "" {
		errs = append(errs, dnsLabel(fld.Child("hostname"), spec.Hostname)...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dnsLabel(fld.Child("subdomain"), spec.Subdomain)...)
	}
	return append(errs, validatePodSecurityContext(spec.SecurityContext, fld.Child("securityContext"))...)
}

// validateObjectMeta validates metadata as the API server does, except that
// labels and annotations are checked one by one, so that each error names
// its key (metadata.labels[app]) and so its line.
func validateObjectMeta(meta *metav1.ObjectMeta) field.ErrorList {
	fld := field.NewPath("metadata")
	bare := *meta
	bare.Labels, bare.Annotations = nil, nil
	errs := apivalidation.ValidateObjectMeta(&bare, true, apivalidation.NameIsDNSSubdomain, fld)
	for _, k := range slices.Sorted(maps.Keys(meta.Labels)) {
		errs = append(errs, metavalidation.ValidateLabels(map[string]string{k: meta.Labels[k]}, fld.Child("labels").Key(k))...)
	}
	for _, k := range slices.Sorted(maps.Keys(meta.Annotations)) {
		errs = append(errs, apivalidation.ValidateAnnotations(map[string]string{k: meta.Annotations[k]}, fld.Child("annotations").Key(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(meta.Annotations); err != nil {
		errs = append(errs, field.TooLong(fld.Child("annotations"), "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// validateContainerNames checks that container names are unique across init
// and app containers: podrun's Docker names and labels are keyed by them.
func validateContainerNames(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	check := func(name string, p *field.Path) {
		if name == "" {
			return // reported by validateContainer
		}
		if seen.Has(name) {
			errs = append(errs, field.Duplicate(p, name))
		}
		seen.Insert(name)
	}
	for i, c := range spec.InitContainers {
		check(c.Name, fld.Child("initContainers").Index(i).Child("name"))
	}
	for i, c := range spec.Containers {
		check(c.Name, fld.Child("containers").Index(i).Child("name"))
	}
	for i, c := range spec.EphemeralContainers {
		check(c.Name, fld.Child("ephemeralContainers").Index(i).Child("name"))
	}
	return errs
}

func containerNames(spec *v1.PodSpec) sets.Set[string] {
	names := sets.New[string]()
	for _, c := range spec.InitContainers {
		names.Insert(c.Name)
	}
	for _, c := range spec.Containers {
		names.Insert(c.Name)
	}
	return names
}

// validateHostPorts checks that no two containers claim the same host port,
// and that with the host's network a port is the same on both sides.
func validateHostPorts(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	check := func(containers []v1.Container, p *field.Path) {
		for i := range containers {
			for j, port := range containers[i].Ports {
				pp := p.Index(i).Child("ports").Index(j)
				if spec.HostNetwork && port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort,
						"must match containerPort when hostNetwork is true"))
				}
				if port.HostPort == 0 {
					continue
				}
				key := fmt.Sprintf("%s/%s/%d", port.HostIP, port.Protocol, port.HostPort)
				if seen.Has(key) {
					errs = append(errs, field.Duplicate(pp.Child("hostPort"), fmt.Sprintf("%d/%s", port.HostPort, port.Protocol)))
				}
				seen.Insert(key)
			}
		}
	}
	check(spec.InitContainers, fld.Child("initContainers"))
	check(spec.Containers, fld.Child("containers"))
	return errs
}

func validateDNS(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	errs := oneOf(fld.Child("dnsPolicy"), string(spec.DNSPolicy),
		string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone))
	cfg := spec.DNSConfig
	if spec.DNSPolicy == v1.DNSNone && (cfg == nil || len(cfg.Nameservers) == 0) {
		errs = append(errs, field.Required(fld.Child("dnsConfig", "nameservers"),
			"at least one nameserver is needed when dnsPolicy is None"))
	}
	if cfg == nil {
		return errs
	}
	p := fld.Child("dnsConfig")
	if len(cfg.Nameservers) > 3 {
		errs = append(errs, field.TooMany(p.Child("nameservers"), len(cfg.Nameservers), 3))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(p.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > 32 {
		errs = append(errs, field.TooMany(p.Child("searches"), len(cfg.Searches), 32))
	}
	for i, s := range cfg.Searches {
		for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(p.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(p.Child("options").Index(i).Child("name"), ""))
		}
	}
	return errs
}

func validatePodSecurityContext(sc *v1.PodSecurityContext, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)...)
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(fld.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(fld.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	errs = append(errs, validateSysctls(sc.Sysctls, fld.Child("sysctls"))...)
	return append(errs, validateSeccomp(sc.SeccompProfile, fld.Child("seccompProfile"))...)
}

func validateIDs(user, group *int64, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(fld.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(fld.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

// sysctlPattern is the API's form of a sysctl name (dots or slashes between
// segments).
const sysctlPattern = `^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`

func validateSysctls(sysctls []v1.Sysctl, fld *field.Path) field.ErrorList {
	if len(sysctls) == 0 {
		return nil
	}
	var errs field.ErrorList
	valid := regexp.MustCompile(sysctlPattern)
	seen := sets.New[string]()
	for i, s := range sysctls {
		p := fld.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p, ""))
		case len(s.Name) > 253 || !valid.MatchString(s.Name):
			errs = append(errs, field.Invalid(p, s.Name, "must be a sysctl name such as net.ipv4.ip_forward"))
		case seen.Has(s.Name):
			errs = append(errs, field.Duplicate(p, s.Name))
		}
		seen.Insert(s.Name)
	}
	return errs
}

func validateSeccomp(p *v1.SeccompProfile, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := oneOf(fld.Child("type"), string(p.Type),
		string(v1.SeccompProfileTypeRuntimeDefault), string(v1.SeccompProfileTypeUnconfined), string(v1.SeccompProfileTypeLocalhost))
	switch {
	case p.Type == v1.SeccompProfileTypeLocalhost && (p.LocalhostProfile == nil || *p.LocalhostProfile == ""):
		errs = append(errs, field.Required(fld.Child("localhostProfile"), "needed when type is Localhost"))
	case p.Type != v1.SeccompProfileTypeLocalhost && p.LocalhostProfile != nil:
		errs = append(errs, field.Forbidden(fld.Child("localhostProfile"), "only allowed when type is Localhost"))
	case p.Type == v1.SeccompProfileTypeLocalhost:
		// The profile is read from <root-dir>/seccomp/<localhostProfile>.
		errs = append(errs, relativePath(fld.Child("localhostProfile"), *p.LocalhostProfile)...)
	}
	return errs
}

// validateVolumes checks the pod's volumes and returns the set of their
// names, for the volume mounts to refer to.
func validateVolumes(spec *v1.PodSpec, fld *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	containers := containerNames(spec)
	for i := range spec.Volumes {
		vol := &spec.Volumes[i]
		p := fld.Index(i)
		switch {
		case vol.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names.Has(vol.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), vol.Name))
		default:
			errs = append(errs, dnsLabel(p.Child("name"), vol.Name)...)
		}
		names.Insert(vol.Name)
		errs = append(errs, validateVolumeSource(&vol.VolumeSource, p, containers)...)
	}
	return names, errs
}

// volumeSourceNames lists the JSON names of the sources set in src.
func volumeSourceNames(src *v1.VolumeSource) []string {
	var set []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

func validateVolumeSource(src *v1.VolumeSource, fld *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if set := volumeSourceNames(src); len(set) > 1 {
		errs = append(errs, field.Forbidden(fld, fmt.Sprintf(
			"a volume has exactly one source, this one has %d (%s)", len(set), strings.Join(set, ", "))))
		return errs
	}
	if hp := src.HostPath; hp != nil {
		p := fld.Child("hostPath")
		errs = append(errs, absolutePath(p.Child("path"), hp.Path)...)
		if hp.Type != nil {
			errs = append(errs, oneOf(p.Child("type"), string(*hp.Type), "",
				string(v1.HostPathDirectoryOrCreate), string(v1.HostPathDirectory), string(v1.HostPathFileOrCreate),
				string(v1.HostPathFile), string(v1.HostPathSocket), string(v1.HostPathCharDev), string(v1.HostPathBlockDev))...)
		}
	}
	if ed := src.EmptyDir; ed != nil {
		p := fld.Child("emptyDir")
		if m := string(ed.Medium); m != "" && m != string(v1.StorageMediumMemory) && !strings.HasPrefix(m, string(v1.StorageMediumHugePages)) {
			errs = append(errs, field.NotSupported(p.Child("medium"), m, []string{"", string(v1.StorageMediumMemory)}))
		}
		if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("sizeLimit"), ed.SizeLimit.String(), "must not be negative"))
		}
	}
	if cm := src.ConfigMap; cm != nil {
		p := fld.Child("configMap")
		errs = append(errs, objectName(p.Child("name"), cm.Name)...)
		errs = append(errs, validateKeyToPaths(cm.Items, p.Child("items"))...)
		errs = append(errs, fileMode(p.Child("defaultMode"), cm.DefaultMode)...)
	}
	if s := src.Secret; s != nil {
		p := fld.Child("secret")
		errs = append(errs, objectName(p.Child("secretName"), s.SecretName)...)
		errs = append(errs, validateKeyToPaths(s.Items, p.Child("items"))...)
		errs = append(errs, fileMode(p.Child("defaultMode"), s.DefaultMode)...)
	}
	if d := src.DownwardAPI; d != nil {
		p := fld.Child("downwardAPI")
		errs = append(errs, validateDownwardAPIFiles(d.Items, p.Child("items"), containers)...)
		errs = append(errs, fileMode(p.Child("defaultMode"), d.DefaultMode)...)
	}
	if pr := src.Projected; pr != nil {
		errs = append(errs, validateProjected(pr, fld.Child("projected"), containers)...)
	}
	return errs
}

func validateProjected(pr *v1.ProjectedVolumeSource, fld *field.Path, containers sets.Set[string]) field.ErrorList {
	errs := fileMode(fld.Child("defaultMode"), pr.DefaultMode)
	for i, s := range pr.Sources {
		p := fld.Child("sources").Index(i)
		n := 0
		if s.ConfigMap != nil {
			n++
			errs = append(errs, objectName(p.Child("configMap", "name"), s.ConfigMap.Name)...)
			errs = append(errs, validateKeyToPaths(s.ConfigMap.Items, p.Child("configMap", "items"))...)
		}
		if s.Secret != nil {
			n++
			errs = append(errs, objectName(p.Child("secret", "name"), s.Secret.Name)...)
			errs = append(errs, validateKeyToPaths(s.Secret.Items, p.Child("secret", "items"))...)
		}
		if s.DownwardAPI != nil {
			n++
			errs = append(errs, validateDownwardAPIFiles(s.DownwardAPI.Items, p.Child("downwardAPI", "items"), containers)...)
		}
		if s.ServiceAccountToken != nil {
			n++
		}
		if s.ClusterTrustBundle != nil {
			n++
		}
		if s.PodCertificate != nil {
			n++
		}
		if n != 1 {
			errs = append(errs, field.Invalid(p, fmt.Sprintf("%d sources", n), "each projection has exactly one source"))
		}
	}
	return errs
}

func validateKeyToPaths(items []v1.KeyToPath, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		p := fld.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		} else {
			for _, msg := range validation.IsConfigMapKey(it.Key) {
				errs = append(errs, field.Invalid(p.Child("key"), it.Key, msg))
			}
		}
		errs = append(errs, itemPath(p.Child("path"), it.Path)...)
		errs = append(errs, fileMode(p.Child("mode"), it.Mode)...)
	}
	return errs
}

// volumeFieldPaths are the pod fields a downwardAPI volume file may hold.
func volumeFieldPaths() []string {
	return []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"}
}

func validateDownwardAPIFiles(items []v1.DownwardAPIVolumeFile, fld *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		p := fld.Index(i)
		errs = append(errs, itemPath(p.Child("path"), it.Path)...)
		errs = append(errs, fileMode(p.Child("mode"), it.Mode)...)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(p, "fieldRef and resourceFieldRef", "give one of fieldRef and resourceFieldRef"))
		case it.FieldRef != nil:
			errs = append(errs, validateFieldRef(it.FieldRef, p.Child("fieldRef"), volumeFieldPaths())...)
		case it.ResourceFieldRef != nil:
			if it.ResourceFieldRef.ContainerName == "" {
				errs = append(errs, field.Required(p.Child("resourceFieldRef", "containerName"), "needed in a volume"))
			}
			errs = append(errs, validateResourceFieldRef(it.ResourceFieldRef, p.Child("resourceFieldRef"), containers)...)
		default:
			errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef"))
		}
	}
	return errs
}

// envFieldPaths are the pod fields an environment variable may hold; the
// labels and annotations only by key (metadata.labels['app']).
func envFieldPaths() []string {
	return []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}
}

func validateFieldRef(ref *v1.ObjectFieldSelector, fld *field.Path, allowed []string) field.ErrorList {
	var errs field.ErrorList
	if ref.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(fld.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
	}
	p := fld.Child("fieldPath")
	if ref.FieldPath == "" {
		return append(errs, field.Required(p, ""))
	}
	if slices.Contains(allowed, ref.FieldPath) {
		return errs
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		if rest, ok := strings.CutPrefix(ref.FieldPath, prefix+"['"); ok {
			key, closed := strings.CutSuffix(rest, "']")
			if !closed || key == "" {
				break
			}
			return errs
		}
	}
	return append(errs, field.NotSupported(p, ref.FieldPath, append(slices.Clone(allowed),
		"metadata.labels['<KEY>']", "metadata.annotations['<KEY>']")))
}

// resourceFieldRefs are the container resources a resourceFieldRef may name.
func resourceFieldRefs() []string {
	return []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage"}
}

func validateResourceFieldRef(ref *v1.ResourceFieldSelector, fld *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if ref.ContainerName != "" && !containers.Has(ref.ContainerName) {
		errs = append(errs, field.NotFound(fld.Child("containerName"), ref.ContainerName))
	}
	p := fld.Child("resource")
	hugePages := strings.HasPrefix(ref.Resource, "limits.hugepages-") || strings.HasPrefix(ref.Resource, "requests.hugepages-")
	switch {
	case ref.Resource == "":
		errs = append(errs, field.Required(p, ""))
	case !hugePages && !slices.Contains(resourceFieldRefs(), ref.Resource):
		errs = append(errs, field.NotSupported(p, ref.Resource, resourceFieldRefs()))
	}
	if !ref.Divisor.IsZero() && ref.Divisor.Sign() < 0 {
		errs = append(errs, field.Invalid(fld.Child("divisor"), ref.Divisor.String(), "must not be negative"))
	}
	return errs
}

// fileMode checks a file mode given in a volume: permission bits only.
func fileMode(fld *field.Path, mode *int32) field.ErrorList {
	if mode == nil || (*mode >= 0 && *mode <= 0o777) {
		return nil
	}
	return field.ErrorList{field.Invalid(fld, *mode, "must be a file mode between 0 and 0777 (octal) or 511 (decimal)")}
}

// absolutePath checks a host or container path: absolute, and without ".."
// so that it cannot be made to point elsewhere.
func absolutePath(fld *field.Path, p string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fld, "")}
	case strings.ContainsRune(p, 0):
		return field.ErrorList{field.Invalid(fld, p, "must not contain a NUL byte")}
	case !path.IsAbs(p):
		return field.ErrorList{field.Invalid(fld, p, "must be an absolute path")}
	case slices.Contains(strings.Split(p, "/"), ".."):
		return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
	}
	return nil
}

// relativePath checks a path below a directory podrun makes (a subPath in a
// volume, a seccomp profile under the root dir): relative and staying
// inside, as the API server's validateLocalDescendingPath. Empty elements
// ("a//b") and "." are harmless.
func relativePath(fld *field.Path, p string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fld, "")}
	case strings.ContainsRune(p, 0):
		return field.ErrorList{field.Invalid(fld, p, "must not contain a NUL byte")}
	case path.IsAbs(p):
		return field.ErrorList{field.Invalid(fld, p, "must be a relative path")}
	case slices.Contains(strings.Split(p, "/"), ".."), leavesDir(p):
		return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
	}
	return nil
}

// leavesDir reports whether the relative path p, once cleaned, starts
// above the directory it is relative to. (A path without ".." elements never
// does; this is the last word should relativePath's checks ever change.)
func leavesDir(p string) bool {
	clean := path.Clean(p)
	return clean == ".." || strings.HasPrefix(clean, "../")
}

// itemPath checks the path of a file in a configMap, secret, downwardAPI or
// projected volume: a relative path as relativePath, that names a file
// rather than the volume itself, and, as the API server's
// validateLocalNonReservedPath, that does not start with ".." (the kubelet
// keeps its own "..data" and "..<timestamp>" entries there).
func itemPath(fld *field.Path, p string) field.ErrorList {
	if errs := relativePath(fld, p); len(errs) > 0 {
		return errs
	}
	switch clean := path.Clean(p); {
	case strings.HasPrefix(p, "..") || strings.HasPrefix(clean, ".."):
		return field.ErrorList{field.Invalid(fld, p, "must not start with '..'")}
	case clean == ".":
		return field.ErrorList{field.Invalid(fld, p, "must name a file in the volume, not the volume itself")}
	}
	return nil
}

// maxUIDLength bounds a metadata.uid: a UUID is 36 characters, a hex
// SHA-256 64.
const maxUIDLength = 128

// validateUID checks a metadata.uid given in a manifest (podrun makes one
// when it is not). It names the pod's directory, <root-dir>/pods/<uid>, which
// podrun creates and, on down, removes: it must be a single safe path
// element. The kubelet's own UIDs are UUIDs or hex hashes.
func validateUID(fld *field.Path, uid string) field.ErrorList {
	if uid == "" || isSafeName(uid) {
		return nil
	}
	return field.ErrorList{field.Invalid(fld, uid, fmt.Sprintf(
		"must be a safe name such as a UUID (1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit, without '..'): "+
			"it names the pod's directory under the root dir", maxUIDLength))}
}

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

// objectName checks a reference to a ConfigMap or Secret by name.
func objectName(fld *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

func dnsLabel(fld *field.Path, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fld, value, msg))
	}
	return errs
}

// oneOf checks that value is one of allowed.
func oneOf(fld *field.Path, value string, allowed ...string) field.ErrorList {
	if slices.Contains(allowed, value) {
		return nil
	}
	shown := slices.DeleteFunc(slices.Clone(allowed), func(s string) bool { return s == "" })
	return field.ErrorList{field.NotSupported(fld, value, shown)}
}
