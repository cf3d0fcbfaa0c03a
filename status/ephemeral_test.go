package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestMergeStatusTakesEphemeralStatuses: the node's ephemeral container
// statuses reach the API (the e2e test of `kubectl debug` waits for them).
func TestMergeStatusTakesEphemeralStatuses(t *testing.T) {
	node := &v1.PodStatus{Phase: v1.PodRunning, EphemeralContainerStatuses: []v1.ContainerStatus{
		{Name: "debugger", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	out := mergeStatus(&v1.PodStatus{Phase: v1.PodRunning}, node, nil, time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC))
	if len(out.EphemeralContainerStatuses) != 1 || out.EphemeralContainerStatuses[0].State.Running == nil {
		t.Fatalf("ephemeral statuses %+v", out.EphemeralContainerStatuses)
	}
	final := finalStatus(&out, time.Date(2025, 1, 2, 4, 0, 0, 0, time.UTC))
	if st := final.EphemeralContainerStatuses[0].State.Terminated; st == nil || st.Reason != reasonDeleted {
		t.Errorf("a deleted pod's ephemeral container: %+v, want terminated", final.EphemeralContainerStatuses[0].State)
	}
}
