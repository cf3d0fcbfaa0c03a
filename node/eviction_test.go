package node

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/engine"
)

func TestParseThresholds(t *testing.T) {
	got, err := ParseThresholds(DefaultEvictionHard)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].String() != "memory.available<100Mi" || got[1].String() != "nodefs.available<10%" ||
		got[2].String() != "imagefs.available<15%" {
		t.Errorf("default thresholds %v", got)
	}
	if got, err := ParseThresholds(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"memory.available", "memory.available<lots", "memory.available<-1Mi",
		"nodefs.available<101%", "pid.available<10%", "memory.available<1Mi,memory.available<2Mi"} {
		if _, err := ParseThresholds(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// fakeEvictor records evictions; evicted pods leave its list.
type fakeEvictor struct {
	pods    []*v1.Pod
	evicted []string
	message string
}

func (f *fakeEvictor) Pods() []*v1.Pod { return f.pods }

func (f *fakeEvictor) Evict(uid types.UID, message string) bool {
	for i, p := range f.pods {
		if p.UID == uid {
			f.evicted = append(f.evicted, p.Name)
			f.message = message
			f.pods = append(f.pods[:i], f.pods[i+1:]...)
			return true
		}
	}
	return false
}

// fakeStats measures each container (by ID) at its memory, and at its
// memory as bytes written too.
type fakeStats map[string]uint64

func (s fakeStats) ContainerStats(_ context.Context, id string) (*engine.ContainerStats, error) {
	return &engine.ContainerStats{MemoryWorkingSetBytes: s[id]}, nil
}

func (s fakeStats) ContainerDiskUsage(_ context.Context, id string) (*engine.DiskUsage, error) {
	return &engine.DiskUsage{WritableLayerBytes: s[id] / 2, LogBytes: s[id] - s[id]/2}, nil
}

// evictionPod is a running pod of one container "c" (ID = name) with a
// memory request and limit ("" for none) and a priority.
func evictionPod(name, request, limit string, priority int32) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.Spec.Priority = &priority
	c := v1.Container{Name: "c"}
	if request != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(request), v1.ResourceCPU: resource.MustParse("100m")}
	}
	if limit != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(limit), v1.ResourceCPU: resource.MustParse("100m")}
	}
	p.Spec.Containers = []v1.Container{c}
	p.Status.Phase = v1.PodRunning
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", ContainerID: "docker://" + name,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	return p
}

// TestEvictionRanksAsTheKubelet: under memory pressure one pod is evicted
// per look: pods over their request first (BestEffort uses more than its
// zero request), then lower priority, then the larger excess; a critical
// pod never.
func TestEvictionRanksAsTheKubelet(t *testing.T) {
	pods := &fakeEvictor{pods: []*v1.Pod{
		evictionPod("etcd", "100Mi", "100Mi", 2000001000),    // critical, Guaranteed, over its request
		evictionPod("guaranteed", "200Mi", "200Mi", 0),       // under its request
		evictionPod("burstable-big", "10Mi", "", 0),          // 90Mi over
		evictionPod("besteffort", "", "", 0),                 // 50Mi over
		evictionPod("burstable-important", "10Mi", "", 1000), // over, higher priority
	}}
	stats := fakeStats{"etcd": 150 << 20, "guaranteed": 100 << 20, "burstable-big": 100 << 20,
		"besteffort": 50 << 20, "burstable-important": 500 << 20}
	avail := uint64(50 << 20)
	thresholds, _ := ParseThresholds("memory.available<100Mi")
	m := NewEvictionManager(EvictionConfig{
		Thresholds:     thresholds,
		Measure:        func() (Measurements, error) { return Measurements{MemoryAvailableBytes: avail}, nil },
		MemoryCapacity: 1 << 30,
		Pods:           pods,
		Stats:          stats,
	})
	for range 5 {
		m.Synchronize(context.Background())
	}
	want := "burstable-big besteffort burstable-important guaranteed"
	if got := strings.Join(pods.evicted, " "); got != want {
		t.Errorf("evicted in order %q, want %q", got, want)
	}
	if !m.UnderPressure(SignalMemoryAvailable) {
		t.Error("not under memory pressure")
	}
	if !strings.Contains(pods.message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.") {
		t.Errorf("message %q", pods.message)
	}

	// Pressure gone: nothing more is evicted.
	avail = 1 << 30
	pods.pods = append(pods.pods, evictionPod("late", "", "", 0))
	if p := m.Synchronize(context.Background()); p != nil || m.UnderPressure(SignalMemoryAvailable) {
		t.Errorf("without pressure: evicted %v", p)
	}
}

