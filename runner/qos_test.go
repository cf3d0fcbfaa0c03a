package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const gib = int64(1) << 30

// res is requests (and limits, when given) of cpu and memory.
func res(reqCPU, reqMem, limCPU, limMem string) v1.ResourceRequirements {
	var r v1.ResourceRequirements
	add := func(l *v1.ResourceList, name v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	add(&r.Requests, v1.ResourceCPU, reqCPU)
	add(&r.Requests, v1.ResourceMemory, reqMem)
	add(&r.Limits, v1.ResourceCPU, limCPU)
	add(&r.Limits, v1.ResourceMemory, limMem)
	return r
}

func qosPod(source string, resources ...v1.ResourceRequirements) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace = "p", "default"
	pod.Annotations = map[string]string{annotationConfigSource: source}
	for i, r := range resources {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return pod
}

func TestPodQOSAndOOMScoreAdj(t *testing.T) {
	guaranteed := res("100m", "1Gi", "100m", "1Gi")
	tenth := res("", "1640Mi", "", "") // 10% of 16 GiB
	cases := []struct {
		name  string
		pod   *v1.Pod
		class v1.PodQOSClass
		score int // of the first container, 16 GiB machine, no floor
	}{
		{"guaranteed", qosPod("file", guaranteed), v1.PodQOSGuaranteed, -997},
		{"best effort", qosPod("file", v1.ResourceRequirements{}), v1.PodQOSBestEffort, 1000},
		{"burstable 10%", qosPod("file", tenth), v1.PodQOSBurstable, 900},
		{"burstable tiny request", qosPod("file", res("10m", "1Ki", "", "")), v1.PodQOSBurstable, 999},
		{"burstable cpu only", qosPod("file", res("10m", "", "", "")), v1.PodQOSBurstable, 999},
		{"burstable above capacity", qosPod("file", res("", "32Gi", "", "")), v1.PodQOSBurstable, 3},
		{"limits only is guaranteed", qosPod("file", res("", "", "1", "64Mi")), v1.PodQOSGuaranteed, -997},
		{"guaranteed and best effort is burstable", qosPod("file", guaranteed, v1.ResourceRequirements{}), v1.PodQOSBurstable, 1000 - 1000/16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "limits only is guaranteed" {
				// API defaulting copies limits to missing requests.
				c.pod.Spec.Containers[0].Resources.Requests = c.pod.Spec.Containers[0].Resources.Limits.DeepCopy()
			}
			if got := podQOS(c.pod); got != c.class {
				t.Errorf("podQOS = %s, want %s", got, c.class)
			}
			if got := containerOOMScoreAdj(c.pod, &c.pod.Spec.Containers[0], 16*gib, nil); got != c.score {
				t.Errorf("oom_score_adj = %d, want %d", got, c.score)
			}
		})
	}
}

func TestOOMScoreAdjNodeCritical(t *testing.T) {
	// A static pod (file or URL) of priority class system-node-critical is
	// protected as the kubelet protects it, whatever its QoS.
	for _, src := range []string{"file", "http"} {
		pod := qosPod(src, res("100m", "100Mi", "", ""))
		pod.Spec.PriorityClassName = "system-node-critical"
		if got := containerOOMScoreAdj(pod, &pod.Spec.Containers[0], 16*gib, nil); got != -997 {
			t.Errorf("%s: node-critical static pod: oom_score_adj = %d, want -997", src, got)
		}
	}
	// One of the apiserver is critical only by its priority.
	pod := qosPod("api", v1.ResourceRequirements{})
	pod.Spec.PriorityClassName = "system-node-critical"
	if got := containerOOMScoreAdj(pod, &pod.Spec.Containers[0], 16*gib, nil); got != 1000 {
		t.Errorf("api pod without priority: oom_score_adj = %d, want 1000", got)
	}
	prio := int32(2000001000)
	pod.Spec.Priority = &prio
	if got := containerOOMScoreAdj(pod, &pod.Spec.Containers[0], 16*gib, nil); got != -997 {
		t.Errorf("api pod of priority %d: oom_score_adj = %d, want -997", prio, got)
	}
	// system-cluster-critical is not node-critical.
	pod = qosPod("file", v1.ResourceRequirements{})
	pod.Spec.PriorityClassName = "system-cluster-critical"
	if got := containerOOMScoreAdj(pod, &pod.Spec.Containers[0], 16*gib, nil); got != 1000 {
		t.Errorf("system-cluster-critical: oom_score_adj = %d, want 1000", got)
	}
}

