package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Hashes decide what an update replaces. They are taken over the JSON of the
// defaulted spec, so a field podrun does not set never changes them: a podrun
// upgrade does not, by itself, restart anything.

// ContainerHash is the hash of a container's spec without its resources; a
// change means the container is replaced. Extended resources are the
// exception: devices (GPUs) are given to a container when it is made, so
// a change of them replaces it. A container without any hashes as before
// they were counted.
func ContainerHash(c *v1.Container) string {
	cp := c.DeepCopy()
	cp.Resources = v1.ResourceRequirements{Limits: extendedLimits(c)}
	cp.ResizePolicy = nil
	return hashJSON(cp)
}

// ResourcesHash is the hash of a container's resources; a change alone is
// applied in place where the runtime can.
func ResourcesHash(c *v1.Container) string {
	return hashJSON(c.Resources)
}

// sandboxSpec is the part of a pod that lives in the sandbox: a change to it
// means a new sandbox and so new containers.
type sandboxSpec struct {
	HostNetwork bool   `json:"hostNetwork,omitempty"`
	HostPID     bool   `json:"hostPID,omitempty"`
	HostIPC     bool   `json:"hostIPC,omitempty"`
	Share       *bool  `json:"shareProcessNamespace,omitempty"`
	Hostname    string `json:"hostname,omitempty"`
	// HostnameOverride is omitted when unset: the hash of a pod without
	// one is as before.
	HostnameOverride *string                `json:"hostnameOverride,omitempty"`
	Subdomain        string                 `json:"subdomain,omitempty"`
	DNSPolicy        v1.DNSPolicy           `json:"dnsPolicy,omitempty"`
	DNSConfig        *v1.PodDNSConfig       `json:"dnsConfig,omitempty"`
	HostAliases      []v1.HostAlias         `json:"hostAliases,omitempty"`
	Ports            []v1.ContainerPort     `json:"ports,omitempty"`
	Volumes          []v1.Volume            `json:"volumes,omitempty"`
	Sysctls          []v1.Sysctl            `json:"sysctls,omitempty"`
	Security         *v1.PodSecurityContext `json:"securityContext,omitempty"`
	// RuntimeClass: the sandbox and its containers run with its runtime
	// (omitted when unset: the hash of a pod without one is as before).
	RuntimeClass *string `json:"runtimeClassName,omitempty"`
	// Privileged: a CRI sandbox is made privileged for a privileged
	// container (engine.SandboxConfig), so an edit that makes the first
	// container privileged, or the last one not, needs a new sandbox.
	// Omitted when false: the hash of a pod without one is as before.
	Privileged bool `json:"privileged,omitempty"`
}

// SandboxHash is the hash of the sandbox-level part of a pod spec: network
// mode, ports, DNS, hostname, volumes and the pod security context.
func SandboxHash(pod *v1.Pod) string {
	return hashJSON(sandboxSpecOf(pod))
}

// Records of what the hashes were taken of are kept in the pod's
// directory (records.go): their JSON, from which Plan says which fields
// changed. They serve no decision: the hashes do.

// sandboxRecord is the record of the pod's sandbox: the very JSON
// SandboxHash is taken of.
func sandboxRecord(pod *v1.Pod) []byte {
	return mustJSON(sandboxSpecOf(pod))
}

// containerRecord is the record of a container: its whole spec, resources
// included.
func containerRecord(c *v1.Container) []byte {
	return mustJSON(c)
}

// sandboxSpecOf is the sandbox-level part of the pod's spec.
func sandboxSpecOf(pod *v1.Pod) sandboxSpec {
	s := sandboxSpec{
		HostNetwork:      pod.Spec.HostNetwork,
		HostPID:          pod.Spec.HostPID,
		HostIPC:          pod.Spec.HostIPC,
		Share:            pod.Spec.ShareProcessNamespace,
		Hostname:         pod.Spec.Hostname,
		HostnameOverride: pod.Spec.HostnameOverride,
		Subdomain:        pod.Spec.Subdomain,
		DNSPolicy:        pod.Spec.DNSPolicy,
		DNSConfig:        pod.Spec.DNSConfig,
		HostAliases:      pod.Spec.HostAliases,
		Volumes:          pod.Spec.Volumes,
		Security:         pod.Spec.SecurityContext,
	}
	if n := pod.Spec.RuntimeClassName; n != nil && *n != "" {
		s.RuntimeClass = n
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		s.Sysctls = sc.Sysctls
	}
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				s.Ports = append(s.Ports, p)
			}
		}
	}
	s.Privileged = hasPrivileged(allContainers(pod))
	return s
}

// hasPrivileged reports whether one of cs is privileged.
func hasPrivileged(cs []*v1.Container) bool {
	return slices.ContainsFunc(cs, isPrivileged)
}

func hashJSON(v any) string {
	sum := sha256.Sum256(mustJSON(v))
	return hex.EncodeToString(sum[:8])
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// The API types always marshal; a failure is a programming error.
		panic("hash: " + err.Error())
	}
	return b
}

// allContainers returns the init containers followed by the app containers.
func allContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