// TestDiskEvictionRanksAsTheKubelet: under nodefs pressure, pods using
// more local storage than they request first, then lower priority, then
// the larger use beyond the request.
func TestDiskEvictionRanksAsTheKubelet(t *testing.T) {
	withRequest := func(name, request string, priority int32) *v1.Pod {
		p := evictionPod(name, "", "", priority)
		if request != "" {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(request)}
		}
		return p
	}
	pods := &fakeEvictor{pods: []*v1.Pod{
		withRequest("within", "100Mi", 0),   // 10Mi written, under its request
		withRequest("small", "", 0),         // 1Mi over
		withRequest("big", "", 0),           // 20Mi over
		withRequest("important", "", 100),   // 50Mi over, higher priority
		withRequest("big-volume", "1Mi", 0), // 1Mi written + 30Mi emptyDir: 30Mi over
	}}
	stats := fakeStats{"within": 10 << 20, "small": 1 << 20, "big": 20 << 20, "important": 50 << 20, "big-volume": 1 << 20}
	thresholds, _ := ParseThresholds("nodefs.available<10%")
	m := NewEvictionManager(EvictionConfig{
		Thresholds: thresholds,
		Measure: func() (Measurements, error) {
			return Measurements{MemoryAvailableBytes: 1 << 30, NodeFS: Filesystem{CapacityBytes: 100, AvailableBytes: 5}}, nil
		},
		Pods:  pods,
		Stats: stats,
		EmptyDirUsage: func(p *v1.Pod) map[string]uint64 {
			if p.Name == "big-volume" {
				return map[string]uint64{"scratch": 30 << 20}
			}
			return nil
		},
	})
	for range 5 {
		m.Synchronize(context.Background())
	}
	if got, want := strings.Join(pods.evicted, " "), "big-volume big small important within"; got != want {
		t.Errorf("evicted in order %q, want %q", got, want)
	}
	if !strings.Contains(pods.message, "low on resource: ephemeral-storage") {
		t.Errorf("message %q", pods.message)
	}
}

// TestLocalStorageEviction: every pod over an emptyDir sizeLimit, a
// container's ephemeral-storage limit, or its containers' limits together
// is evicted at the next look, with the kubelet's message, pressure or
// not; a pod within its limits is not.
func TestLocalStorageEviction(t *testing.T) {
	withEmptyDir := func(name, limit string) *v1.Pod {
		p := evictionPod(name, "", "", 0)
		q := resource.MustParse(limit)
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &q}}}}
		return p
	}
	withLimit := func(name, limit string) *v1.Pod {
		p := evictionPod(name, "", "", 0)
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
		return p
	}
	pods := &fakeEvictor{pods: []*v1.Pod{
		withEmptyDir("dir-over", "1Mi"), withEmptyDir("dir-within", "10Mi"),
		withLimit("ctr-over", "1Mi"), withLimit("ctr-within", "10Mi"),
	}}
	critical := withLimit("critical-over", "1Mi")
	critical.Spec.Priority = nil
	critical.Spec.PriorityClassName = "system-cluster-critical"
	pods.pods = append(pods.pods, critical)
	stats := fakeStats{"ctr-over": 2 << 20, "ctr-within": 2 << 20, "critical-over": 2 << 20}
	m := NewEvictionManager(EvictionConfig{
		Thresholds: []Threshold{{Signal: SignalMemoryAvailable, Percentage: 0}},
		Measure:    func() (Measurements, error) { return Measurements{MemoryAvailableBytes: 1 << 30}, nil },
		Pods:       pods,
		Stats:      stats,
		EmptyDirUsage: func(p *v1.Pod) map[string]uint64 {
			return map[string]uint64{"scratch": 2 << 20}
		},
	})
	m.Synchronize(context.Background())
	if got, want := strings.Join(pods.evicted, " "), "dir-over ctr-over"; got != want {
		t.Errorf("evicted %q, want %q", got, want)
	}
	if want := `Container c exceeded its local ephemeral storage limit "1Mi".`; pods.message != want {
		t.Errorf("message %q, want %q", pods.message, want)
	}
}

