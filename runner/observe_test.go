package runner_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// TestObserveWithClock: the pods rebuilt from the runtime alone carry the
// time of the clock they were observed with.
func TestObserveWithClock(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	pods, err := runner.ObserveWithClock(context.Background(), fake, "fake", h.clk)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Name != "p-node1" || pods[0].Status.Phase != v1.PodRunning {
		t.Fatalf("observed %+v", pods)
	}
	for _, c := range pods[0].Status.Conditions {
		if !c.LastTransitionTime.Time.Equal(epoch) {
			t.Errorf("condition %s changed at %s; want the clock's %s", c.Type, c.LastTransitionTime, epoch)
		}
	}
}