func TestOOMScoreAdjSidecar(t *testing.T) {
	// A sidecar is killed no earlier than the pod's regular container of
	// least memory request.
	pod := qosPod("file", res("", "4Gi", "", ""), res("", "2Gi", "", ""))
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{
		{Name: "sidecar", RestartPolicy: &always, Resources: res("", "16Mi", "", "")},
		{Name: "init", Resources: res("", "16Mi", "", "")},
	}
	regular := containerOOMScoreAdj(pod, &pod.Spec.Containers[1], 16*gib, nil)
	if regular != 875 {
		t.Fatalf("regular container: %d, want 875", regular)
	}
	if got := containerOOMScoreAdj(pod, &pod.Spec.InitContainers[0], 16*gib, nil); got != regular {
		t.Errorf("sidecar: %d, want %d (its smallest regular container's)", got, regular)
	}
	if got := containerOOMScoreAdj(pod, &pod.Spec.InitContainers[1], 16*gib, nil); got != 999 {
		t.Errorf("init container: %d, want 999", got)
	}
}

func TestOOMScoreAdjUnknownCapacity(t *testing.T) {
	pod := qosPod("file", res("", "1Gi", "", ""))
	if got := containerOOMScoreAdj(pod, &pod.Spec.Containers[0], 0, nil); got != 999 {
		t.Errorf("burstable, capacity unknown: %d, want 999", got)
	}
}

func TestClampOOMScoreAdj(t *testing.T) {
	ptr := func(i int) *int { return &i }
	cases := []struct {
		floor *int
		in    []int // sandbox, guaranteed, burstable low, burstable high, best effort
		want  []int
	}{
		{nil, []int{-998, -997, 3, 999, 1000}, []int{-998, -997, 3, 999, 1000}},
		{ptr(-1000), []int{-998, -997, 3, 999, 1000}, []int{-998, -997, 3, 999, 1000}},
		// This machine: no CAP_SYS_RESOURCE, podrun at 0.
		{ptr(0), []int{-998, -997, 3, 999, 1000}, []int{0, 0, 3, 999, 1000}},
		{ptr(-500), []int{-998, -997, 3, 999, 1000}, []int{-500, -500, 3, 999, 1000}},
		// A floor above some Burstable scores: they stay above the
		// protected ones.
		{ptr(500), []int{-998, -997, 3, 999, 1000}, []int{500, 500, 501, 999, 1000}},
		{ptr(999), []int{-998, -997, 3, 999, 1000}, []int{999, 999, 1000, 1000, 1000}},
		{ptr(1000), []int{-998, -997, 3, 999, 1000}, []int{1000, 1000, 1000, 1000, 1000}},
	}
	for _, c := range cases {
		for i, in := range c.in {
			if got := clampOOMScoreAdj(in, c.floor); got != c.want[i] {
				t.Errorf("clamp(%d, floor %v) = %d, want %d", in, deref(c.floor), got, c.want[i])
			}
		}
	}
	// For every floor: protected scores are at the floor or above, at or
	// below every Burstable and BestEffort score, and these keep their
	// order.
	for f := -1000; f <= 1000; f++ {
		protected := max(clampOOMScoreAdj(-998, &f), clampOOMScoreAdj(-997, &f))
		if protected < f {
			t.Fatalf("floor %d: protected %d below it", f, protected)
		}
		prev := protected
		for s := 3; s <= 1000; s++ {
			got := clampOOMScoreAdj(s, &f)
			if got < prev || got < f {
				t.Fatalf("floor %d: score %d -> %d, below %d", f, s, got, prev)
			}
			if f < 1000 && got <= protected {
				t.Fatalf("floor %d: score %d -> %d, not above the protected %d", f, s, got, protected)
			}
			prev = got
		}
	}
	if got := sandboxOOMScore(nil); got != -998 {
		t.Errorf("sandbox score = %d, want -998", got)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
