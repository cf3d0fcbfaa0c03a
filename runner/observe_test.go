package runner_test

import (
	"context"
	"strings"
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

// TestObserveListsAppContainersByName: as the kubelet orders container
// statuses, whatever order the containers were made in.
func TestObserveListsAppContainersByName(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}, "c": {"run"}})
	cs := pod.Spec.Containers
	pod.Spec.Containers = []v1.Container{cs[2], cs[0], cs[1]}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	pods, err := runner.ObserveWithClock(context.Background(), fake, "fake", h.clk)
	if err != nil || len(pods) != 1 {
		t.Fatalf("observed %+v, %v", pods, err)
	}
	var names []string
	for _, s := range pods[0].Status.ContainerStatuses {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,c" {
		t.Fatalf("container statuses %s, want a,b,c", got)
	}
}
