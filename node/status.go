package node

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet has no default eviction threshold for PIDs; podrun reports
// PIDPressure when under 5 % of pid_max is free.
const (
	PIDAvailablePct       = 5
	DefaultMaxPods        = 110
	annotationAttachByCMP = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// Measurements are what the node's conditions are computed from, read at
// one moment.
type Measurements struct {
	MemoryAvailableBytes uint64
	// NodeFS is the filesystem of the root dir; ImageFS Docker's data root
	// (the same as NodeFS when unknown).
	NodeFS, ImageFS Filesystem
	PIDsInUse       uint64
	PIDMax          uint64
	// RuntimeErr is why the node is not ready: the sync loop stalled or the
	// container engine does not answer. nil: ready.
	RuntimeErr error
}

// Measure reads memory, the two filesystems and the PIDs in use now.
func MeasureNode(rootDir, imagesDir string) (Measurements, error) {
	var m Measurements
	var errs []string
	if avail, err := memAvailable("/proc/meminfo"); err == nil {
		m.MemoryAvailableBytes = avail
	} else {
		errs = append(errs, err.Error())
	}
	var err error
	if m.NodeFS, err = Measure(rootDir); err != nil {
		errs = append(errs, err.Error())
	}
	m.ImageFS = m.NodeFS
	if imagesDir != "" {
		if fs, err := Measure(imagesDir); err == nil {
			m.ImageFS = fs
		} else {
			errs = append(errs, err.Error())
		}
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		m.PIDsInUse = uint64(si.Procs)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		m.PIDMax, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if len(errs) > 0 {
		return m, fmt.Errorf("measure node: %s", strings.Join(errs, "; "))
	}
	return m, nil
}

// memAvailable is MemAvailable of meminfo, in bytes: what the kernel can
// give without swapping, the nearest a host has to the kubelet's
// memory.available (capacity minus the root cgroup's working set).
func memAvailable(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemAvailable %q: %w", path, f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemAvailable", path)
}

// Resources returns the node's capacity and allocatable, as the kubelet
// computes them with no reservations: allocatable is capacity less the
// hard eviction thresholds of memory.available and nodefs.available.
func Resources(f *Facts, nodeFS Filesystem, maxPods int, thresholds []Threshold) (capacity, allocatable v1.ResourceList) {
	if maxPods <= 0 {
		maxPods = DefaultMaxPods
	}
	capacity = v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(f.CPUs), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(int64(f.MemoryBytes), resource.BinarySI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(int64(nodeFS.CapacityBytes), resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		"hugepages-1Gi":             *resource.NewQuantity(0, resource.BinarySI),
		"hugepages-2Mi":             *resource.NewQuantity(0, resource.BinarySI),
	}
	allocatable = capacity.DeepCopy()
	var memReserve, ephReserve uint64
	for _, t := range thresholds {
		switch t.Signal {
		case SignalMemoryAvailable:
			memReserve = t.min(f.MemoryBytes)
		case SignalNodeFSAvailable:
			ephReserve = t.min(nodeFS.CapacityBytes)
		}
	}
	mem := int64(f.MemoryBytes) - int64(memReserve)
	allocatable[v1.ResourceMemory] = *resource.NewQuantity(max(mem, 0), resource.BinarySI)
	eph := int64(nodeFS.CapacityBytes) - int64(ephReserve)
	allocatable[v1.ResourceEphemeralStorage] = *resource.NewQuantity(max(eph, 0), resource.BinarySI)
	return capacity, allocatable
}

// Conditions are the node's Ready, MemoryPressure, DiskPressure and
// PIDPressure, with the kubelet's reasons and messages (tools match on
// them), computed from m against the eviction thresholds (those eviction
// acts on: --eviction-hard) of a machine of memoryCapacity bytes. Times
// are left zero: mergeConditions sets them.
func Conditions(m Measurements, thresholds []Threshold, memoryCapacity uint64) []v1.NodeCondition {
	cond := func(t v1.NodeConditionType, pressure bool, yesReason, yesMsg, noReason, noMsg string) v1.NodeCondition {
		if pressure {
			return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: yesReason, Message: yesMsg}
		}
		return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: noReason, Message: noMsg}
	}
	var memory, disk bool
	for _, t := range thresholdsMet(m, thresholds, memoryCapacity) {
		if t.Signal == SignalMemoryAvailable {
			memory = true
		} else {
			disk = true
		}
	}
	pids := m.PIDMax > 0 && (m.PIDMax-min(m.PIDsInUse, m.PIDMax))*100 < m.PIDMax*PIDAvailablePct
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "podrun is posting ready status"}
	if m.RuntimeErr != nil {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: m.RuntimeErr.Error()}
	}
	return []v1.NodeCondition{
		cond(v1.NodeMemoryPressure, memory, "KubeletHasInsufficientMemory", "node has insufficient memory available",
			"KubeletHasSufficientMemory", "node has sufficient memory available"),
		cond(v1.NodeDiskPressure, disk, "KubeletHasDiskPressure", "node has disk pressure",
			"KubeletHasNoDiskPressure", "node has no disk pressure"),
		cond(v1.NodePIDPressure, pids, "KubeletHasInsufficientPID", "node has insufficient PID available",
			"KubeletHasSufficientPID", "node has sufficient PID available"),
		ready,
	}
}

// mergeConditions puts want into have's conditions: a condition whose
// status changed gets now as its transition time; every one of want gets
// now as its heartbeat. Conditions of other types (set by others, e.g.
// NetworkUnavailable) are kept.
func mergeConditions(have []v1.NodeCondition, want []v1.NodeCondition, now metav1.Time) []v1.NodeCondition {
	out := make([]v1.NodeCondition, 0, len(have)+len(want))
	mine := map[v1.NodeConditionType]bool{}
	for _, w := range want {
		mine[w.Type] = true
	}
	old := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, h := range have {
		if !mine[h.Type] {
			out = append(out, h)
			continue
		}
		old[h.Type] = h
	}
	for _, w := range want {
		w.LastHeartbeatTime = now
		w.LastTransitionTime = now
		if h, ok := old[w.Type]; ok && h.Status == w.Status {
			w.LastTransitionTime = h.LastTransitionTime
		}
		out = append(out, w)
	}
	return out
}

// sameConditions reports whether a and b say the same, times aside.
func sameConditions(a, b []v1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason || a[i].Message != b[i].Message {
			return false
		}
	}
	return true
}
