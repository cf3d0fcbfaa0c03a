package runner_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// TestPlanIsWhatTheRunnerDoes: Plan, over what a runner made, names the
// one container an edit changes; a runner given the edit replaces that
// container and nothing else; then Plan finds nothing to do. A pod of an
// owned source that no pod given defines is to be removed; one of another
// source is not Plan's business.
func TestPlanIsWhatTheRunnerDoes(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}, "b": {"run"}})
	pod.Annotations = map[string]string{"podrun.io/source": "/m/p.yaml"}
	other := newPod("u2", "q-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	other.Annotations = map[string]string{"podrun.io/source": "/m/q.yaml"}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod, other}}
	h.waitStatus("u1", "running", allRunning)
	h.waitStatus("u2", "running", allRunning)
	h.stop()
	ctx := context.Background()

	plans, err := runner.Plan(ctx, fake, []*v1.Pod{pod}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUnchanged {
		t.Fatalf("plan of the running pod: %+v", plans)
	}

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "2"}
	owned := func(src string) bool { return src == "/m/p.yaml" || src == "/m/gone.yaml" }
	plans, err = runner.Plan(ctx, fake, []*v1.Pod{edited}, owned)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUpdate || len(plans[0].Steps) != 1 {
		t.Fatalf("plan after the edit: %+v", plans)
	}
	s := plans[0].Steps[0]
	if s.Action != runner.StepRestart || s.Container != "a" || len(s.Changes) != 1 || s.Changes[0].Field != "command" ||
		string(s.Changes[0].Old) != `["run","1"]` || string(s.Changes[0].New) != `["run","2"]` {
		t.Fatalf("step %+v", s)
	}

	ids := map[string]string{}
	for _, c := range h.containers("u1") {
		ids[c.Name] = c.ID
	}
	fake.ResetCalls()
	h2 := start(t, fake, nil)
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{edited}}
	h2.waitStatus("u1", "a replaced", func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].ContainerID != "fake://"+ids["a"]
	})
	h2.stop()
	for _, c := range h.containers("u1") {
		if c.Name == "b" && c.ID != ids["b"] {
			t.Errorf("b was replaced")
		}
	}
	if n := fake.Calls("RunSandbox") + fake.Calls("RemoveSandbox"); n != 0 {
		t.Errorf("the runner made or removed %d sandboxes", n)
	}

	plans, err = runner.Plan(ctx, fake, []*v1.Pod{edited}, owned)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUnchanged {
		t.Fatalf("plan after the runner applied the edit: %+v", plans)
	}

	// q.yaml's pod is not given: removed when its source is owned.
	plans, err = runner.Plan(ctx, fake, nil, func(src string) bool { return src == "/m/q.yaml" })
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanRemove || plans[0].UID != "u2" ||
		plans[0].Name != "q-node1" || plans[0].Namespace != "default" || plans[0].Source != "/m/q.yaml" {
		t.Fatalf("plan without q's pod: %+v", plans)
	}
}
