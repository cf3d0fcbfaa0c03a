package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = metav1.NewTime(time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC))
)

func cond(t v1.PodConditionType, s v1.ConditionStatus, at metav1.Time) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: s, LastTransitionTime: at}
}

// apiStatus is a pod's status as the API holds it: the scheduler's
// condition, a readiness gate a controller sets, the QOS class.
func apiStatus() v1.PodStatus {
	return v1.PodStatus{
		Phase:    v1.PodPending,
		QOSClass: v1.PodQOSBurstable,
		Conditions: []v1.PodCondition{
			cond(v1.PodScheduled, v1.ConditionTrue, t0),
			cond("example.com/gate", v1.ConditionTrue, t0),
			cond(v1.PodReady, v1.ConditionFalse, t0),
		},
	}
}

// nodeStatus is what the runner says of the pod.
func nodeStatus() v1.PodStatus {
	started := true
	return v1.PodStatus{
		Phase:   v1.PodRunning,
		HostIP:  "192.0.2.10",
		HostIPs: []v1.HostIP{{IP: "192.0.2.10"}},
		PodIP:   "10.1.0.5",
		PodIPs:  []v1.PodIP{{IP: "10.1.0.5"}},
		Conditions: []v1.PodCondition{
			cond(v1.PodScheduled, v1.ConditionTrue, t1),
			cond(v1.PodInitialized, v1.ConditionTrue, t1),
			cond(v1.PodReady, v1.ConditionFalse, t1),
			cond(v1.ContainersReady, v1.ConditionFalse, t1),
		},
		StartTime: &t1,
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "z", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t1}}, Started: &started},
			{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		},
	}
}

func TestMergeStatusTakesTheNodesPart(t *testing.T) {
	api, node := apiStatus(), nodeStatus()
	apiBefore, nodeBefore := statusKey(&api), statusKey(&node)
	got := mergeStatus(&api, &node, nil, t1.Time)
	if statusKey(&api) != apiBefore || statusKey(&node) != nodeBefore {
		t.Fatal("mergeStatus modified its arguments")
	}
	if got.Phase != v1.PodRunning || got.PodIP != "10.1.0.5" || got.HostIP != "192.0.2.10" || len(got.PodIPs) != 1 {
		t.Errorf("node fields not taken: %+v", got)
	}
	if got.QOSClass != v1.PodQOSBurstable {
		t.Errorf("QOS class %q, want the API's", got.QOSClass)
	}
	want := map[v1.PodConditionType]struct {
		status v1.ConditionStatus
		at     metav1.Time
	}{
		// Same status as the API's: its transition time stays.
		v1.PodScheduled: {v1.ConditionTrue, t0},
		v1.PodReady:     {v1.ConditionFalse, t0},
		// Another's condition is kept as it is.
		"example.com/gate": {v1.ConditionTrue, t0},
		// New ones are the node's.
		v1.PodInitialized:  {v1.ConditionTrue, t1},
		v1.ContainersReady: {v1.ConditionFalse, t1},
	}
	if len(got.Conditions) != len(want) {
		t.Errorf("conditions %v, want %d", got.Conditions, len(want))
	}
	for _, c := range got.Conditions {
		w, ok := want[c.Type]
		if !ok || c.Status != w.status || !c.LastTransitionTime.Equal(&w.at) {
			t.Errorf("condition %s = %s since %v, want %v", c.Type, c.Status, c.LastTransitionTime, w)
		}
	}
	if got.ContainerStatuses[0].Name != "a" || got.ContainerStatuses[1].Name != "z" {
		t.Errorf("container statuses not sorted by name: %v", got.ContainerStatuses)
	}
	if !got.StartTime.Equal(&t1) {
		t.Errorf("start time %v, want the node's (the API has none)", got.StartTime)
	}
	// A start time the API has stays.
	api.StartTime = &t0
	if got := mergeStatus(&api, &node, nil, t1.Time); !got.StartTime.Equal(&t0) {
		t.Errorf("start time %v, want the API's %v", got.StartTime, t0)
	}
}

