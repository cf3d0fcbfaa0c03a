package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/flowcontrol"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// changes renders a diff as "field: old -> new" lines, for comparing.
func changes(d Diff) string {
	var lines []string
	for _, c := range d.Changes {
		lines = append(lines, fmt.Sprintf("%s: %s -> %s", c.Field, orNone(c.Old), orNone(c.New)))
	}
	return strings.Join(lines, "\n")
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// steps renders a plan's steps as "action container: reason" lines.
func steps(p PodPlan) string {
	var lines []string
	for _, s := range p.Steps {
		lines = append(lines, strings.TrimSpace(s.Action+" "+s.Container)+": "+s.Reason)
	}
	return strings.Join(lines, "\n")
}

// memRecords are spec records in memory, by key.
type memRecords map[recordKey][]byte

func (m memRecords) sandbox(sb *engine.Sandbox) []byte    { return m[sandboxKey(sb)] }
func (m memRecords) container(c *engine.Container) []byte { return m[containerKey(c)] }

// recordsOf are the records a runner keeps when it makes pod's sandbox
// and containers.
func recordsOf(pod *v1.Pod) memRecords {
	m := memRecords{podSandboxKey(pod): sandboxRecord(pod)}
	for _, c := range allContainers(pod) {
		m[podContainerKey(c)] = containerRecord(c)
	}
	return m
}

// runningPod is the state of pod running as its spec says.
func runningPod(pod *v1.Pod) *podState {
	b := newState(pod).sandbox("sb0", 0, engine.StateRunning)
	for _, c := range allContainers(pod) {
		if c.RestartPolicy == nil && isInit(pod, c.Name) {
			b.container("sb0", c.Name, 0, engine.StateExited, 0)
			continue
		}
		b.container("sb0", c.Name, 0, engine.StateRunning, 0)
	}
	return b.build()
}

func isInit(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return true
		}
	}
	return false
}

func planOf(pod *v1.Pod, st *podState, recs records) PodPlan {
	return planPod(pod, st, newBackoff(testclock.NewFakeClock(t0)), recs)
}

