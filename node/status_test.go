package node

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func condition(cs []v1.NodeCondition, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}

func TestConditionsFromMeasurements(t *testing.T) {
	roomy := Filesystem{CapacityBytes: 100 << 30, AvailableBytes: 50 << 30}
	healthy := Measurements{MemoryAvailableBytes: 4 << 30, NodeFS: roomy, ImageFS: roomy, PIDsInUse: 300, PIDMax: 32768}
	tests := []struct {
		name string
		edit func(*Measurements)
		want map[v1.NodeConditionType]v1.ConditionStatus
	}{
		{"healthy", func(*Measurements) {}, map[v1.NodeConditionType]v1.ConditionStatus{
			v1.NodeReady: v1.ConditionTrue, v1.NodeMemoryPressure: v1.ConditionFalse,
			v1.NodeDiskPressure: v1.ConditionFalse, v1.NodePIDPressure: v1.ConditionFalse}},
		{"memory under 100Mi", func(m *Measurements) { m.MemoryAvailableBytes = 99 << 20 },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeMemoryPressure: v1.ConditionTrue, v1.NodeReady: v1.ConditionTrue}},
		{"nodefs under 10%", func(m *Measurements) { m.NodeFS.AvailableBytes = 9 << 30 },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeDiskPressure: v1.ConditionTrue}},
		{"imagefs under 15%", func(m *Measurements) { m.ImageFS.AvailableBytes = 14 << 30 },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeDiskPressure: v1.ConditionTrue}},
		{"imagefs at 15% exactly", func(m *Measurements) { m.ImageFS.AvailableBytes = 15 << 30 },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeDiskPressure: v1.ConditionFalse}},
		{"pids nearly out", func(m *Measurements) { m.PIDsInUse = 32000 },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodePIDPressure: v1.ConditionTrue}},
		{"runtime down", func(m *Measurements) { m.RuntimeErr = errors.New("container runtime is down") },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeReady: v1.ConditionFalse}},
		{"unmeasured is no pressure", func(m *Measurements) { *m = Measurements{} },
			map[v1.NodeConditionType]v1.ConditionStatus{v1.NodeMemoryPressure: v1.ConditionFalse,
				v1.NodeDiskPressure: v1.ConditionFalse, v1.NodePIDPressure: v1.ConditionFalse}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := healthy
			tt.edit(&m)
			defaults, _ := ParseThresholds(DefaultEvictionHard)
			cs := Conditions(m, defaults, 8<<30)
			if len(cs) != 4 {
				t.Fatalf("want 4 conditions, got %d", len(cs))
			}
			for typ, want := range tt.want {
				if got := condition(cs, typ); got.Status != want {
					t.Errorf("%s: %s (%s), want %s", typ, got.Status, got.Message, want)
				}
			}
		})
	}
	if c := condition(Conditions(Measurements{RuntimeErr: errors.New("dockerd gone")}, nil, 0), v1.NodeReady); c.Message != "dockerd gone" || c.Reason != "KubeletNotReady" {
		t.Errorf("not ready condition %+v", c)
	}
}

func TestMergeConditionsKeepsOthersAndTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	have := []v1.NodeCondition{
		{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, LastTransitionTime: t0},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: t0, LastHeartbeatTime: t0},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, LastTransitionTime: t0},
	}
	want := []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}, {Type: v1.NodeDiskPressure, Status: v1.ConditionTrue}}
	got := mergeConditions(have, want, t1)
	if c := condition(got, v1.NodeNetworkUnavailable); c.Type == "" {
		t.Error("a condition another component owns was dropped")
	}
	if c := condition(got, v1.NodeReady); !c.LastTransitionTime.Equal(&t0) || !c.LastHeartbeatTime.Equal(&t1) {
		t.Errorf("unchanged Ready: transition %v heartbeat %v", c.LastTransitionTime, c.LastHeartbeatTime)
	}
	if c := condition(got, v1.NodeDiskPressure); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("changed DiskPressure kept transition time %v", c.LastTransitionTime)
	}
	if sameConditions(condsOf(got, v1.NodeReady, v1.NodeDiskPressure), condsOf(have, v1.NodeReady, v1.NodeDiskPressure)) {
		t.Error("sameConditions missed a status change")
	}
}

func condsOf(cs []v1.NodeCondition, types ...v1.NodeConditionType) []v1.NodeCondition {
	var out []v1.NodeCondition
	for _, t := range types {
		out = append(out, condition(cs, t))
	}
	return out
}

func TestResourcesLessEvictionThresholds(t *testing.T) {
	f := &Facts{CPUs: 2, MemoryBytes: 24 << 30}
	defaults, _ := ParseThresholds(DefaultEvictionHard)
	capacity, alloc := Resources(f, Filesystem{CapacityBytes: 100 << 30}, 0, defaults)
	if got := capacity.Cpu().Value(); got != 2 {
		t.Errorf("cpu %d", got)
	}
	if got := capacity.Pods().Value(); got != DefaultMaxPods {
		t.Errorf("pods %d", got)
	}
	if got := alloc.Memory().Value(); got != 24<<30-100<<20 {
		t.Errorf("allocatable memory %d", got)
	}
	if got := alloc.StorageEphemeral().Value(); got != 90<<30 {
		t.Errorf("allocatable ephemeral-storage %d", got)
	}
	// Other thresholds (--eviction-hard) leave other amounts aside.
	custom, _ := ParseThresholds("memory.available<1Gi,nodefs.available<20Gi")
	_, alloc = Resources(f, Filesystem{CapacityBytes: 100 << 30}, 0, custom)
	if m, e := alloc.Memory().Value(), alloc.StorageEphemeral().Value(); m != 23<<30 || e != 80<<30 {
		t.Errorf("with %v: allocatable memory %d, ephemeral-storage %d", custom, m, e)
	}
	if cs := Conditions(Measurements{MemoryAvailableBytes: 512 << 20}, custom, 24<<30); condition(cs, v1.NodeMemoryPressure).Status != v1.ConditionTrue {
		t.Errorf("512Mi available under memory.available<1Gi: no MemoryPressure")
	}
}

func TestMemAvailable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	os.WriteFile(p, []byte("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n"), 0o644)
	got, err := memAvailable(p)
	if err != nil || got != 2048<<10 {
		t.Fatalf("got %d, %v", got, err)
	}
	os.WriteFile(p, []byte("MemTotal: 1 kB\n"), 0o644)
	if _, err := memAvailable(p); err == nil {
		t.Fatal("no MemAvailable line: want an error")
	}
}

// TestStatusReportsDeclaredExtendedResources: what --extended-resource
// declares is in the node's capacity and allocatable, as a device
// plugin's resources are, so that the scheduler may place pods asking
// for it; nothing undeclared is.
func TestStatusReportsDeclaredExtendedResources(t *testing.T) {
	a := &Agent{cfg: AgentConfig{Facts: &Facts{CPUs: 2, MemoryBytes: 4 << 30},
		ExtendedResources: map[v1.ResourceName]int64{"example.com/dongle": 3}}}
	s := a.status(Measurements{NodeFS: Filesystem{CapacityBytes: 10 << 30}}, nil, time.Now())
	for what, list := range map[string]v1.ResourceList{"capacity": s.Capacity, "allocatable": s.Allocatable} {
		if q, ok := list["example.com/dongle"]; !ok || q.Value() != 3 {
			t.Errorf("%s example.com/dongle = %v (%v), want 3", what, q.String(), ok)
		}
		if _, ok := list["nvidia.com/gpu"]; ok {
			t.Errorf("%s has nvidia.com/gpu, which nothing declared", what)
		}
	}
}
