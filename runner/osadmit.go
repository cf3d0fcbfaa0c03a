package runner

import (
	"runtime"

	v1 "k8s.io/api/core/v1"
)

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