func TestPlanPod(t *testing.T) {
	always := v1.RestartPolicyAlways
	base := func() *v1.Pod {
		p := testPod(always, []string{"setup"}, "a", "b")
		p.Spec.Containers[1].Env = []v1.EnvVar{{Name: "MODE", Value: "x"}, {Name: "LEVEL", Value: "1"}}
		p.Annotations = map[string]string{annotationSource: "/etc/podrun/p.yaml"}
		return p
	}
	cases := []struct {
		name   string
		edit   func(*v1.Pod)
		state  func(old *v1.Pod) *podState // default: runningPod
		action string
		reason string
		diff   string // the pod's (sandbox) diff
		steps  string
		// stepDiff is the diff of the first step.
		stepDiff   string
		unrecorded bool
		// noRecords: the runtime's objects were made by a podrun that
		// kept no record of their spec.
		noRecords bool
	}{
		{name: "unchanged", action: PlanUnchanged},
		{name: "nothing in the runtime", state: func(p *v1.Pod) *podState { return &podState{} }, action: PlanCreate},
		{name: "metadata alone changes nothing", edit: func(p *v1.Pod) { p.Labels = map[string]string{"tier": "web"} },
			action: PlanUnchanged},
		{
			name:   "an env value: that container restarts",
			edit:   func(p *v1.Pod) { p.Spec.Containers[1].Env[0].Value = "y" },
			action: PlanUpdate, steps: "restart b: container spec changed",
			stepDiff: `env[MODE].value: "x" -> "y"`,
		},
		{
			name:   "an image: that container restarts",
			edit:   func(p *v1.Pod) { p.Spec.Containers[0].Image = "img:2" },
			action: PlanUpdate, steps: "restart a: container spec changed",
			stepDiff: `image: "img:1" -> "img:2"`,
		},
		{
			name:   "a command, as a whole",
			edit:   func(p *v1.Pod) { p.Spec.Containers[0].Command = []string{"sleep", "60"} },
			action: PlanUpdate, steps: "restart a: container spec changed",
			stepDiff: `command: - -> ["sleep","60"]`,
		},
		{
			name: "an env var added and one removed",
			edit: func(p *v1.Pod) {
				p.Spec.Containers[1].Env = []v1.EnvVar{{Name: "MODE", Value: "x"}, {Name: "NEW", Value: "<&>"}}
			},
			action: PlanUpdate, steps: "restart b: container spec changed",
			stepDiff: "env[LEVEL]: {\"name\":\"LEVEL\",\"value\":\"1\"} -> -\nenv[NEW]: - -> {\"name\":\"NEW\",\"value\":\"<&>\"}",
		},
		{
			name: "resources alone: updated in place",
			edit: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
			},
			action: PlanUpdate, steps: "update-resources a: resources changed",
			stepDiff: `resources.limits: - -> {"memory":"64Mi"}`,
		},
		{
			name:   "hostNetwork: the pod is made again",
			edit:   func(p *v1.Pod) { p.Spec.HostNetwork = true },
			action: PlanRecreate, reason: reasonSandboxChanged, diff: "hostNetwork: - -> true",
		},
		{
			name: "a hostPort: the pod is made again",
			edit: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
			},
			action: PlanRecreate, reason: reasonSandboxChanged,
			diff: `ports: - -> [{"containerPort":80,"hostPort":8080,"protocol":"TCP"}]`,
		},
		{
			name: "a hostPort changed, item by item",
			state: func(p *v1.Pod) *podState {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
				return runningPod(p)
			},
			edit: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8081}}
			},
			action: PlanRecreate, reason: reasonSandboxChanged, diff: "ports[0].hostPort: 8080 -> 8081",
		},
		{
			name: "volumes reordered: the list, whole",
			state: func(p *v1.Pod) *podState {
				p.Spec.Volumes = []v1.Volume{{Name: "x"}, {Name: "y"}}
				return runningPod(p)
			},
			edit:   func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: "y"}, {Name: "x"}} },
			action: PlanRecreate, reason: reasonSandboxChanged,
			diff: `volumes: [{"name":"x"},{"name":"y"}] -> [{"name":"y"},{"name":"x"}]`,
		},
		{
			name: "the sandbox stopped",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("sb0", 0, engine.StateExited).
					container("sb0", "a", 0, engine.StateExited, 137).build()
			},
			action: PlanRecreate, reason: reasonSandboxStopped,
		},
		{
			name:   "a container added starts, one removed stops",
			edit:   func(p *v1.Pod) { p.Spec.Containers[0].Name = "c" },
			action: PlanUpdate, steps: "start c: not created yet\nstop a: container removed from the pod spec",
		},
		{
			name: "a crashed container starts again",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("sb0", 0, engine.StateRunning).container("sb0", "setup", 0, engine.StateExited, 0).
					container("sb0", "a", 0, engine.StateRunning, 0).container("sb0", "b", 0, engine.StateExited, 2).build()
			},
			action: PlanUpdate, steps: "start b: exited with code 2, restartPolicy Always",
		},
		{
			name: "a spec without a record: changed, but not known how", noRecords: true,
			edit:   func(p *v1.Pod) { p.Spec.Containers[0].Image = "img:2" },
			action: PlanUpdate, steps: "restart a: container spec changed", unrecorded: true,
		},
		{
			name: "a sandbox without a record", noRecords: true,
			edit:   func(p *v1.Pod) { p.Spec.HostNetwork = true },
			action: PlanRecreate, reason: reasonSandboxChanged, diff: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := base()
			var st *podState
			if tc.state != nil {
				st = tc.state(old)
			} else {
				st = runningPod(old)
			}
			recs := recordsOf(old)
			if tc.noRecords {
				recs = memRecords{}
			}
			pod := old.DeepCopy()
			if tc.edit != nil {
				tc.edit(pod)
			}
			p := planOf(pod, st, recs)
			if p.Action != tc.action || p.Reason != tc.reason {
				t.Fatalf("plan %s (%s), want %s (%s); steps:\n%s", p.Action, p.Reason, tc.action, tc.reason, steps(p))
			}
			if p.Name != pod.Name || p.Namespace != pod.Namespace || p.UID != string(pod.UID) || p.Source != "/etc/podrun/p.yaml" {
				t.Errorf("plan names %s/%s %s from %q", p.Namespace, p.Name, p.UID, p.Source)
			}
			if got := changes(p.Diff); got != tc.diff {
				t.Errorf("pod diff:\n%s\nwant:\n%s", got, tc.diff)
			}
			if p.Unrecorded != (tc.noRecords && p.Action == PlanRecreate) {
				t.Errorf("pod unrecorded = %v", p.Unrecorded)
			}
			if got := steps(p); got != tc.steps {
				t.Errorf("steps:\n%s\nwant:\n%s", got, tc.steps)
			}
			if len(p.Steps) > 0 {
				d := p.Steps[0].Diff
				if got := changes(d); got != tc.stepDiff {
					t.Errorf("diff of %s:\n%s\nwant:\n%s", p.Steps[0].Container, got, tc.stepDiff)
				}
				if d.Unrecorded != tc.unrecorded {
					t.Errorf("unrecorded = %v, want %v", d.Unrecorded, tc.unrecorded)
				}
			}
		})
	}
}

