package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

// TestPlanIsWhatTheRunnerDoes: Plan, over what a runner made, names the
// one container an edit changes, with the field, from the spec records
// the runner kept in its root dir; a runner given the edit replaces that
// container and nothing else; then Plan finds nothing to do. A pod of an
// owned source that no pod given defines is to be removed; one of another
// source is not Plan's business.
func TestPlanIsWhatTheRunnerDoes(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	inRoot := func(c *runner.Config) { c.RootDir = root }
	h := start(t, fake, inRoot)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}, "b": {"run"}})
	pod.Annotations = map[string]string{"podrun.io/source": "/m/p.yaml"}
	other := newPod("u2", "q-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	other.Annotations = map[string]string{"podrun.io/source": "/m/q.yaml"}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod, other}}
	h.waitStatus("u1", "running", allRunning)
	h.waitStatus("u2", "running", allRunning)
	h.stop()
	ctx := context.Background()

	plans, err := runner.Plan(ctx, fake, root, []*v1.Pod{pod}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUnchanged {
		t.Fatalf("plan of the running pod: %+v", plans)
	}

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "2"}
	owned := func(src string) bool { return src == "/m/p.yaml" || src == "/m/gone.yaml" }
	plans, err = runner.Plan(ctx, fake, root, []*v1.Pod{edited}, owned, runner.PlanOptions{})
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
	h2 := start(t, fake, inRoot)
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

	plans, err = runner.Plan(ctx, fake, root, []*v1.Pod{edited}, owned, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUnchanged {
		t.Fatalf("plan after the runner applied the edit: %+v", plans)
	}

	// q.yaml's pod is not given: removed when its source is owned.
	plans, err = runner.Plan(ctx, fake, root, nil, func(src string) bool { return src == "/m/q.yaml" }, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanRemove || plans[0].UID != "u2" ||
		plans[0].Name != "q-node1" || plans[0].Namespace != "default" || plans[0].Source != "/m/q.yaml" {
		t.Fatalf("plan without q's pod: %+v", plans)
	}
}

// TestSpecRecordsInTheRootDir: the runner keeps each object's spec record
// in the pod's directory, named by the hashes its labels carry, a file
// only its owner reads; edits do not pile records up; a pod whose records
// are gone (made by an older podrun) plans the same actions, its fields
// unknown; the records go with the pod.
func TestSpecRecordsInTheRootDir(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	specs := filepath.Join(root, "pods", "u1", "specs")
	recordOf := func(p *v1.Pod) string {
		c := &p.Spec.Containers[0]
		return filepath.Join(specs, "containers", "a", runner.ContainerHash(c)+"-"+runner.ResourcesHash(c)+".json")
	}
	for _, f := range []string{filepath.Join(specs, "sandbox", runner.SandboxHash(pod)+".json"), recordOf(pod)} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("record: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %s", f, fi.Mode())
		}
	}
	var c v1.Container
	if data, err := os.ReadFile(recordOf(pod)); err != nil || json.Unmarshal(data, &c) != nil || c.Command[0] != "run" {
		t.Fatalf("container record %s: %v", data, err)
	}

	// Five edits, each replacing a: the records of what is gone go.
	cur := pod
	for i := range 5 {
		cur = cur.DeepCopy()
		cur.Spec.Containers[0].Command = []string{"run", strconv.Itoa(i)}
		h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{cur}}
		want := strings.Join(cur.Spec.Containers[0].Command, " ")
		waitUntil(t, "a replaced", func() bool {
			for _, c := range h.containers("u1") {
				if c.State == engine.StateRunning && c.Hash == runner.ContainerHash(&cur.Spec.Containers[0]) {
					return true
				}
			}
			return false
		})
		if _, err := os.Stat(recordOf(cur)); err != nil {
			t.Fatalf("record of a running %q: %v", want, err)
		}
	}
	// Left: the records of a's containers the runtime still holds (the
	// sync that made the last one saw them), and of the last.
	ents, err := os.ReadDir(filepath.Join(specs, "containers", "a"))
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{filepath.Base(recordOf(cur)): true}
	for _, c := range h.containers("u1") {
		kept[c.Hash+"-"+c.ResourcesHash+".json"] = true
	}
	for _, e := range ents {
		if !kept[e.Name()] {
			t.Errorf("record %s names no container of the runtime, nor the spec", e.Name())
		}
	}
	h.stop()
	// A sync that makes a container prunes: the containers the runtime
	// holds now are all but a's last.
	for _, c := range h.containers("u1") {
		if c.Name == "a" && c.State != engine.StateRunning {
			if err := fake.RemoveContainer(context.Background(), c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	cur = cur.DeepCopy()
	cur.Spec.Containers[0].Command = []string{"run", "last"}
	h = start(t, fake, func(c *runner.Config) { c.RootDir = root })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{cur}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()
	if ents, err := os.ReadDir(filepath.Join(specs, "containers", "a")); err != nil || len(ents) != 2 {
		t.Errorf("after the runtime kept a's last container alone, a has %d records (%v), want 2", len(ents), err)
	}

	// No records (an older podrun made the pod): the same plan, without
	// the fields.
	if err := os.RemoveAll(specs); err != nil {
		t.Fatal(err)
	}
	edited := cur.DeepCopy()
	edited.Spec.Containers[0].Image = "img:2"
	edited.Spec.HostNetwork = true
	plans, err := runner.Plan(context.Background(), fake, root, []*v1.Pod{edited}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := plans[0]; p.Action != runner.PlanRecreate || !p.Unrecorded || len(p.Changes) != 0 {
		t.Fatalf("plan without records: %+v", p)
	}
	edited.Spec.HostNetwork = false
	plans, err = runner.Plan(context.Background(), fake, root, []*v1.Pod{edited}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := plans[0].Steps; len(s) != 1 || s[0].Action != runner.StepRestart || !s[0].Unrecorded || len(s[0].Changes) != 0 {
		t.Fatalf("plan without records: %+v", plans)
	}
	if _, err := os.Stat(specs); !os.IsNotExist(err) {
		t.Errorf("plan made %s: %v", specs, err)
	}

	// Plan of a root dir that does not exist: no records, nothing made.
	none := filepath.Join(t.TempDir(), "none")
	if _, err := runner.Plan(context.Background(), fake, none, []*v1.Pod{edited}, nil, runner.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("plan made the root dir: %v", err)
	}

	h = start(t, fake, func(c *runner.Config) { c.RootDir = root })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{cur}}
	h.waitStatus("u1", "running", allRunning)
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{cur}}
	waitUntil(t, "the pod directory's removal", func() bool {
		_, err := os.Stat(filepath.Join(root, "pods", "u1"))
		return os.IsNotExist(err)
	})
}

// TestPlanRefusesWhatAdmissionRefuses: a pod the runner's admission
// refuses (a host port a running pod holds, an extended resource the node
// has too few of) is PlanRefuse with the runner's own reason, not a pod
// to create; a runner given the same pods refuses the same one.
func TestPlanRefusesWhatAdmissionRefuses(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	inRoot := func(c *runner.Config) { c.RootDir = root }
	withPort := func(uid, name string) *v1.Pod {
		p := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		return p
	}
	holder, later := withPort("u1", "web-node1"), withPort("u2", "web2-node1")
	h := start(t, fake, inRoot)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{holder}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	// The later pod comes first in the arguments: the running one holds
	// the port all the same.
	ctx := context.Background()
	plans, err := runner.Plan(ctx, fake, root, []*v1.Pod{later, holder}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Action != runner.PlanRefuse || !strings.Contains(plans[0].Reason, "NodePorts") ||
		plans[1].Action != runner.PlanUnchanged {
		t.Fatalf("plan of a pod asking for a held port: %+v", plans)
	}
	h2 := start(t, fake, inRoot)
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{later, holder}}
	got := h2.waitStatus("u2", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	h2.stop()
	if got.Status.Reason != runner.ReasonNodePorts || got.Status.Message != plans[0].Reason {
		t.Errorf("the runner refused %s: %s\nplan said: %s", got.Status.Reason, got.Status.Message, plans[0].Reason)
	}

	// One dongle: the first pod asking for it has it.
	dongle := func(uid, name string) *v1.Pod {
		p := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
		one := v1.ResourceList{"example.com/dongle": resource.MustParse("1")}
		p.Spec.Containers[0].Resources.Limits, p.Spec.Containers[0].Resources.Requests = one, one
		return p
	}
	pods := []*v1.Pod{dongle("u3", "d1-node1"), dongle("u4", "d2-node1")}
	plans, err = runner.Plan(ctx, fake, root, pods, nil,
		runner.PlanOptions{ExtendedResources: map[v1.ResourceName]int64{"example.com/dongle": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Action != runner.PlanCreate || plans[1].Action != runner.PlanRefuse ||
		!strings.Contains(plans[1].Reason, "example.com/dongle") {
		t.Fatalf("plan of two pods for one dongle: %+v", plans)
	}
	// Undeclared: neither has it.
	plans, err = runner.Plan(ctx, fake, root, pods, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Action != runner.PlanRefuse || plans[1].Action != runner.PlanRefuse {
		t.Fatalf("plan of pods asking for an undeclared resource: %+v", plans)
	}
}

// TestPlanRefusesWhatTheNodeRefuses: a pod not running yet whose sysctl
// the node does not allow, or whose OS is another, is PlanRefuse as a sync
// refuses it; one that runs keeps running, and is planned unchanged.
func TestPlanRefusesWhatTheNodeRefuses(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	pod := newPod("u1", "s-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
	windows := newPod("u2", "w-node1", v1.RestartPolicyAlways, map[string][]string{"c": {"run"}})
	windows.Spec.OS = &v1.PodOS{Name: v1.Windows}
	ctx := context.Background()

	plans, err := runner.Plan(ctx, fake, root, []*v1.Pod{pod, windows}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Action != runner.PlanRefuse || plans[1].Action != runner.PlanRefuse {
		t.Fatalf("plan of a forbidden sysctl, of another OS: %+v", plans)
	}
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	got := h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	h.stop()
	if got.Status.Reason != runner.ReasonSysctlForbidden || got.Status.Message != plans[0].Reason {
		t.Errorf("the runner refused %s: %s\nplan said: %s", got.Status.Reason, got.Status.Message, plans[0].Reason)
	}

	allow, err := runner.NewSysctlAllowlist([]string{"kernel.msgmax"})
	if err != nil {
		t.Fatal(err)
	}
	plans, err = runner.Plan(ctx, fake, root, []*v1.Pod{pod}, nil, runner.PlanOptions{Sysctls: allow})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanCreate {
		t.Fatalf("plan of an allowed sysctl: %+v", plans)
	}
	h = start(t, fake, func(c *runner.Config) { c.RootDir, c.Sysctls = root, allow })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()
	plans, err = runner.Plan(ctx, fake, root, []*v1.Pod{pod}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanUnchanged {
		t.Fatalf("plan of a running pod with a sysctl no longer allowed: %+v", plans)
	}
}