func TestMergeStatusKeepsATerminalPhase(t *testing.T) {
	api, node := apiStatus(), nodeStatus()
	api.Phase, api.Reason = v1.PodFailed, "Evicted"
	got := mergeStatus(&api, &node, nil, t1.Time)
	if got.Phase != v1.PodFailed || got.Reason != "Evicted" {
		t.Errorf("phase %s (%s): a terminal phase must stay", got.Phase, got.Reason)
	}
	// Done pods are not ready, whatever the last probe said.
	node.Conditions[2].Status = v1.ConditionTrue
	node.Phase = v1.PodSucceeded
	api = apiStatus()
	got = mergeStatus(&api, &node, nil, t1.Time)
	if c := findCondition(got.Conditions, v1.PodReady); c == nil || c.Status != v1.ConditionFalse {
		t.Errorf("Ready of a Succeeded pod: %v", c)
	}
}

func TestStatusPatch(t *testing.T) {
	api, node := apiStatus(), nodeStatus()
	merged := mergeStatus(&api, &node, nil, t1.Time)
	patch, unchanged, err := statusPatch("uid-1", &api, &merged)
	if err != nil || unchanged {
		t.Fatalf("statusPatch = %s, %v, %v", patch, unchanged, err)
	}
	var doc struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(patch, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Metadata.UID != "uid-1" {
		t.Errorf("patch %s: no UID precondition", patch)
	}
	for _, f := range []string{"phase", "podIP", "containerStatuses", "conditions"} {
		if _, ok := doc.Status[f]; !ok {
			t.Errorf("patch %s lacks status.%s", patch, f)
		}
	}
	if _, ok := doc.Status["qosClass"]; ok {
		t.Errorf("patch %s changes the QOS class", patch)
	}
	// Another's condition is named in the order of the list only
	// ($setElementOrder), never changed.
	if strings.Contains(string(doc.Status["conditions"]), "example.com/gate") {
		t.Errorf("patch %s touches another's condition", patch)
	}

	// The same status again: nothing to send.
	if patch, unchanged, err := statusPatch("uid-1", &merged, &merged); err != nil || !unchanged {
		t.Errorf("same status: patch %s, unchanged %v, %v", patch, unchanged, err)
	}
	// Times the API keeps to the second do not count.
	again := *merged.DeepCopy()
	ns := metav1.NewTime(t1.Add(300 * time.Millisecond))
	again.StartTime = &ns
	if statusKey(&again) != statusKey(&merged) {
		t.Error("statusKey differs for times within a second")
	}
}

func TestFinalStatus(t *testing.T) {
	node := nodeStatus()
	node.Conditions[2].Status = v1.ConditionTrue // ready
	node.ContainerStatuses[0].Ready = true
	now := time.Date(2025, 1, 2, 4, 0, 0, 0, time.UTC)
	got := finalStatus(&node, now)
	if got.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", got.Phase)
	}
	for _, c := range got.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 137 || c.Ready || c.State.Running != nil || c.State.Waiting != nil {
			t.Errorf("container %s: %+v", c.Name, c.State)
		}
	}
	if c := findCondition(got.Conditions, v1.PodReady); c.Status != v1.ConditionFalse || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Ready: %+v", c)
	}
	if node.ContainerStatuses[0].State.Running == nil {
		t.Error("finalStatus modified its argument")
	}
	// A pod that completed keeps Succeeded and its containers' exit codes.
	done := nodeStatus()
	done.Phase = v1.PodSucceeded
	done.ContainerStatuses = []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	got = finalStatus(&done, now)
	if got.Phase != v1.PodSucceeded || got.ContainerStatuses[0].State.Terminated.Reason != "Completed" {
		t.Errorf("completed pod: %s, %+v", got.Phase, got.ContainerStatuses[0].State.Terminated)
	}
}

