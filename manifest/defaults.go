package manifest

import (
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults are those the API server's (and so the kubelet's file source's)
// decoding applies to a v1 Pod: SetObjectDefaults_Pod in
// k8s.io/kubernetes/pkg/apis/core/v1, as generated from defaults.go and the
// types' +default markers. They are applied before the container hashes are
// computed, so that a container written with or without a default value is
// the same container.
//
// Deliberate differences from the kubelet:
//   - Pod-level resources (spec.resources, the PodLevelResources feature) are
//     not defaulted from the containers': podrun warns that the field is not
//     supported and ignores it.
//   - The static-pod toleration (NoExecute, Exists) is not added: there is no
//     taint manager to tolerate.
//   - Parse clears status rather than setting phase Pending: status is
//     podrun's to compute, and a manifest's status is ignored.
//   - The image pull policy reads the tag with a plain split rather than the
//     Docker reference parser; the two differ only for references that
//     Docker would reject anyway.
//   - resourceFieldRef.divisor is not defaulted, as in the API (a zero divisor
//     reads as 1 where it is used).

// SetDefaults applies the API defaults to pod in place. Parse calls it; it is
// exported for pods that come from elsewhere (the apiserver source) and for
// tests.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	defaultRequestsFromLimits(spec.InitContainers)
	defaultRequestsFromLimits(spec.Containers)
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = new(v1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		// With the host's network a container port is a host port.
		defaultHostNetworkPorts(spec.InitContainers)
		defaultHostNetworkPorts(spec.Containers)
	}

	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = new(int64(v1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}

	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundResourceList(spec.Overhead)
}

// defaultRequestsFromLimits sets a request to its limit where only the limit
// is given: the API does so for pods (not templates), and the cpu shares
// podrun gives a container come from its requests.
func defaultRequestsFromLimits(containers []v1.Container) {
	for i := range containers {
		res := &containers[i].Resources
		if res.Limits == nil {
			continue
		}
		if res.Requests == nil {
			res.Requests = make(v1.ResourceList, len(res.Limits))
		}
		for name, limit := range res.Limits {
			if _, set := res.Requests[name]; !set {
				res.Requests[name] = limit.DeepCopy()
			}
		}
	}
}

func defaultHostNetworkPorts(containers []v1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if p := &containers[i].Ports[j]; p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

func defaultVolume(vol *v1.Volume) {
	if reflect.ValueOf(vol.VolumeSource).IsZero() {
		vol.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	src := &vol.VolumeSource
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = new(v1.HostPathUnset)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = new(int32(v1.SecretVolumeSourceDefaultMode))
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = new(int32(v1.ConfigMapVolumeSourceDefaultMode))
	}
	if src.DownwardAPI != nil {
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = new(int32(v1.DownwardAPIVolumeSourceDefaultMode))
		}
		defaultDownwardAPIItems(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		if src.Projected.DefaultMode == nil {
			src.Projected.DefaultMode = new(int32(v1.ProjectedVolumeSourceDefaultMode))
		}
		for i := range src.Projected.Sources {
			s := &src.Projected.Sources[i]
			if s.DownwardAPI != nil {
				defaultDownwardAPIItems(s.DownwardAPI.Items)
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = new(int64(3600))
			}
		}
	}
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = defaultPullPolicy(src.Image.Reference)
	}
}

func defaultDownwardAPIItems(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		defaultFieldSelector(items[i].FieldRef)
	}
}

func defaultFieldSelector(sel *v1.ObjectFieldSelector) {
	if sel != nil && sel.APIVersion == "" {
		sel.APIVersion = "v1"
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil {
			defaultFieldSelector(c.Env[i].ValueFrom.FieldRef)
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = new("")
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

// roundResourceList rounds quantities up to milli-units, as the API does to
// keep values representable (a request of 0.0001 cpu becomes 1m).
func roundResourceList(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

// defaultPullPolicy is Always for an image tagged latest (or not tagged and
// not pinned by digest, which means latest), IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	if imageTag(image) == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// imageTag returns the tag of an image reference; "latest" when there is
// neither a tag nor a digest. A digest-pinned reference without a tag has
// the tag "".
func imageTag(image string) string {
	name, digest, _ := strings.Cut(image, "@")
	// The tag follows the last colon after the last slash: a colon before a
	// slash is a registry's port (localhost:5000/app).
	lastPart := name[strings.LastIndexByte(name, '/')+1:]
	if i := strings.LastIndexByte(lastPart, ':'); i >= 0 {
		return lastPart[i+1:]
	}
	if digest != "" {
		return ""
	}
	return "latest"
}
