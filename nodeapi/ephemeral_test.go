package nodeapi

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestEphemeralContainerLogs: `kubectl logs -c <ephemeral>` finds an
// ephemeral container of the pod's spec and its ID in
// ephemeralContainerStatuses.
func TestEphemeralContainerLogs(t *testing.T) {
	pod := &v1.Pod{
		Spec: v1.PodSpec{
			Containers:          []v1.Container{{Name: "app"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
		Status: v1.PodStatus{EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debug", ContainerID: "docker://eph",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}},
	}
	if !hasContainer(pod, "debug") {
		t.Error("the ephemeral container is not found in the spec")
	}
	if id, err := LogContainerID(pod, "debug", false); err != nil || id != "eph" {
		t.Errorf("LogContainerID = %q, %v; want eph", id, err)
	}
}
