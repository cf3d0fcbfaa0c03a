package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/expansion"
	"github.com/podrun/podrun/manifest"
)

// configError is a container that cannot be configured (a missing ConfigMap
// key, a refused privilege): the kubelet's CreateContainerConfigError.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// podEnv is what env resolution needs to know of the pod's surroundings.
type podEnv struct {
	PodIP  string
	HostIP string
	// Node capacity, for resourceFieldRef of a resource without a limit.
	NodeMilliCPU int64
	NodeMemory   int64
	// ServiceEnv is the service links of the pod's containers
	// (serviceenv.go); ServiceErr why they cannot be made yet.
	ServiceEnv map[string]string
	ServiceErr error
	// Token gets the token of a projected volume's serviceAccountToken
	// source (cluster mode); nil: podrun has none to give.
	Token func(*v1.ServiceAccountTokenProjection) (string, error)
	// HostsFile is the real path of the pod's /etc/hosts (etchosts.go);
	// "": none yet, the containers get none.
	HostsFile string
}

// makeEnv resolves a container's envFrom and env, in the kubelet's order:
// envFrom first, then env, each value expanded with the variables before it.
// The environment is taken from budget, which command and args share, and
// lookup finds its variables for their expansion.
func makeEnv(pod *v1.Pod, c *v1.Container, objs *Objects, pe podEnv, budget *expansion.Budget) (env []engine.EnvVar, lookup func(string) (string, bool), err error) {
	var out []engine.EnvVar
	index := map[string]int{}
	set := func(name, value string) error {
		grown := len(name) + len("=") + len(value) + 1
		if i, ok := index[name]; ok {
			grown = len(value) - len(out[i].Value)
			out[i].Value = value
		} else {
			index[name] = len(out)
			out = append(out, engine.EnvVar{Name: name, Value: value})
		}
		if err := budget.Take(grown); err != nil {
			return configErrorf("env %s: %v", name, err)
		}
		return nil
	}
	if pe.ServiceErr != nil {
		return nil, nil, pe.ServiceErr
	}
	lookup = func(name string) (string, bool) {
		if i, ok := index[name]; ok {
			return out[i].Value, true
		}
		v, ok := pe.ServiceEnv[name]
		return v, ok
	}

	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			ref := from.ConfigMapRef
			cm := objs.ConfigMap(pod, ref.Name)
			if cm == nil {
				if optional(ref.Optional) {
					continue
				}
				return nil, nil, errObjectNotFound(KindConfigMap, ref.Name)
			}
			for _, k := range sortedKeys(cm.Data) {
				if err := set(from.Prefix+k, cm.Data[k]); err != nil {
					return nil, nil, err
				}
			}
		case from.SecretRef != nil:
			ref := from.SecretRef
			sec := objs.Secret(pod, ref.Name)
			if sec == nil {
				if optional(ref.Optional) {
					continue
				}
				return nil, nil, errObjectNotFound(KindSecret, ref.Name)
			}
			for _, k := range sortedKeys(sec.Data) {
				if err := set(from.Prefix+k, string(sec.Data[k])); err != nil {
					return nil, nil, err
				}
			}
		}
	}

	for _, e := range c.Env {
		if e.ValueFrom == nil {
			v, err := expansion.Expand(e.Value, lookup)
			if err != nil {
				return nil, nil, configErrorf("env %s: %v", e.Name, err)
			}
			if err := set(e.Name, v); err != nil {
				return nil, nil, err
			}
			continue
		}
		v, ok, err := envValueFrom(pod, c, e.ValueFrom, objs, pe)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			if err := set(e.Name, v); err != nil {
				return nil, nil, err
			}
		}
	}
	// The service links the container does not define itself, after its
	// own, as the kubelet adds them.
	for _, name := range sortedKeys(pe.ServiceEnv) {
		if _, ok := index[name]; !ok {
			if err := set(name, pe.ServiceEnv[name]); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, lookup, nil
}

// envValueFrom resolves one valueFrom. ok is false for an optional reference
// that is missing (the variable is then not set).
func envValueFrom(pod *v1.Pod, c *v1.Container, from *v1.EnvVarSource, objs *Objects, pe podEnv) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podFieldValue(pod, from.FieldRef.FieldPath, pe)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		target := c
		if name := from.ResourceFieldRef.ContainerName; name != "" {
			target = findContainer(pod, name)
			if target == nil {
				return "", false, configErrorf("resourceFieldRef: no container %q", name)
			}
		}
		v, err := resourceFieldValue(target, from.ResourceFieldRef, pe)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm := objs.ConfigMap(pod, ref.Name)
		if cm == nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, errObjectNotFound(KindConfigMap, ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, errKeyNotFound(KindConfigMap, ref.Name, ref.Key)
		}
		return v, true, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec := objs.Secret(pod, ref.Name)
		if sec == nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, errObjectNotFound(KindSecret, ref.Name)
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, errKeyNotFound(KindSecret, ref.Name, ref.Key)
		}
		return string(v), true, nil
	}
	return "", false, configErrorf("valueFrom names no source")
}

