package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodCgroupResources: a pod's cgroup limits come from spec.resources
// (cpu limit as a quota, cpu request as shares, memory limit) and the
// per-pod pids limit; a pod with neither needs no cgroup.
func TestPodCgroupResources(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	if res := (&PodCgroups{Driver: "cgroupfs"}).podCgroupResources(pod); res != nil {
		t.Errorf("a pod without pod-level resources: %+v, want no cgroup", res)
	}
	pod.Spec.Resources = &v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}
	res := (&PodCgroups{Driver: "cgroupfs", MaxPIDs: 100}).podCgroupResources(pod)
	if res == nil || res.Memory == nil || res.CPU == nil || res.Pids == nil {
		t.Fatalf("resources %+v", res)
	}
	if *res.Memory.Limit != 64<<20 || *res.CPU.Quota != 50000 || *res.CPU.Period != 100000 || *res.CPU.Shares != 256 || *res.Pids.Limit != 100 {
		t.Errorf("memory %d quota %d/%d shares %d pids %d; want 64Mi, 50000/100000, 256, 100",
			*res.Memory.Limit, *res.CPU.Quota, *res.CPU.Period, *res.CPU.Shares, *res.Pids.Limit)
	}
}

// TestPodCgroupNeedsCgroupfs: without Docker's cgroupfs driver a pod that
// needs a cgroup of its own cannot start (a configError saying why); one
// that needs none runs as before.
func TestPodCgroupNeedsCgroupfs(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	for _, c := range []*PodCgroups{nil, {Driver: "systemd"}} {
		if parent, err := c.Ensure(pod); parent != "" || err != nil {
			t.Errorf("%+v: a pod needing no cgroup: %q, %v", c, parent, err)
		}
	}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}
	_, err := (&PodCgroups{Driver: "systemd"}).Ensure(pod)
	if err == nil || !isConfigError(err) {
		t.Fatalf("systemd driver: %v, want a configError", err)
	}
}
