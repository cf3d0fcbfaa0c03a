package runner

import (
	"math"

	v1 "k8s.io/api/core/v1"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	kubeletqos "k8s.io/kubernetes/pkg/kubelet/qos"
)

// The oom_score_adj values the kubelet gives that the container's QoS
// does not decide: its own and the sandbox's (containerd's
// defaultSandboxOOMAdj, dockershim's alike).
const (
	// OwnOOMScoreAdj is the score podrun gives its own process, as the
	// kubelet does itself (qos.KubeletOOMScoreAdj).
	OwnOOMScoreAdj     = kubeletqos.KubeletOOMScoreAdj
	sandboxOOMScoreAdj = -998
	maxOOMScoreAdj     = 1000
)

// podQOS is the pod's QoS class as the kubelet reports it: the one in its
// status when the apiserver set it, else computed from its containers'
// requests and limits.
func podQOS(pod *v1.Pod) v1.PodQOSClass {
	return v1qos.GetPodQOS(pod)
}

// containerOOMScoreAdj is the oom_score_adj of c, a container of pod, on a
// machine of memoryCapacity bytes: the kubelet's
// GetContainerOOMScoreAdjust (node-critical and Guaranteed pods -997,
// BestEffort 1000, Burstable by memory request in [3, 999], sidecars no
// higher than the pod's regular containers), then raised to floor (see
// clampOOMScoreAdj). An unknown capacity (0) makes Burstable containers
// 999.
func containerOOMScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64, floor *int) int {
	if memoryCapacity <= 0 {
		// The kubelet divides by it; an unknown capacity is an infinite one.
		memoryCapacity = math.MaxInt64 / 1000
	}
	return clampOOMScoreAdj(kubeletqos.GetContainerOOMScoreAdjust(pod, c, memoryCapacity), floor)
}

// sandboxOOMScore is the oom_score_adj of a pod's infra container: -998,
// raised to floor.
func sandboxOOMScore(floor *int) int {
	return clampOOMScoreAdj(sandboxOOMScoreAdj, floor)
}

// clampOOMScoreAdj raises score to floor, the lowest oom_score_adj podrun
// may give (its own, when it may not lower scores: no CAP_SYS_RESOURCE; nil
// when it may give any), keeping the kubelet's order: the protected scores
// (negative: node-critical, Guaranteed, sandboxes) become floor at the
// lowest, and every other score (Burstable, BestEffort) stays above it
// where it can (floor+1, up to 1000). No container is refused for it.
func clampOOMScoreAdj(score int, floor *int) int {
	if floor == nil {
		return score
	}
	f := min(*floor, maxOOMScoreAdj)
	if score < 0 {
		return max(score, f)
	}
	return max(score, min(f+1, maxOOMScoreAdj))
}
