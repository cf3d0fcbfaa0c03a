package node

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
)

// Eviction signals podrun measures, as the kubelet names them.
const (
	SignalMemoryAvailable  = "memory.available"
	SignalNodeFSAvailable  = "nodefs.available"
	SignalImageFSAvailable = "imagefs.available"
)

// DefaultEvictionHard is the kubelet's default --eviction-hard.
const DefaultEvictionHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%"

// ReasonEvicted is the reason of a pod evicted for node pressure.
const ReasonEvicted = "Evicted"

// Threshold is one hard eviction threshold: the signal is under pressure
// when what is available falls below Quantity, or below Percentage of the
// capacity.
type Threshold struct {
	Signal     string
	Quantity   *resource.Quantity
	Percentage int // of the capacity, when Quantity is nil
}

func (t Threshold) String() string {
	if t.Quantity != nil {
		return t.Signal + "<" + t.Quantity.String()
	}
	return t.Signal + "<" + strconv.Itoa(t.Percentage) + "%"
}

// min is the threshold in bytes for a capacity.
func (t Threshold) min(capacity uint64) uint64 {
	if t.Quantity != nil {
		return uint64(max(t.Quantity.Value(), 0))
	}
	return capacity * uint64(t.Percentage) / 100
}

// ParseThresholds parses --eviction-hard: signal<quantity or signal<N%,
// comma separated, as the kubelet's flag. An empty string is no
// threshold (eviction off).
func ParseThresholds(s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		signal, value, ok := strings.Cut(part, "<")
		if !ok {
			return nil, fmt.Errorf("eviction threshold %q: want signal<quantity or signal<percentage%%", part)
		}
		switch signal {
		case SignalMemoryAvailable, SignalNodeFSAvailable, SignalImageFSAvailable:
		default:
			return nil, fmt.Errorf("eviction threshold %q: signal %q is not one podrun measures (%s, %s, %s)",
				part, signal, SignalMemoryAvailable, SignalNodeFSAvailable, SignalImageFSAvailable)
		}
		if seen[signal] {
			return nil, fmt.Errorf("eviction threshold %q: %s given twice", part, signal)
		}
		seen[signal] = true
		t := Threshold{Signal: signal}
		if pct, isPct := strings.CutSuffix(value, "%"); isPct {
			n, err := strconv.Atoi(pct)
			if err != nil || n < 0 || n > 100 {
				return nil, fmt.Errorf("eviction threshold %q: percentage %q: want 0 to 100", part, value)
			}
			t.Percentage = n
		} else {
			q, err := resource.ParseQuantity(value)
			if err != nil || q.Sign() < 0 {
				return nil, fmt.Errorf("eviction threshold %q: quantity %q: want a non-negative quantity such as 100Mi", part, value)
			}
			t.Quantity = &q
		}
		out = append(out, t)
	}
	return out, nil
}

// PodEvictor is what eviction needs of the sync core.
type PodEvictor interface {
	// Pods are the pods the core holds, with their last status.
	Pods() []*v1.Pod
	// Evict stops the pod and keeps it Failed with reason Evicted and the
	// message until its spec changes.
	Evict(uid types.UID, message string) bool
}

