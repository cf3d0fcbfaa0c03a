package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// PodCgroups makes each pod a cgroup of its own, as the kubelet's pod
// cgroups (kubepods/.../pod<uid>), under which the engine puts the pod's
// sandbox and containers (Docker's CgroupParent): so that what the pod as
// a whole may use - spec.resources, and at most MaxPIDs processes - is
// enforced on all its containers together. Only pods that need one get
// one. Docker must use its cgroupfs driver: under the systemd driver a
// parent is a systemd slice, which only systemd makes.
type PodCgroups struct {
	// Parent is the part of the hierarchy podrun owns ("/podrun"); pods
	// are Parent/pod<uid>.
	Parent string
	// MaxPIDs is the per-pod process limit (the kubelet's --pod-max-pids);
	// 0 is none.
	MaxPIDs int64
	// Driver is the engine's cgroup driver: "cgroupfs" makes pod cgroups
	// possible.
	Driver string
	// Unified says the host has cgroup v2 alone (cgroups.Mode()).
	Unified bool
	// Mountpoint is cgroup v2's mount ("/sys/fs/cgroup" when empty).
	Mountpoint string
}

// NewPodCgroups is PodCgroups on this host, for an engine with driver.
func NewPodCgroups(driver string, maxPIDs int64) *PodCgroups {
	return &PodCgroups{Parent: "/podrun", MaxPIDs: maxPIDs, Driver: driver, Unified: cgroups.Mode() == cgroups.Unified}
}

// podCgroupResources are the limits of the pod's cgroup, or nil when the
// pod needs none: pod-level limits (spec.resources; requests of cpu set
// its shares) and the per-pod pids limit.
func (c *PodCgroups) podCgroupResources(pod *v1.Pod) *specs.LinuxResources {
	var res specs.LinuxResources
	if r := pod.Spec.Resources; r != nil {
		if q, ok := r.Limits[v1.ResourceMemory]; ok {
			limit := q.Value()
			res.Memory = &specs.LinuxMemory{Limit: &limit}
		}
		if q, ok := r.Limits[v1.ResourceCPU]; ok {
			period := uint64(quotaPeriod)
			quota := max(q.MilliValue()*quotaPeriod/1000, minQuotaPerio)
			res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
		}
		if q, ok := r.Requests[v1.ResourceCPU]; ok {
			if res.CPU == nil {
				res.CPU = &specs.LinuxCPU{}
			}
			shares := uint64(max(q.MilliValue()*sharesPerCPU/1000, minShares))
			res.CPU.Shares = &shares
		}
	}
	if c != nil && c.MaxPIDs > 0 {
		limit := c.MaxPIDs
		res.Pids = &specs.LinuxPids{Limit: &limit}
	}
	if res.Memory == nil && res.CPU == nil && res.Pids == nil {
		return nil
	}
	return &res
}

// Ensure makes (or updates) the pod's cgroup with its limits and returns
// the engine's CgroupParent for the pod's sandbox and containers, or ""
// when the pod needs no cgroup of its own. An error is a configError: the
// pod cannot run as written here.
func (c *PodCgroups) Ensure(pod *v1.Pod) (string, error) {
	res := c.podCgroupResources(pod)
	if res == nil {
		return "", nil
	}
	if c == nil || c.Driver != "cgroupfs" {
		driver := "unknown"
		if c != nil && c.Driver != "" {
			driver = c.Driver
		}
		return "", configErrorf("pod-level resources and --pod-max-pids need a pod cgroup, which podrun makes only "+
			"under Docker's cgroupfs cgroup driver (this engine's: %s)", driver)
	}
	uid := string(pod.UID)
	if err := checkName("pod uid", uid); err != nil {
		return "", err
	}
	group := path.Join(c.Parent, "pod"+uid)
	if c.Unified {
		mount := c.Mountpoint
		if mount == "" {
			mount = "/sys/fs/cgroup"
		}
		if _, err := cgroup2.NewManager(mount, group, cgroup2.ToResources(res)); err != nil {
			return "", configErrorf("pod cgroup %s: %v", group, err)
		}
		return group, nil
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(group))
	if err == nil {
		err = cg.Update(res)
	} else if errors.Is(err, cgroup1.ErrCgroupDeleted) || errors.Is(err, fs.ErrNotExist) {
		_, err = cgroup1.New(cgroup1.StaticPath(group), res)
	}
	if err != nil {
		return "", configErrorf("pod cgroup %s: %v", group, err)
	}
	return group, nil
}

// Remove removes the pod's cgroup, if one was made (by this podrun or an
// earlier one: the driver need not be known). Its containers must be gone
// (stopped: the engine removes theirs).
func (c *PodCgroups) Remove(uid string) error {
	if c == nil || checkName("pod uid", uid) != nil {
		return nil
	}
	group := path.Join(c.Parent, "pod"+uid)
	if c.Unified {
		mount := c.Mountpoint
		if mount == "" {
			mount = "/sys/fs/cgroup"
		}
		m, err := cgroup2.Load(group, cgroup2.WithMountpoint(mount))
		if err != nil {
			return nil
		}
		if err := m.Delete(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove pod cgroup %s: %w", group, err)
		}
		return nil
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(group))
	if err != nil {
		return nil // never made, or gone
	}
	if err := cg.Delete(); err != nil {
		return fmt.Errorf("remove pod cgroup %s: %w", group, err)
	}
	return nil
}
