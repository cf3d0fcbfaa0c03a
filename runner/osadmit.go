package runner

import (
	"runtime"

	v1 "k8s.io/api/core/v1"
)

// nodeRejection is why the node refuses pod, st being its runtime state,
// or nil: its operating system, a sysctl sysctls does not allow, an
// AppArmor profile the host cannot enforce (aa nil: none asked). As the
// kubelet's admission is of pending pods, it is asked only of a pod not
// running yet as its spec says (no running latest sandbox of its sandbox
// hash): one that runs keeps running. A sync refuses the pod with it,
// and Plan says so.
func nodeRejection(pod *v1.Pod, st *podState, sysctls *SysctlAllowlist, aa AppArmorValidator) *rejection {
	if runsAsSpecified(pod, st) {
		return nil
	}
	if why := osRejection(pod); why != nil {
		return why
	}
	if why := sysctlRejection(pod, sysctls); why != nil {
		return why
	}
	if aa != nil {
		if err := aa.Validate(pod); err != nil {
			return &rejection{reason: ReasonAppArmor, message: "Cannot enforce AppArmor: " + err.Error()}
		}
	}
	return nil
}

// The kubelet's status reasons of a pod refused for its operating system
// (pkg/kubelet/lifecycle).
const (
	ReasonPodOSNotSupported                  = "PodOSNotSupported"
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
)

// osRejection is why pod cannot run on this node's operating system, as
// the kubelet's admission refuses it: a nodeSelector on kubernetes.io/os
// naming another OS, or spec.os naming another. nil when it can run.
func osRejection(pod *v1.Pod) *rejection {
	if os, ok := pod.Spec.NodeSelector[v1.LabelOSStable]; ok && os != runtime.GOOS {
		return &rejection{reason: ReasonPodOSSelectorNodeLabelDoesNotMatch,
			message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return &rejection{reason: ReasonPodOSNotSupported, message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return nil
}