// TestMergeStatusReadinessGates: as the kubelet's GeneratePodReadyCondition,
// a pod whose containers are ready is Ready only when every readiness
// gate's condition (written by others, kept from the API) is True.
func TestMergeStatusReadinessGates(t *testing.T) {
	gates := []v1.PodReadinessGate{{ConditionType: "k8s.io/test-condition1"}, {ConditionType: "k8s.io/test-condition2"}}
	node := nodeStatus()
	for i := range node.Conditions {
		node.Conditions[i].Status = v1.ConditionTrue
	}
	tests := []struct {
		name   string
		conds  []v1.PodCondition
		status v1.ConditionStatus
		msg    string
	}{
		{"no gate condition", nil, v1.ConditionFalse,
			`corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist., ` +
				`corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`},
		{"one True", []v1.PodCondition{cond("k8s.io/test-condition1", v1.ConditionTrue, t0)}, v1.ConditionFalse,
			`corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`},
		{"one False", []v1.PodCondition{cond("k8s.io/test-condition1", v1.ConditionFalse, t0), cond("k8s.io/test-condition2", v1.ConditionTrue, t0)},
			v1.ConditionFalse, `the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False`},
		{"both True", []v1.PodCondition{cond("k8s.io/test-condition1", v1.ConditionTrue, t0), cond("k8s.io/test-condition2", v1.ConditionTrue, t0)},
			v1.ConditionTrue, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := v1.PodStatus{Conditions: append(tt.conds, cond(v1.PodReady, v1.ConditionTrue, t0))}
			got := mergeStatus(&api, &node, gates, t1.Time)
			ready := findCondition(got.Conditions, v1.PodReady)
			if ready == nil || ready.Status != tt.status || ready.Message != tt.msg {
				t.Fatalf("Ready = %+v, want %s %q", ready, tt.status, tt.msg)
			}
			if tt.status == v1.ConditionFalse && (ready.Reason != "ReadinessGatesNotReady" || !ready.LastTransitionTime.Equal(&t1)) {
				t.Errorf("Ready = %+v, want reason ReadinessGatesNotReady since %v", ready, t1)
			}
			if c := findCondition(got.Conditions, v1.ContainersReady); c == nil || c.Status != v1.ConditionTrue {
				t.Errorf("ContainersReady = %+v: gates do not change it", c)
			}
			for _, g := range tt.conds {
				if c := findCondition(got.Conditions, g.Type); c == nil || c.Status != g.Status {
					t.Errorf("gate condition %s not kept: %v", g.Type, got.Conditions)
				}
			}
		})
	}
	// Containers not ready: Ready keeps their reason.
	notReady := nodeStatus()
	api := v1.PodStatus{}
	got := mergeStatus(&api, &notReady, gates, t1.Time)
	if r := findCondition(got.Conditions, v1.PodReady); r.Reason == "ReadinessGatesNotReady" {
		t.Errorf("Ready = %+v, want the containers' reason", r)
	}
}

// TestTerminalReadinessReason: a done pod's Ready and ContainersReady are
// False with the reason of its phase, PodFailed for Failed and
// PodCompleted for Succeeded, and no message, as the kubelet's
// generatePodReadyConditionForTerminalPhase and
// generateContainersReadyConditionForTerminalPhase make them (written by
// mergePodStatus once the phase is terminal). mergeStatus replaces both when
// either is True; finalStatus, a pod deleted while it ran, is Failed.
func TestTerminalReadinessReason(t *testing.T) {
	for _, tt := range []struct {
		phase  v1.PodPhase
		reason string
	}{{v1.PodFailed, "PodFailed"}, {v1.PodSucceeded, "PodCompleted"}} {
		api := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}}
		node := v1.PodStatus{Phase: tt.phase, Conditions: []v1.PodCondition{
			cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}}
		out := mergeStatus(&api, &node, nil, t1.Time)
		for _, c := range out.Conditions {
			if c.Status != v1.ConditionFalse || c.Reason != tt.reason {
				t.Errorf("mergeStatus, phase %s: %s = %s/%s, want False/%s", tt.phase, c.Type, c.Status, c.Reason, tt.reason)
			}
		}
	}

	// Ready held False by a gate, ContainersReady True: both are replaced,
	// the message of the gate goes.
	api := v1.PodStatus{Phase: v1.PodFailed}
	node := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reasonGatesNotReady, Message: "gate", LastTransitionTime: t0},
		cond(v1.ContainersReady, v1.ConditionTrue, t0)}}
	out := mergeStatus(&api, &node, nil, t1.Time)
	for _, c := range out.Conditions {
		if c.Status != v1.ConditionFalse || c.Reason != "PodFailed" || c.Message != "" {
			t.Errorf("mergeStatus, Ready held by a gate: %s = %s/%s %q, want False/PodFailed", c.Type, c.Status, c.Reason, c.Message)
		}
	}

	fin := finalStatus(&v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}}, t1.Time)
	for _, c := range fin.Conditions {
		if fin.Phase != v1.PodFailed || c.Status != v1.ConditionFalse || c.Reason != "PodFailed" {
			t.Errorf("finalStatus (phase %s): %s = %s/%s, want False/PodFailed", fin.Phase, c.Type, c.Status, c.Reason)
		}
	}
	done := finalStatus(&v1.PodStatus{Phase: v1.PodSucceeded, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)}}, t1.Time)
	if c := findCondition(done.Conditions, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != "PodCompleted" {
		t.Errorf("finalStatus of a Succeeded pod: Ready = %s/%s, want False/PodCompleted", c.Status, c.Reason)
	}
}

