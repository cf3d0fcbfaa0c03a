package runner

import (
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/manifest"
)

// ReasonNodePorts is the status reason of a pod refused because a host
// port it asks for is held by another pod: the kubelet's, whose admission
// runs the scheduler's NodePorts predicate.
const ReasonNodePorts = "NodePorts"

// messageNodePorts begins the message of a pod refused for its host ports,
// in the kubelet's words (its rejectPod and the NodePorts predicate's
// reason): tools that look for them find them.
const messageNodePorts = "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"

// anyHostIP is the address of a host port that does not name one: every
// address, as the API means an empty hostIP.
const anyHostIP = "0.0.0.0"

// HostPort is one host port a pod holds while it runs.
type HostPort struct {
	// Protocol is TCP when the manifest does not say.
	Protocol v1.Protocol
	// HostIP is anyHostIP ("0.0.0.0") when the manifest does not say.
	HostIP string
	Port   int32
	// Container asks for it; Field is the port's path in the pod
	// ("spec.containers[0].ports[1]").
	Container string
	Field     string
}

// String names the port as messages do: "8080/TCP", or
// "127.0.0.1:8080/TCP" for one address.
func (p HostPort) String() string {
	port := strconv.Itoa(int(p.Port)) + "/" + string(p.Protocol)
	if p.HostIP == anyHostIP {
		return port
	}
	return net.JoinHostPort(p.HostIP, port)
}

// conflicts reports whether two host ports cannot both be had: the same
// protocol and port, on the same address or with either on every address
// (the scheduler's HostPortInfo.CheckConflict, which the kubelet's
// admission uses).
func (p HostPort) conflicts(o HostPort) bool {
	return p.Port == o.Port && p.Protocol == o.Protocol &&
		(p.HostIP == o.HostIP || p.HostIP == anyHostIP || o.HostIP == anyHostIP)
}

// HostPorts returns the host ports the pod holds while it runs: each port
// with a hostPort, of every container. Init containers count, unlike in
// Kubernetes (which counts app containers and sidecars): podrun publishes
// every host port of the pod on its sandbox, for the pod's life. A
// hostNetwork pod's container ports are host ports too: defaulting sets
// their hostPort to the containerPort, as the API's does.
func HostPorts(pod *v1.Pod) []HostPort {
	var out []HostPort
	add := func(containers []v1.Container, field string) {
		for i := range containers {
			c := &containers[i]
			for j, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := HostPort{Protocol: p.Protocol, HostIP: p.HostIP, Port: p.HostPort, Container: c.Name,
					Field: fmt.Sprintf("spec.%s[%d].ports[%d]", field, i, j)}
				if hp.Protocol == "" {
					hp.Protocol = v1.ProtocolTCP
				}
				if hp.HostIP == "" {
					hp.HostIP = anyHostIP
				}
				out = append(out, hp)
			}
		}
	}
	add(pod.Spec.InitContainers, "initContainers")
	add(pod.Spec.Containers, "containers")
	return out
}

// PortConflict is a host port of a pod that another pod holds.
type PortConflict struct {
	Pod    *v1.Pod
	Port   HostPort
	Holder *v1.Pod
	// HolderPort is the holder's port that Port conflicts with.
	HolderPort HostPort
}

// FindPortConflict returns the first host port of pod (ports: HostPorts of
// pod) that a pod of holders holds, or nil. A holder with pod's UID is
// pod itself, and skipped.
func FindPortConflict(pod *v1.Pod, ports []HostPort, holders []*v1.Pod) *PortConflict {
	for _, p := range ports {
		for _, h := range holders {
			if h.UID == pod.UID {
				continue
			}
			for _, hp := range HostPorts(h) {
				if p.conflicts(hp) {
					return &PortConflict{Pod: pod, Port: p, Holder: h, HolderPort: hp}
				}
			}
		}
	}
	return nil
}

// AdmitHostPorts is the host-port admission of pods none of which runs
// yet, in the order given (the runner's: the order it is given them,
// which is the sources' priority order): a pod is admitted unless a host
// port of it is held by a pod admitted before it; a refused pod holds
// nothing. It returns the refusals, in order: what `podrun once` and
// `watch` do with such pods, which `podrun validate` reports beforehand.
func AdmitHostPorts(pods []*v1.Pod) []PortConflict {
	var admitted []*v1.Pod
	var refused []PortConflict
	for _, pod := range pods {
		ports := HostPorts(pod)
		if len(ports) == 0 {
			continue
		}
		if c := FindPortConflict(pod, ports, admitted); c != nil {
			refused = append(refused, *c)
			continue
		}
		admitted = append(admitted, pod)
	}
	return refused
}

// Describe says what the conflict is, at the refused pod's port: where
// the holder asks for it is holderAt (its field, and where the caller
// knows it, its file and line).
func (c *PortConflict) Describe(holderAt string) string {
	return fmt.Sprintf("host port %s of container %s is held by pod %s/%s (%s)",
		c.Port, c.Port.Container, c.Holder.Namespace, c.Holder.Name, holderAt)
}

// statusMessage is the message of the refused pod's status: the kubelet's,
// then which port, where, and what to do.
func (c *PortConflict) statusMessage() string {
	holderAt := c.HolderPort.Field + ".hostPort"
	if src := c.Holder.Annotations[annotationSource]; src != "" {
		// A status is shown in /pods and the mirror pod: a URL without
		// its credentials.
		holderAt += " in " + manifest.RedactedSource(src)
	}
	hint := "; change one of the ports, or remove that pod: this pod is tried again when its manifest changes or that pod goes"
	if c.Pod.Annotations[annotationConfigSource] == configSourceAPI {
		hint = "" // as the kubelet's: its controller makes another
	}
	return fmt.Sprintf("%s: %s.hostPort: %s%s", messageNodePorts, c.Port.Field, c.Describe(holderAt), hint)
}
