package status

import (
	"slices"
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

// TestMergeStatusSortsEphemeralStatuses: ephemeral container statuses reach
// the API sorted by name, as app container statuses do: the kubelet sorts
// both with SortedContainerStatuses (convertToAPIContainerStatuses, and
// the status manager's normalizeStatus).
func TestMergeStatusSortsEphemeralStatuses(t *testing.T) {
	node := &v1.PodStatus{Phase: v1.PodRunning, EphemeralContainerStatuses: []v1.ContainerStatus{
		{Name: "debugger-x9k"}, {Name: "debugger-a2c"}, {Name: "debugger-m4p"}}}
	out := mergeStatus(&v1.PodStatus{Phase: v1.PodRunning}, node, nil, time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC))
	var names []string
	for _, s := range out.EphemeralContainerStatuses {
		names = append(names, s.Name)
	}
	if want := []string{"debugger-a2c", "debugger-m4p", "debugger-x9k"}; !slices.Equal(names, want) {
		t.Errorf("ephemeral statuses %v, want %v", names, want)
	}
	if node.EphemeralContainerStatuses[0].Name != "debugger-x9k" {
		t.Error("mergeStatus sorted the node's statuses")
	}
}