// TestTerminalReadinessTransitionTime: Ready and ContainersReady turned
// from True to False because the phase is terminal are False since the
// turn, not since the True they were (the kubelet's mergePodStatus writes
// them with podutil.UpdatePodCondition, which sets lastTransitionTime to
// now when the status changes); the now of mergeStatus is the manager's
// clock. Once the API has them False, their time stays.
func TestTerminalReadinessTransitionTime(t *testing.T) {
	api := v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{
		cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}}
	node := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		cond(v1.PodReady, v1.ConditionTrue, t0), cond(v1.ContainersReady, v1.ConditionTrue, t0)}}
	out := mergeStatus(&api, &node, nil, t1.Time)
	for _, c := range out.Conditions {
		if c.Status != v1.ConditionFalse || !c.LastTransitionTime.Equal(&t1) {
			t.Errorf("%s = %s since %v, want False since the flip, %v", c.Type, c.Status, c.LastTransitionTime, t1)
		}
	}
	// The next merge, the API has them False: the same status again.
	t2 := time.Date(2025, 1, 2, 3, 10, 0, 0, time.UTC)
	again := mergeStatus(&out, &node, nil, t2)
	if statusKey(&again) != statusKey(&out) {
		t.Errorf("a second merge changes the status:\n%+v\nwas\n%+v", again.Conditions, out.Conditions)
	}
	// A node that says a Succeeded pod is ready: the same.
	api = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)}}
	node = v1.PodStatus{Phase: v1.PodSucceeded, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)}}
	if c := findCondition(mergeStatus(&api, &node, nil, t1.Time).Conditions, v1.PodReady); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Succeeded: Ready = %s since %v, want since %v", c.Status, c.LastTransitionTime, t1)
	}
}

// TestMergeStatusObservedGeneration: the generation the node has seen
// reaches the API and never goes down there, and the conditions keep the
// generation the node gives them. The kubelet sets status.observedGeneration
// in SetPodStatus and keeps it from going down in updateStatusInternal
// ("prevent sending unnecessary patches"); mergePodStatus sends it, and the
// node's conditions, as they are.
func TestMergeStatusObservedGeneration(t *testing.T) {
	withGen := func(c v1.PodCondition, gen int64) v1.PodCondition { c.ObservedGeneration = gen; return c }
	for _, tt := range []struct {
		name           string
		api, node, out int64
	}{
		{"the node's", 2, 3, 3},
		{"the API's higher", 5, 3, 5},
		{"none from the node", 4, 0, 4},
	} {
		api := v1.PodStatus{Phase: v1.PodRunning, ObservedGeneration: tt.api}
		node := v1.PodStatus{Phase: v1.PodRunning, ObservedGeneration: tt.node}
		if got := mergeStatus(&api, &node, nil, t1.Time).ObservedGeneration; got != tt.out {
			t.Errorf("%s: observedGeneration %d (API %d, node %d), want %d", tt.name, got, tt.api, tt.node, tt.out)
		}
	}

	// Conditions: a new one, one whose status and time stay, one a gate
	// holds False.
	api := v1.PodStatus{Phase: v1.PodRunning, ObservedGeneration: 2, Conditions: []v1.PodCondition{
		withGen(cond(v1.PodScheduled, v1.ConditionTrue, t0), 2), withGen(cond(v1.PodReady, v1.ConditionFalse, t0), 2)}}
	node := v1.PodStatus{Phase: v1.PodRunning, ObservedGeneration: 3, Conditions: []v1.PodCondition{
		withGen(cond(v1.PodScheduled, v1.ConditionTrue, t1), 3), withGen(cond(v1.PodReady, v1.ConditionTrue, t1), 3),
		withGen(cond(v1.ContainersReady, v1.ConditionTrue, t1), 3)}}
	out := mergeStatus(&api, &node, []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}, t1.Time)
	// The pod done: Ready and ContainersReady turned False.
	node.Phase = v1.PodFailed
	done := mergeStatus(&api, &node, nil, t1.Time)
	for _, s := range []v1.PodStatus{out, done} {
		if s.ObservedGeneration != 3 {
			t.Errorf("phase %s: observedGeneration %d, want 3", s.Phase, s.ObservedGeneration)
		}
		for _, c := range s.Conditions {
			if c.ObservedGeneration != 3 {
				t.Errorf("phase %s: %s (%s) observes generation %d, want the node's 3", s.Phase, c.Type, c.Status, c.ObservedGeneration)
			}
		}
	}
	node.Conditions = node.Conditions[:2]
	if c := findCondition(mergeStatus(&api, &node, nil, t1.Time).Conditions, v1.ContainersReady); c == nil || c.ObservedGeneration != 3 {
		t.Errorf("ContainersReady added for the terminal phase: %+v, want it to observe generation 3", c)
	}
}