// downwardAnnotations are pod's annotations as the downward API shows them
// to its containers: podrun.io/source without the credentials a manifest
// URL may carry (a URL's manifest would otherwise read the node's
// credentials to fetch it).
func downwardAnnotations(pod *v1.Pod) map[string]string {
	if _, ok := pod.Annotations[manifest.AnnotationSource]; !ok {
		return pod.Annotations
	}
	shown := maps.Clone(pod.Annotations)
	shown[manifest.AnnotationSource] = manifest.RedactedSource(shown[manifest.AnnotationSource])
	return shown
}

// podFieldValue is the downward API's view of a pod field.
func podFieldValue(pod *v1.Pod, path string, pe podEnv) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return downwardAnnotations(pod)[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(downwardAnnotations(pod)), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return pe.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return pe.HostIP, nil
	}
	return "", configErrorf("fieldRef %q is not supported", path)
}

// subscript splits "prefix['key']" into key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does:
// key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceFieldValue renders a container resource, divided by the divisor and
// rounded up, as the kubelet does; a resource without a limit is the node's
// capacity.
func resourceFieldValue(c *v1.Container, ref *v1.ResourceFieldSelector, pe podEnv) (string, error) {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	var found bool
	switch ref.Resource {
	case "limits.cpu":
		q, found = c.Resources.Limits[v1.ResourceCPU]
		if !found {
			q, found = *resource.NewMilliQuantity(pe.NodeMilliCPU, resource.DecimalSI), true
		}
	case "requests.cpu":
		q, found = c.Resources.Requests[v1.ResourceCPU]
	case "limits.memory":
		q, found = c.Resources.Limits[v1.ResourceMemory]
		if !found {
			q, found = *resource.NewQuantity(pe.NodeMemory, resource.BinarySI), true
		}
	case "requests.memory":
		q, found = c.Resources.Requests[v1.ResourceMemory]
	case "limits.ephemeral-storage":
		q, found = c.Resources.Limits[v1.ResourceEphemeralStorage]
	case "requests.ephemeral-storage":
		q, found = c.Resources.Requests[v1.ResourceEphemeralStorage]
	default:
		return "", configErrorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	if !found {
		return "0", nil
	}
	if strings.HasSuffix(ref.Resource, ".cpu") {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return strconv.FormatInt(int64(v), 10), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return strconv.FormatInt(int64(v), 10), nil
}

// CPU shares and quota as the kubelet computes them from millicores.
const (
	minShares     = 2
	sharesPerCPU  = 1024
	quotaPeriod   = 100000 // microseconds
	minQuotaPerio = 1000
)

// containerResources turns a container's requests and limits into cgroup
// numbers: requests.cpu -> shares (a limit stands in for a missing request,
// as API defaulting does), limits.cpu -> quota, limits.memory -> memory
// limit. A memory request alone is not a limit.
func containerResources(c *v1.Container) engine.Resources {
	var r engine.Resources
	cpuReq, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok {
		cpuReq, ok = c.Resources.Limits[v1.ResourceCPU]
	}
	r.CPUShares = minShares
	if ok && !cpuReq.IsZero() {
		r.CPUShares = max(cpuReq.MilliValue()*sharesPerCPU/1000, minShares)
	}
	if lim, ok := c.Resources.Limits[v1.ResourceCPU]; ok && !lim.IsZero() {
		r.CPUPeriod = quotaPeriod
		r.CPUQuota = max(lim.MilliValue()*quotaPeriod/1000, minQuotaPerio)
	}
	if lim, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimit = lim.Value()
	}
	return r
}

// securityConfig merges the pod's and the container's security contexts, the
// container's winning. A localhost seccomp profile must be a clean relative
// path under seccompRoot: the engine reads the file it names.
func securityConfig(pod *v1.Pod, c *v1.Container, seccompRoot string) (engine.SecurityConfig, error) {
	var s engine.SecurityConfig
	psc := pod.Spec.SecurityContext
	var seccomp *v1.SeccompProfile
	if psc != nil {
		s.RunAsUser = psc.RunAsUser
		s.RunAsGroup = psc.RunAsGroup
		s.SupplementalGroups = append(s.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			s.SupplementalGroups = append(s.SupplementalGroups, *psc.FSGroup)
		}
		seccomp = psc.SeccompProfile
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			s.RunAsUser = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			s.RunAsGroup = csc.RunAsGroup
		}
		if csc.ReadOnlyRootFilesystem != nil {
			s.ReadOnlyRootfs = *csc.ReadOnlyRootFilesystem
		}
		if csc.Privileged != nil {
			s.Privileged = *csc.Privileged
		}
		if caps := csc.Capabilities; caps != nil {
			for _, c := range caps.Add {
				s.CapAdd = append(s.CapAdd, string(c))
			}
			for _, c := range caps.Drop {
				s.CapDrop = append(s.CapDrop, string(c))
			}
		}
		if csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
			s.NoNewPrivileges = true
		}
		if csc.SeccompProfile != nil {
			seccomp = csc.SeccompProfile
		}
	}
	// An unset profile means Docker's default profile (the kubelet's
	// seccompDefault: true), not unconfined.
	if seccomp != nil {
		switch seccomp.Type {
		case v1.SeccompProfileTypeUnconfined:
			s.Seccomp = "unconfined"
		case v1.SeccompProfileTypeLocalhost:
			if seccomp.LocalhostProfile != nil {
				rel, err := cleanRelPath("seccomp localhostProfile", *seccomp.LocalhostProfile, false)
				if err != nil {
					return s, err
				}
				s.Seccomp = filepath.Join(seccompRoot, rel)
			}
		}
	}
	return s, nil
}

