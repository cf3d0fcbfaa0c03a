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
//
// A pod's cgroup is Parent/<node>/pod<uid>: every podrun node of a host
// shares Parent, and a manifest may set any metadata.uid, so a cgroup
// named by the UID alone let a pod of one node rewrite the limits of
// another node's pod with that UID, join its cgroup and remove it.
type PodCgroups struct {
	// Parent is the part of the hierarchy podrun owns ("/podrun"); pods
	// are Parent/<Node>/pod<uid>.
	Parent string
	// Node is this podrun's node name: one element of the pods' paths.
	Node string
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

// NewPodCgroups is PodCgroups of node on this host, for an engine with
// driver.
func NewPodCgroups(node, driver string, maxPIDs int64) *PodCgroups {
	return &PodCgroups{Parent: "/podrun", Node: node, MaxPIDs: maxPIDs, Driver: driver, Unified: cgroups.Mode() == cgroups.Unified}
}

// group is the cgroup of pod uid on this node, or an error (a configError)
// when the node name or uid cannot be a path element.
func (c *PodCgroups) group(uid string) (string, error) {
	if err := checkName("node name", c.Node); err != nil {
		return "", err
	}
	if err := checkName("pod uid", uid); err != nil {
		return "", err
	}
	return path.Join(c.Parent, c.Node, "pod"+uid), nil
}

// legacyGroup is the cgroup of pod uid as podrun made it before pod
// cgroups were per node. Pods it started still run there (the path is no
// part of any hash, so they are not made again), and it must go with them.
func (c *PodCgroups) legacyGroup(uid string) string {
	return path.Join(c.Parent, "pod"+uid)
}

// mountpoint is cgroup v2's mount.
func (c *PodCgroups) mountpoint() string {
	if c.Mountpoint == "" {
		return "/sys/fs/cgroup"
	}
	return c.Mountpoint
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
	group, err := c.group(string(pod.UID))
	if err != nil {
		return "", err
	}
	if c.Unified {
		if _, err := cgroup2.NewManager(c.mountpoint(), group, cgroup2.ToResources(res)); err != nil {
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
	if c == nil {
		return nil
	}
	group, err := c.group(uid)
	if err != nil {
		return nil // never made
	}
	if err := c.remove(group, false); err != nil {
		return err
	}
	// The legacy cgroup may be another node's pod with the same UID: the
	// pod's own is empty by now, so one with processes is not ours.
	return c.remove(c.legacyGroup(uid), true)
}

// remove deletes group if it exists; when ifIdle, only if no process is
// in it or below.
func (c *PodCgroups) remove(group string, ifIdle bool) error {
	var busy func() bool
	var del func() error
	if c.Unified {
		m, err := cgroup2.Load(group, cgroup2.WithMountpoint(c.mountpoint()))
		if err != nil {
			return nil // never made, or gone
		}
		busy = func() bool {
			procs, err := m.Procs(true)
			return err != nil || len(procs) > 0
		}
		del = m.Delete
	} else {
		cg, err := cgroup1.Load(cgroup1.StaticPath(group))
		if err != nil {
			return nil // never made, or gone
		}
		busy = func() bool {
			for _, s := range cg.Subsystems() {
				procs, err := cg.Processes(s.Name(), true)
				if len(procs) > 0 || (err != nil && !errors.Is(err, fs.ErrNotExist)) {
					return true
				}
			}
			return false
		}
		del = cg.Delete
	}
	if ifIdle && busy() {
		return nil
	}
	if err := del(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove pod cgroup %s: %w", group, err)
	}
	return nil
}