// TestMergeStatusEvicted: the status of an evicted pod, as the kubelet
// makes it (generateAPIPodStatus, then the eviction manager's Failed,
// Evicted and DisruptionTarget), reaches the API whole: its conditions,
// container statuses and the DisruptionTarget condition, which the
// kubelet's mergePodStatus writes as the pod turns terminal (it is shared
// with others, so kept as the API has it otherwise). Its time is the
// merge's unless the API has it with the same status.
func TestMergeStatusEvicted(t *testing.T) {
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t0}}
	stopped := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	api := v1.PodStatus{Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t0), cond(v1.PodReady, v1.ConditionTrue, t0),
			cond(v1.ContainersReady, v1.ConditionTrue, t0)},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, State: running}}}
	disruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: "The node was low on resource: memory.", LastTransitionTime: t0}
	node := v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
		Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, t0),
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t1},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: t1},
			disruption},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: stopped}}}
	out := mergeStatus(&api, &node, nil, t1.Time)
	if out.Phase != v1.PodFailed || out.Reason != "Evicted" {
		t.Errorf("phase %s (%s), want Failed (Evicted)", out.Phase, out.Reason)
	}
	if c := findCondition(out.Conditions, v1.DisruptionTarget); c == nil || c.Status != v1.ConditionTrue ||
		c.Reason != "TerminationByKubelet" || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("DisruptionTarget = %+v, want the node's since %v", c, t1)
	}
	for _, ct := range []v1.PodConditionType{v1.PodScheduled, v1.PodReady, v1.ContainersReady} {
		if findCondition(out.Conditions, ct) == nil {
			t.Errorf("condition %s lost: %v", ct, out.Conditions)
		}
	}
	if len(out.ContainerStatuses) != 1 || out.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("container statuses %+v, want the node's", out.ContainerStatuses)
	}

	// Another's DisruptionTarget (a preemption, say) gives way to the
	// node's; the same status keeps its time.
	api.Conditions = append(api.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: "PreemptionByScheduler", LastTransitionTime: t0})
	out = mergeStatus(&api, &node, nil, t1.Time)
	var n int
	for _, c := range out.Conditions {
		if c.Type == v1.DisruptionTarget {
			n++
			if c.Reason != "TerminationByKubelet" || !c.LastTransitionTime.Equal(&t0) {
				t.Errorf("DisruptionTarget = %+v, want the node's since the API's %v", c, t0)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d DisruptionTarget conditions, want 1", n)
	}

	// The API has the pod terminal already: its own stays (none here).
	api = v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}
	if out := mergeStatus(&api, &node, nil, t1.Time); findCondition(out.Conditions, v1.DisruptionTarget) != nil {
		t.Errorf("DisruptionTarget written to a pod already Failed in the API: %v", out.Conditions)
	}
	// Nor while the node has the pod running.
	api.Phase = v1.PodRunning
	node.Phase = v1.PodRunning
	if out := mergeStatus(&api, &node, nil, t1.Time); findCondition(out.Conditions, v1.DisruptionTarget) != nil {
		t.Errorf("DisruptionTarget written for a running pod: %v", out.Conditions)
	}
}