// CheckPrivileged is podrun's privileged-container policy, the one place it
// is written: a privileged container runs only when allow (the
// --allow-privileged flag). The sync core applies it to each container it
// makes; commands apply it to a pod before handing it over, to refuse it
// as bad input.
func CheckPrivileged(c *v1.Container, allow bool) error {
	if allow || !isPrivileged(c) {
		return nil
	}
	return configErrorf("container %s is privileged; pass --allow-privileged to run it", c.Name)
}

// isPrivileged reports whether c asks to be privileged.
func isPrivileged(c *v1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func optional(b *bool) bool { return b != nil && *b }

// terminationMessageFile makes the host file a container's
// terminationMessagePath is bound to,
// <root-dir>/pods/<uid>/containers/<name>/<attempt>-termination-log, through
// the root dir (poddir.go), and returns its real path. uid and container must
// be safe names.
func terminationMessageFile(rootDir, uid, container string, attempt int) (string, error) {
	if err := checkName("container name", container); err != nil {
		return "", err
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if err := d.root.MkdirAll(d.rel("containers", container), 0o750); err != nil {
		return "", refused(d.rel("containers", container), err)
	}
	// The container's own directory, checked to be that very one: a
	// symlink in its place that stays in the root dir (to another pod's)
	// is refused, not followed to remove and replace that pod's file.
	dir, err := d.openDir(false, "containers", container)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	name := terminationLogName(d, container, attempt)
	base := filepath.Base(name)
	// Made anew, never opened as found: whatever is there (a symlink
	// someone with write access to the root dir planted) is removed, not
	// followed, truncated and made world-writable. O_EXCL follows no
	// symlink.
	if err := dir.Remove(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", refused(name, err)
	}
	f, err := dir.OpenFile(base, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", refused(name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file: refused", name)
	}
	// The container may run as any user; it must be able to write.
	if err := f.Chmod(0o666); err != nil {
		return "", err
	}
	return d.realPath(f, name)
}

// terminationLogSuffix ends the name of a termination-message file.
const terminationLogSuffix = "-termination-log"

// terminationLogName is the path, relative to the root dir, of the
// termination-message file of attempt of container.
func terminationLogName(d *podDirs, container string, attempt int) string {
	return filepath.Join(d.rel("containers", container), strconv.Itoa(attempt)+terminationLogSuffix)
}