// TestPlanPodFollowsComputePodActions: what Plan says is what a sync
// does, for every case of the decision's own table: the same containers
// started, stopped and updated, and the sandbox made exactly when Plan
// says recreate.
func TestPlanPodFollowsComputePodActions(t *testing.T) {
	for _, tc := range computeCases() {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state(tc.pod)
			backoff := newBackoff(testclock.NewFakeClock(t0))
			a := computePodActions(tc.pod, st, backoff, nil)
			p := planPod(tc.pod, st.clone(), newBackoff(testclock.NewFakeClock(t0)), recordsOf(tc.pod))
			wantAction := PlanUnchanged
			switch {
			case len(st.Sandboxes) == 0 && len(st.Containers) == 0:
				wantAction = PlanCreate
			case a.CreateSandbox:
				wantAction = PlanRecreate
			case !a.Converged() || len(a.initStarts()) > 0 || len(a.StartApps)+len(a.StartCreated)+len(a.UpdateResources) > 0:
				wantAction = PlanUpdate
			}
			if p.Action != wantAction {
				t.Fatalf("plan %s, want %s; actions %+v", p.Action, wantAction, a)
			}
			if p.Action != PlanUpdate {
				return
			}
			acted := map[string]bool{}
			for _, c := range a.initStarts() {
				acted[c.Name] = true
			}
			for _, c := range a.StartApps {
				acted[c.Name] = true
			}
			for _, c := range a.StartCreated {
				acted[c.Name] = true
			}
			for _, k := range a.Kill {
				acted[k.Container.Name] = true
			}
			for _, c := range a.UpdateResources {
				acted[c.Name] = true
			}
			for _, s := range p.Steps {
				if s.Container != "" && !acted[s.Container] {
					t.Errorf("plan step %+v: the sync does nothing to %s", s, s.Container)
				}
				delete(acted, s.Container)
			}
			if len(acted) > 0 {
				t.Errorf("the sync acts on %v, which the plan does not name", acted)
			}
		})
	}
}

// TestPlanPodPastDeadline: a pod past its activeDeadlineSeconds (counted
// from its oldest sandbox) is planned to stop, not to start anything; one
// stopped already is unchanged.
func TestPlanPodPastDeadline(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	deadline := int64(60)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	at := func(d time.Duration) *flowcontrol.Backoff { return newBackoff(testclock.NewFakeClock(t0.Add(d))) }

	if p := planPod(pod, runningPod(pod), at(59*time.Second), recordsOf(pod)); p.Action != PlanUnchanged {
		t.Errorf("before the deadline: %s %s", p.Action, steps(p))
	}
	p := planPod(pod, runningPod(pod), at(time.Minute), recordsOf(pod))
	want := "stop a: " + reasonDeadlineKill + "\nstop-sandbox: " + reasonPodFinished
	if p.Action != PlanUpdate || steps(p) != want {
		t.Errorf("past the deadline: %s\n%s\nwant update\n%s", p.Action, steps(p), want)
	}
	stopped := newState(pod).sandbox("sb0", 0, engine.StateExited).container("sb0", "a", 0, engine.StateExited, 137).build()
	if p := planPod(pod, stopped, at(time.Hour), recordsOf(pod)); p.Action != PlanUnchanged {
		t.Errorf("stopped past its deadline: %s %s, want unchanged (not a restart)", p.Action, steps(p))
	}
}