// EvictionConfig are an EvictionManager's dependencies.
type EvictionConfig struct {
	Thresholds []Threshold
	// Measure reads the node's memory and filesystems (MeasureNode).
	Measure func() (Measurements, error)
	// MemoryCapacity is the machine's memory, for percentage thresholds.
	MemoryCapacity uint64
	Pods           PodEvictor
	// Stats measures containers' memory for the ranking, and their disk
	// for ephemeral-storage limits; nil ranks without usage (priority,
	// then QoS) and enforces no container limit.
	Stats engine.StatsProvider
	// EmptyDirUsage measures a pod's emptyDir volumes on disk, by name;
	// nil enforces no emptyDir sizeLimit.
	EmptyDirUsage func(pod *v1.Pod) map[string]uint64
	// Reclaim frees what the node can without evicting (dead containers,
	// unused images), tried under disk pressure before a pod is evicted,
	// as the kubelet reclaims node-level resources first; nil: none.
	Reclaim func(ctx context.Context)
	// Period is how often the node is looked at (the kubelet's 10 s).
	Period time.Duration
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// EvictionManager evicts pods when the node runs short of memory or disk,
// as the kubelet's eviction manager does with hard thresholds: at most one
// pod per period, chosen by the kubelet's ranking (pods using more memory,
// or local storage, than they request first, then lower priority, then
// the larger use beyond the request). Critical pods (priority at
// system-cluster-critical or above) are never evicted.
//
// The kubelet never evicts static pods at all; every file pod of podrun is
// a static pod, so podrun evicts them too except the critical ones: on a
// box without a cluster the static pods are all there is to free memory
// from.
type EvictionManager struct {
	cfg EvictionConfig

	mu       sync.Mutex
	pressure map[string]bool // signals under pressure at the last look
}

// NewEvictionManager returns a manager; Run starts it.
func NewEvictionManager(cfg EvictionConfig) *EvictionManager {
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &EvictionManager{cfg: cfg, pressure: map[string]bool{}}
}

// Run looks at the node every period until ctx ends.
func (m *EvictionManager) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		m.Synchronize(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// UnderPressure reports whether signal was under pressure at the last look.
func (m *EvictionManager) UnderPressure(signal string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pressure[signal]
}

// Synchronize looks at the node once: it evicts the pods over their local
// storage limits, or else at most one pod for node pressure. It returns
// the first pod evicted, if any.
func (m *EvictionManager) Synchronize(ctx context.Context) *v1.Pod {
	if evicted := m.localStorageEviction(ctx); len(evicted) > 0 {
		return evicted[0]
	}
	if len(m.cfg.Thresholds) == 0 {
		return nil
	}
	meas, err := m.cfg.Measure()
	if err != nil {
		m.cfg.Log.Warn("eviction: measure the node", "err", err)
	}
	met := m.thresholdsMet(meas)
	m.mu.Lock()
	for _, t := range m.cfg.Thresholds {
		was := m.pressure[t.Signal]
		now := slices.ContainsFunc(met, func(x metThreshold) bool { return x.Signal == t.Signal })
		if now != was {
			m.cfg.Log.Info("eviction: pressure changed", "signal", t.Signal, "pressure", now)
		}
		m.pressure[t.Signal] = now
	}
	m.mu.Unlock()
	if len(met) == 0 {
		return nil
	}
	first := met[0]
	if first.Signal != SignalMemoryAvailable && m.cfg.Reclaim != nil {
		m.cfg.Reclaim(ctx)
		again, err := m.cfg.Measure()
		if err != nil {
			m.cfg.Log.Warn("eviction: measure the node after reclaim", "err", err)
		}
		if met = thresholdsMet(again, m.cfg.Thresholds, m.cfg.MemoryCapacity); len(met) == 0 {
			m.cfg.Log.Info("eviction: disk pressure relieved by garbage collection", "signal", first.Signal)
			return nil
		}
		first = met[0]
	}
	candidates := evictable(m.cfg.Pods.Pods())
	if len(candidates) == 0 {
		m.cfg.Log.Warn("eviction: under pressure and no pod may be evicted", "signal", first.Signal,
			"threshold", first.Threshold.String(), "available", bytesString(first.available))
		return nil
	}
	var usage map[types.UID]podUsage // memory, by container, for the message
	if first.Signal == SignalMemoryAvailable {
		usage = m.memoryUsage(ctx, candidates)
		total := map[types.UID]uint64{}
		for uid, u := range usage {
			total[uid] = u.total()
		}
		rankByUse(candidates, total, v1.ResourceMemory)
	} else {
		rankByUse(candidates, m.diskUsage(ctx, candidates), v1.ResourceEphemeralStorage)
	}
	for _, pod := range candidates {
		msg := evictionMessage(first, pod, usage)
		if m.cfg.Pods.Evict(pod.UID, msg) {
			m.cfg.Log.Warn("eviction: pod evicted", "pod", pod.Namespace+"/"+pod.Name, "signal", first.Signal,
				"threshold", first.Threshold.String(), "available", bytesString(first.available))
			return pod
		}
	}
	return nil
}

type metThreshold struct {
	Threshold
	available uint64
}

// thresholdsMet are the thresholds crossed, memory first.
func (m *EvictionManager) thresholdsMet(meas Measurements) []metThreshold {
	return thresholdsMet(meas, m.cfg.Thresholds, m.cfg.MemoryCapacity)
}

// thresholdsMet are the thresholds meas crosses, memory first; the
// machine has memoryCapacity bytes (for a percentage of memory).
func thresholdsMet(meas Measurements, thresholds []Threshold, memoryCapacity uint64) []metThreshold {
	var out []metThreshold
	for _, t := range thresholds {
		var avail, capacity uint64
		switch t.Signal {
		case SignalMemoryAvailable:
			avail, capacity = meas.MemoryAvailableBytes, memoryCapacity
		case SignalNodeFSAvailable:
			avail, capacity = meas.NodeFS.AvailableBytes, meas.NodeFS.CapacityBytes
		case SignalImageFSAvailable:
			avail, capacity = meas.ImageFS.AvailableBytes, meas.ImageFS.CapacityBytes
		}
		// A reading that failed is zero: not pressure. (No host has no
		// memory available at all, nor a filesystem of no size.)
		if (t.Signal == SignalMemoryAvailable && avail == 0) || (t.Signal != SignalMemoryAvailable && capacity == 0) ||
			(capacity == 0 && t.Quantity == nil) {
			continue
		}
		if avail < t.min(capacity) {
			out = append(out, metThreshold{Threshold: t, available: avail})
		}
	}
	slices.SortStableFunc(out, func(a, b metThreshold) int {
		return boolCmp(a.Signal != SignalMemoryAvailable, b.Signal != SignalMemoryAvailable)
	})
	return out
}

// addUsage is a+b, or the most a uint64 holds when that overflows: an
// emptyDir too deep to measure counts as math.MaxUint64 (runner's
// unmeasuredUsage), and a sum that wrapped around would hide it again.
func addUsage(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// podUsage is a pod's measured memory working set, by container name.
type podUsage map[string]uint64

func (u podUsage) total() uint64 {
	var n uint64
	for _, v := range u {
		n += v
	}
	return n
}

// memoryUsage measures the running containers of pods, by pod UID.
func (m *EvictionManager) memoryUsage(ctx context.Context, pods []*v1.Pod) map[types.UID]podUsage {
	out := map[types.UID]podUsage{}
	if m.cfg.Stats == nil {
		return out
	}
	for _, pod := range pods {
		u := podUsage{}
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			if cs.State.Running == nil || cs.ContainerID == "" {
				continue
			}
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			st, err := m.cfg.Stats.ContainerStats(ctx, id)
			if err != nil {
				continue // gone meanwhile, or not measurable: counts as nothing
			}
			u[cs.Name] = st.MemoryWorkingSetBytes
		}
		out[pod.UID] = u
	}
	return out
}

// evictable are the pods that run and may be evicted.
func evictable(pods []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		if p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded || p.DeletionTimestamp != nil {
			continue
		}
		if podPriority(p) >= scheduling.SystemCriticalPriority {
			continue
		}
		out = append(out, p)
	}
	return out
}

// podPriority is the pod's priority: spec.priority, else that of its
// system priority class (a static pod's priority is never resolved by an
// API server), else 0.
func podPriority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	switch p.Spec.PriorityClassName {
	case scheduling.SystemNodeCritical:
		return scheduling.SystemCriticalPriority + 1000
	case scheduling.SystemClusterCritical:
		return scheduling.SystemCriticalPriority
	}
	return 0
}

