package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/podrun/podrun/engine"
)

// Extended resources (nvidia.com/gpu, example.com/dongle: a name with a
// domain, outside kubernetes.io) are what the kubelet's device plugins
// hand out. podrun has no device plugins; it has two sources of them:
//   - nvidia.com/gpu, which Docker hands out itself through the NVIDIA
//     Container Toolkit's runtime: a container's limit of N becomes a
//     device request for N GPUs (`docker run --gpus N`);
//   - the resources the user declares (--extended-resource NAME=COUNT):
//     counted, so that the pods admitted never ask for more than COUNT
//     together, and given to no container (they stand for what the pod
//     finds on the host by itself: a serial dongle through a hostPath, a
//     licence).
//
// A pod that asks for more than there is fails admission as the
// kubelet's does (its predicate admission's InsufficientResourceError):
// Failed, reason OutOf<name>.

// ResourceNvidiaGPU is the NVIDIA device plugin's resource, which podrun
// maps to Docker's NVIDIA runtime.
const ResourceNvidiaGPU v1.ResourceName = "nvidia.com/gpu"

// NvidiaRuntime is the name of the NVIDIA Container Toolkit's runtime in
// the engine's runtimes (`docker info`).
const NvidiaRuntime = "nvidia"

// reasonOutOfPrefix begins the reason of a pod refused for want of a
// resource: the kubelet's (lifecycle.InsufficientResourcePrefix).
const reasonOutOfPrefix = "OutOf"

// IsOutOfResource reports whether reason is that of a pod refused for
// want of a resource (OutOfnvidia.com/gpu).
func IsOutOfResource(reason string) bool {
	return strings.HasPrefix(reason, reasonOutOfPrefix)
}

// ExtendedRequests returns what the pod asks for of each extended
// resource, as the kubelet's admission counts it: the larger of its app
// containers' (and sidecars') sum and its largest init container's.
// Requests equal limits for extended resources (the API requires it).
func ExtendedRequests(pod *v1.Pod) map[v1.ResourceName]int64 {
	var out map[v1.ResourceName]int64
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if !v1helper.IsExtendedResourceName(name) || q.IsZero() {
			continue
		}
		if out == nil {
			out = map[v1.ResourceName]int64{}
		}
		out[name] = q.Value()
	}
	return out
}

// ResourceShortage is an extended resource a pod asks for more of than
// is free.
type ResourceShortage struct {
	Pod      *v1.Pod
	Resource v1.ResourceName
	// Requested by the pod, Used by the pods admitted before it, of
	// Capacity: the kubelet's numbers.
	Requested, Used, Capacity int64
	// Holders are the admitted pods that use some of it.
	Holders []*v1.Pod
	// Why says where the capacity comes from, and what to do.
	Why string
}

// Reason is the refused pod's status reason: the kubelet's OutOf<name>.
func (s *ResourceShortage) Reason() string {
	return reasonOutOfPrefix + string(s.Resource)
}

// statusMessage is the refused pod's status message: the kubelet's, then
// why there is not more, and what to do.
func (s *ResourceShortage) statusMessage() string {
	msg := fmt.Sprintf("Pod was rejected: Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		s.Resource, s.Requested, s.Used, s.Capacity)
	if s.Why != "" {
		msg += ": " + s.Why
	}
	if len(s.Holders) > 0 {
		names := make([]string, len(s.Holders))
		for i, h := range s.Holders {
			names[i] = h.Namespace + "/" + h.Name
		}
		// Sorted: holders come from a map of admitted pods, and a message
		// that changes order on every sync would be a new status each time.
		slices.Sort(names)
		msg += "; held by " + strings.Join(names, ", ")
	}
	if s.Pod.Annotations[annotationConfigSource] != configSourceAPI && s.Capacity > 0 {
		msg += "; this pod is tried again when its manifest changes or a pod holding it goes"
	}
	return msg
}

// ExtendedCapacity is what the node has of extended resources: the
// declared ones, and whether the engine has the NVIDIA runtime.
type ExtendedCapacity struct {
	// Declared are the resources declared with --extended-resource.
	Declared map[v1.ResourceName]int64
	// NvidiaRuntime: the engine can hand out GPUs.
	NvidiaRuntime bool
}

// of returns how much there is of name, whether that is counted at all
// (GPUs with the runtime and no declared count are not: the runtime
// refuses to start a container it has no GPUs for), and why, for a
// refusal.
func (c ExtendedCapacity) of(name v1.ResourceName) (capacity int64, counted bool, why string) {
	n, declared := c.Declared[name]
	switch {
	case name == ResourceNvidiaGPU && !c.NvidiaRuntime:
		return 0, true, `the container engine has no NVIDIA runtime (docker info lists no "nvidia" runtime): ` +
			"install the NVIDIA Container Toolkit and configure Docker with it (nvidia-ctk runtime configure --runtime=docker)"
	case name == ResourceNvidiaGPU && !declared:
		return 0, false, ""
	case declared:
		return n, true, fmt.Sprintf("declared with --extended-resource %s=%d", name, n)
	}
	return 0, true, fmt.Sprintf("podrun has no device plugin for it: declare what the node has with --extended-resource %s=COUNT", name)
}

// FindShortage returns the first extended resource (by name) that pod
// (reqs: its ExtendedRequests) asks for more of than the holders (the
// pods admitted before it) leave free, or nil. A holder with pod's UID is
// pod itself, and skipped.
func FindShortage(pod *v1.Pod, reqs map[v1.ResourceName]int64, holders []*v1.Pod, capacity ExtendedCapacity) *ResourceShortage {
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		total, counted, why := capacity.of(name)
		if !counted {
			continue
		}
		var used int64
		var users []*v1.Pod
		for _, h := range holders {
			if h.UID == pod.UID {
				continue
			}
			if n := ExtendedRequests(h)[name]; n > 0 {
				used += n
				users = append(users, h)
			}
		}
		if used+reqs[name] > total {
			return &ResourceShortage{Pod: pod, Resource: name, Requested: reqs[name], Used: used, Capacity: total,
				Holders: users, Why: why}
		}
	}
	return nil
}

// deviceRequests are the engine devices the container asks for: its GPUs.
func deviceRequests(c *v1.Container) []engine.DeviceRequest {
	q, ok := c.Resources.Limits[ResourceNvidiaGPU]
	if !ok || q.IsZero() {
		return nil
	}
	return []engine.DeviceRequest{{Driver: NvidiaRuntime, Count: int(q.Value()), Capabilities: [][]string{{"gpu"}}}}
}

// extendedLimits are the container's limits of extended resources, or nil.
func extendedLimits(c *v1.Container) v1.ResourceList {
	var out v1.ResourceList
	for name, q := range c.Resources.Limits {
		if v1helper.IsExtendedResourceName(name) {
			if out == nil {
				out = v1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}