// TestUnmeasuredEmptyDirIsOverTheLimit: an emptyDir too deep to measure
// counts as math.MaxUint64 (runner's unmeasuredUsage); added to another
// volume's few bytes it must not wrap around to a pod within its limit.
func TestUnmeasuredEmptyDirIsOverTheLimit(t *testing.T) {
	p := evictionPod("deep", "", "", 0)
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	p.Spec.Volumes = []v1.Volume{
		{Name: "deep", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "small", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pods := &fakeEvictor{pods: []*v1.Pod{p}}
	m := NewEvictionManager(EvictionConfig{
		Thresholds: []Threshold{{Signal: SignalMemoryAvailable, Percentage: 0}},
		Measure:    func() (Measurements, error) { return Measurements{MemoryAvailableBytes: 1 << 30}, nil },
		Pods:       pods,
		Stats:      fakeStats{"deep": 0},
		EmptyDirUsage: func(*v1.Pod) map[string]uint64 {
			return map[string]uint64{"deep": math.MaxUint64, "small": 2}
		},
	})
	m.Synchronize(context.Background())
	if got := strings.Join(pods.evicted, " "); got != "deep" {
		t.Errorf("evicted %q, want the pod whose emptyDir could not be measured", got)
	}
}

// TestFailedMeasurementIsNoPressure: a reading that failed (zeros and an
// error) evicts nothing, whatever the thresholds.
func TestFailedMeasurementIsNoPressure(t *testing.T) {
	thresholds, _ := ParseThresholds("memory.available<100Mi,nodefs.available<1Gi,imagefs.available<15%")
	pods := &fakeEvictor{pods: []*v1.Pod{evictionPod("besteffort", "", "", 0)}}
	m := NewEvictionManager(EvictionConfig{
		Thresholds: thresholds,
		Measure:    func() (Measurements, error) { return Measurements{}, errors.New("no /proc/meminfo") },
		Pods:       pods,
	})
	if p := m.Synchronize(context.Background()); p != nil || len(pods.evicted) != 0 {
		t.Errorf("a failed measurement evicted %v", pods.evicted)
	}
}

// TestDiskPressureReclaimsFirst: under disk pressure the node's garbage
// is collected first; a pod is evicted only if that does not relieve it.
func TestDiskPressureReclaimsFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		freed      uint64
		wantEvicts int
	}{{"reclaim relieves", 50, 0}, {"reclaim does not", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &fakeEvictor{pods: []*v1.Pod{evictionPod("besteffort", "", "", 0)}}
			avail := uint64(5)
			reclaims := 0
			thresholds, _ := ParseThresholds("nodefs.available<10%")
			m := NewEvictionManager(EvictionConfig{
				Thresholds: thresholds,
				Measure: func() (Measurements, error) {
					return Measurements{MemoryAvailableBytes: 1 << 30, NodeFS: Filesystem{CapacityBytes: 100, AvailableBytes: avail}}, nil
				},
				Pods:    pods,
				Reclaim: func(context.Context) { reclaims++; avail += tc.freed },
			})
			m.Synchronize(context.Background())
			if reclaims != 1 || len(pods.evicted) != tc.wantEvicts {
				t.Errorf("reclaimed %d times, evicted %v; want once and %d evictions", reclaims, pods.evicted, tc.wantEvicts)
			}
		})
	}
}