// diskUsage measures the local storage each pod uses: its containers'
// writable layers and logs, and its emptyDirs on disk, by pod UID.
func (m *EvictionManager) diskUsage(ctx context.Context, pods []*v1.Pod) map[types.UID]uint64 {
	out := map[types.UID]uint64{}
	for _, pod := range pods {
		var n uint64
		if m.cfg.EmptyDirUsage != nil {
			for _, v := range m.cfg.EmptyDirUsage(pod) {
				n = addUsage(n, v)
			}
		}
		if m.cfg.Stats != nil {
			for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
				if cs.ContainerID == "" {
					continue
				}
				_, id, _ := strings.Cut(cs.ContainerID, "://")
				if u, err := m.cfg.Stats.ContainerDiskUsage(ctx, id); err == nil {
					n = addUsage(n, addUsage(u.WritableLayerBytes, u.LogBytes))
				}
			}
		}
		out[pod.UID] = n
	}
	return out
}

// rankByUse orders pods as the kubelet ranks them under memory or disk
// pressure (rankMemoryPressure, rankDiskPressureFunc): those using more of
// the resource than they request first (a pod requesting none does as
// soon as it uses any), then by priority (lower first), then by use
// beyond the request (larger first). usage is by pod UID.
func rankByUse(pods []*v1.Pod, usage map[types.UID]uint64, resource v1.ResourceName) {
	excess := make(map[types.UID]int64, len(pods))
	for _, p := range pods {
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[resource]
		excess[p.UID] = int64(usage[p.UID]) - max(q.Value(), 0)
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		ea, eb := excess[a.UID], excess[b.UID]
		if c := boolCmp(ea <= 0, eb <= 0); c != 0 {
			return c
		}
		if c := cmp.Compare(podPriority(a), podPriority(b)); c != 0 {
			return c
		}
		return cmp.Compare(eb, ea)
	})
}

// evictionMessage says why, as the kubelet's does.
func evictionMessage(t metThreshold, pod *v1.Pod, usage map[types.UID]podUsage) string {
	resourceName := "memory"
	if t.Signal != SignalMemoryAvailable {
		resourceName = "ephemeral-storage"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. Threshold quantity: %s, available: %s. ",
		resourceName, thresholdQuantity(t.Threshold), bytesString(t.available))
	if t.Signal == SignalMemoryAvailable {
		u := usage[pod.UID]
		for _, c := range pod.Spec.Containers {
			if used, ok := u[c.Name]; ok {
				req := c.Resources.Requests[v1.ResourceMemory]
				fmt.Fprintf(&b, "Container %s was using %s, request is %s. ", c.Name, bytesString(used), req.String())
			}
		}
	}
	return strings.TrimSpace(b.String())
}

func thresholdQuantity(t Threshold) string {
	if t.Quantity != nil {
		return t.Quantity.String()
	}
	return strconv.Itoa(t.Percentage) + "%"
}

func bytesString(n uint64) string {
	return resource.NewQuantity(int64(n), resource.BinarySI).String()
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// localStorageEviction evicts, as the kubelet's, every pod that uses more
// local storage than it may: an emptyDir on disk beyond its sizeLimit, a
// container beyond its ephemeral-storage limit (its writable layer and
// logs), or the pod beyond the sum of its containers' limits (their use
// and its emptyDirs), when every container has one. Critical pods are
// not evicted.
func (m *EvictionManager) localStorageEviction(ctx context.Context) []*v1.Pod {
	var evicted []*v1.Pod
	for _, pod := range evictable(m.cfg.Pods.Pods()) {
		msg := m.localStorageViolation(ctx, pod)
		if msg == "" {
			continue
		}
		if m.cfg.Pods.Evict(pod.UID, msg) {
			m.cfg.Log.Warn("eviction: pod over its local storage limit evicted", "pod", pod.Namespace+"/"+pod.Name, "why", msg)
			evicted = append(evicted, pod)
		}
	}
	return evicted
}

// localStorageViolation says how pod exceeds its local storage limits, in
// the kubelet's words, or "".
func (m *EvictionManager) localStorageViolation(ctx context.Context, pod *v1.Pod) string {
	var volumes map[string]uint64
	if m.cfg.EmptyDirUsage != nil && (hasSizeLimitedEmptyDir(pod) || podEphemeralLimit(pod) != nil) {
		volumes = m.cfg.EmptyDirUsage(pod)
	}
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.Medium == v1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.IsZero() {
			continue
		}
		if used, ok := volumes[vol.Name]; ok && used > uint64(ed.SizeLimit.Value()) {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", vol.Name, ed.SizeLimit.String())
		}
	}
	if m.cfg.Stats == nil {
		return ""
	}
	var podUsed uint64
	for _, v := range volumes {
		podUsed = addUsage(podUsed, v)
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		c := findContainer(pod, cs.Name)
		limit, limited := v1.ResourceList(nil), false
		if c != nil {
			limit = c.Resources.Limits
			_, limited = limit[v1.ResourceEphemeralStorage]
		}
		if cs.ContainerID == "" || (!limited && podEphemeralLimit(pod) == nil) {
			continue
		}
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		u, err := m.cfg.Stats.ContainerDiskUsage(ctx, id)
		if err != nil {
			continue
		}
		used := addUsage(u.WritableLayerBytes, u.LogBytes)
		podUsed = addUsage(podUsed, used)
		if q, ok := limit[v1.ResourceEphemeralStorage]; ok && used > uint64(max(q.Value(), 0)) {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q.", cs.Name, q.String())
		}
	}
	if total := podEphemeralLimit(pod); total != nil && podUsed > uint64(max(total.Value(), 0)) {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s.", total.String())
	}
	return ""
}

func hasSizeLimitedEmptyDir(pod *v1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.Volumes, func(v v1.Volume) bool {
		return v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil
	})
}

// podEphemeralLimit is the sum of the app containers' ephemeral-storage
// limits when each has one, as the kubelet's pod-level check; nil
// otherwise.
func podEphemeralLimit(pod *v1.Pod) *resource.Quantity {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	total := resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok {
			return nil
		}
		total.Add(q)
	}
	return &total
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}
