package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// The pod status as the kubelet v1.34 generates it (kubelet_pods.go
// getPhase and generateAPIPodStatus, status/generate.go), case by case.

// condition returns the condition t of s, or nil.
func condition(s *v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// TestPhaseSidecarRunningKeepsPodRunning: getPhase counts a running
// restartable init container (sidecar) as running, so a Never pod whose
// app container has exited 0 stays Running while its sidecar still runs.
func TestPhaseSidecarRunningKeepsPodRunning(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyNever, []string{"sidecar"}, "app")
	pod.Spec.InitContainers[0].RestartPolicy = &always
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).
		container("sb", "sidecar", 0, engine.StateRunning, 0).container("sb", "app", 0, engine.StateExited, 0).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s with the sidecar still running, want Running", s.Phase)
	}
}

// TestPhaseSidecarWaitingIsPending: getPhase counts a sidecar that waits
// and has never ended (no lastState) as waiting: the pod is Pending, even
// with its app container running.
func TestPhaseSidecarWaitingIsPending(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyAlways, []string{"sidecar"}, "app")
	pod.Spec.InitContainers[0].RestartPolicy = &always
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).
		container("sb", "app", 0, engine.StateRunning, 0).build()
	errs := map[string]waiting{"sidecar": {Reason: "ErrImagePull", Message: "no such image"}}
	s := computePodStatus(statusInput{Pod: pod, State: st, Errors: errs, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodPending {
		t.Errorf("phase %s with the sidecar waiting (%+v), want Pending", s.Phase, s.InitContainerStatuses[0].State)
	}
}

// TestPhaseSidecarNotStartedBeforeInitialization: a running sidecar not
// started yet (its startup probe) keeps a pod without app containers in
// its sandbox Pending; once app containers exist, it does not.
func TestPhaseSidecarNotStartedBeforeInitialization(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyAlways, []string{"sidecar"}, "app")
	pod.Spec.InitContainers[0].RestartPolicy = &always
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).
		container("sb", "sidecar", 0, engine.StateRunning, 0).build()
	probes := fakeProbeStates{}
	s := computePodStatus(statusInput{Pod: pod, State: st, Probes: probes, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodPending {
		t.Errorf("sidecar not started, no app container: phase %s, want Pending", s.Phase)
	}
	st = newState(pod).sandbox("sb", 0, engine.StateRunning).
		container("sb", "sidecar", 1, engine.StateRunning, 0).container("sb", "app", 0, engine.StateRunning, 0).build()
	probes = fakeProbeStates{"app-0": true}
	s = computePodStatus(statusInput{Pod: pod, State: st, Probes: probes, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodRunning {
		t.Errorf("sidecar restarting, app running: phase %s, want Running", s.Phase)
	}
}

// fakeProbeStates: the containers started and ready, by ID.
type fakeProbeStates map[string]bool

func (f fakeProbeStates) Started(id string) bool { return f[id] }
func (f fakeProbeStates) Ready(id string) bool   { return f[id] }

// TestPhaseInitRerunInNewSandboxIsPending: getPhase counts a regular init
// container that runs as pending initialization, whatever ran before:
// after its sandbox is made again, a pod runs its init containers again
// and is Pending meanwhile, though app containers of the older sandbox
// exist. (Only an init container with no record at all is taken as done
// once app containers exist: its record may have been collected.)
func TestPhaseInitRerunInNewSandboxIsPending(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "app")
	st := newState(pod).sandbox("sb1", 0, engine.StateExited).sandbox("sb2", 1, engine.StateRunning).
		container("sb1", "init", 0, engine.StateExited, 0).container("sb1", "app", 0, engine.StateExited, 137).
		container("sb2", "init", 1, engine.StateRunning, 0).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodPending {
		t.Errorf("init container running again in the new sandbox: phase %s, want Pending", s.Phase)
	}
	// As the worker's sync computes it: the app waits PodInitializing.
	a := &podActions{}
	waitApps(pod, a)
	s = computePodStatus(statusInput{Pod: pod, State: st, Actions: a, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodPending {
		t.Errorf("with the sync's actions: phase %s, want Pending", s.Phase)
	}

	// No record of the init container, app containers running: done.
	st = newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateRunning, 0).build()
	s = computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodRunning {
		t.Errorf("init container's record collected, app running: phase %s, want Running", s.Phase)
	}
}

// TestPhaseInitFailedNeverFromStatuses: getPhase makes a pod whose regular
// init container failed and will not run again (restartPolicy Never)
// Failed from the container statuses alone, and the kubelet gives the pod
// no reason for it; one that will run again (OnFailure) keeps it Pending.
func TestPhaseInitFailedNeverFromStatuses(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, []string{"init"}, "app")
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "init", 0, engine.StateExited, 1).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", s.Phase)
	}
	s = computePodStatus(statusInput{Pod: pod, State: st, Actions: &podActions{PodFailed: true}, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodFailed || s.Reason != "" {
		t.Errorf("with the sync's actions: phase %s reason %q, want Failed with no reason", s.Phase, s.Reason)
	}
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	s = computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodPending {
		t.Errorf("OnFailure: phase %s, want Pending", s.Phase)
	}
}

// TestPhaseDeletedPod: getPhase with podIsTerminal (the kubelet's
// SyncTerminatingPod): a deleted pod whose containers all stopped is
// Succeeded when they all exited 0 (on SIGTERM, say), else Failed,
// whatever its restartPolicy; a static pod (file or URL) is left out, as
// by the kubelet.
func TestPhaseDeletedPod(t *testing.T) {
	for _, c := range []struct {
		policy v1.RestartPolicy
		exit   int
		source string
		want   v1.PodPhase
	}{
		{v1.RestartPolicyAlways, 0, "api", v1.PodSucceeded},
		{v1.RestartPolicyOnFailure, 0, "api", v1.PodSucceeded},
		{v1.RestartPolicyNever, 0, "", v1.PodSucceeded},
		{v1.RestartPolicyAlways, 143, "api", v1.PodFailed},
		{v1.RestartPolicyOnFailure, 1, "api", v1.PodFailed},
		{v1.RestartPolicyAlways, 0, "file", v1.PodRunning},
	} {
		pod := testPod(c.policy, nil, "app")
		if c.source != "" {
			pod.Annotations = map[string]string{"kubernetes.io/config.source": c.source}
		}
		st := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateExited, c.exit).build()
		s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0, Terminated: true})
		if s.Phase != c.want {
			t.Errorf("%s, exit %d, source %q: phase %s, want %s", c.policy, c.exit, c.source, s.Phase, c.want)
		}
	}
}

// TestConditionsOfAFinishedPod: generate.go gives a finished pod's Ready
// and ContainersReady False with the reason of its phase, PodFailed or
// PodCompleted, and a Succeeded pod's Initialized True with the reason
// PodCompleted (GeneratePodInitializedCondition).
func TestConditionsOfAFinishedPod(t *testing.T) {
	for _, c := range []struct {
		exit  int
		phase v1.PodPhase
		ready string
		init  string
	}{{1, v1.PodFailed, "PodFailed", ""}, {0, v1.PodSucceeded, "PodCompleted", "PodCompleted"}} {
		pod := testPod(v1.RestartPolicyNever, []string{"init"}, "app")
		st := newState(pod).sandbox("sb", 0, engine.StateRunning).
			container("sb", "init", 0, engine.StateExited, 0).container("sb", "app", 0, engine.StateExited, c.exit).build()
		s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
		if s.Phase != c.phase {
			t.Fatalf("exit %d: phase %s, want %s", c.exit, s.Phase, c.phase)
		}
		for _, ct := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
			if got := condition(&s, ct); got == nil || got.Status != v1.ConditionFalse || got.Reason != c.ready || got.Message != "" {
				t.Errorf("%s: %s = %+v, want False with reason %s", c.phase, ct, got, c.ready)
			}
		}
		if got := condition(&s, v1.PodInitialized); got == nil || got.Status != v1.ConditionTrue || got.Reason != c.init {
			t.Errorf("%s: Initialized = %+v, want True with reason %q", c.phase, got, c.init)
		}
	}
}

// TestObservedGeneration: with PodObservedGenerationTracking (beta, on in
// 1.34) the kubelet sets status.observedGeneration to the pod's
// metadata.generation, and so each condition it generates
// (PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled).
func TestObservedGeneration(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Generation = 3
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateRunning, 0).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if s.ObservedGeneration != 3 {
		t.Errorf("status.observedGeneration = %d, want 3", s.ObservedGeneration)
	}
	if len(s.Conditions) != 5 {
		t.Errorf("%d conditions, want 5", len(s.Conditions))
	}
	for _, c := range s.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s: observedGeneration = %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
}

// TestHostNetworkPodIPWithoutSandbox: generateAPIPodStatus gives a
// hostNetwork pod the node's IP as podIP(s) whenever the runtime gives
// none: before its sandbox is made, and after it stopped, too.
func TestHostNetworkPodIPWithoutSandbox(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, nil, "app")
	pod.Spec.HostNetwork = true
	for name, st := range map[string]*podState{
		"no sandbox":      {},
		"sandbox stopped": newState(pod).sandbox("sb", 0, engine.StateExited).container("sb", "app", 0, engine.StateExited, 0).build(),
		"sandbox running": newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateRunning, 0).build(),
	} {
		s := computePodStatus(statusInput{Pod: pod, State: st, HostIP: "10.0.0.5", Runtime: "docker", Now: t0})
		if s.PodIP != "10.0.0.5" || len(s.PodIPs) != 1 || s.PodIPs[0].IP != "10.0.0.5" {
			t.Errorf("%s: podIP %q podIPs %v, want 10.0.0.5", name, s.PodIP, s.PodIPs)
		}
	}
}

// TestCreatedContainerWaitsWithoutReason: convertToAPIContainerStatuses
// gives a container the runtime reports created (made, not started)
// Waiting with no reason; ContainerCreating is the default of a container
// with no record at all.
func TestCreatedContainerWaitsWithoutReason(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	st := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateCreated, 0).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0})
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "" || w.Message != "" {
		t.Errorf("created container: waiting %+v, want Waiting with no reason", w)
	}
	if s.Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", s.Phase)
	}
}

// TestTerminalPhaseWaitsForContainersToStop: the kubelet's status manager
// (mergePodStatus) does not report a terminal phase while the pod could
// still have running containers: the previous phase, reason and message
// stay until they stopped. A pod past its deadline whose container still
// runs is not Failed yet; once it stopped, it is.
func TestTerminalPhaseWaitsForContainersToStop(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	running := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateRunning, 0).build()
	deadline := &podActions{DeadlineExceeded: true}
	for _, c := range []struct {
		name string
		prev *v1.PodStatus
		want v1.PodPhase
	}{
		{"no previous status", nil, v1.PodRunning},
		{"previously Running", &v1.PodStatus{Phase: v1.PodRunning, Reason: "Why", Message: "so"}, v1.PodRunning},
		{"previously Pending", &v1.PodStatus{Phase: v1.PodPending}, v1.PodPending},
	} {
		s := computePodStatus(statusInput{Pod: pod, State: running, Actions: deadline, Previous: c.prev, Runtime: "docker", Now: t0})
		if s.Phase != c.want || s.ContainerStatuses[0].State.Running == nil {
			t.Errorf("%s: phase %s (reason %q) with the container running, want %s", c.name, s.Phase, s.Reason, c.want)
		}
		if c.prev != nil && (s.Reason != c.prev.Reason || s.Message != c.prev.Message) {
			t.Errorf("%s: reason %q message %q, want the previous %q %q", c.name, s.Reason, s.Message, c.prev.Reason, c.prev.Message)
		}
		if got := condition(&s, v1.PodReady); got == nil || got.Status != v1.ConditionFalse {
			t.Errorf("%s: Ready %+v, want False", c.name, got)
		}
	}
	// A pod reported terminal stays so.
	prev := &v1.PodStatus{Phase: v1.PodFailed, Reason: ReasonDeadlineExceeded}
	s := computePodStatus(statusInput{Pod: pod, State: running, Actions: deadline, Previous: prev, Runtime: "docker", Now: t0})
	if s.Phase != v1.PodFailed || s.Reason != ReasonDeadlineExceeded {
		t.Errorf("reported Failed before: phase %s reason %q, want Failed DeadlineExceeded", s.Phase, s.Reason)
	}
	// Stopped: Failed, with the deadline's reason.
	stopped := newState(pod).sandbox("sb", 0, engine.StateRunning).container("sb", "app", 0, engine.StateExited, 137).build()
	s = computePodStatus(statusInput{Pod: pod, State: stopped, Actions: deadline, Previous: &v1.PodStatus{Phase: v1.PodRunning},
		Runtime: "docker", Now: t0})
	if s.Phase != v1.PodFailed || s.Reason != ReasonDeadlineExceeded {
		t.Errorf("container stopped: phase %s reason %q, want Failed DeadlineExceeded", s.Phase, s.Reason)
	}
}

// An edit of a finished Never pod runs it again: the kubelet gives an
// edited static pod a new UID (a new pod, no old runs count); podrun keeps
// the UID, and the rule that stops a Never pod whose sandbox died must not
// take the edit's stopped sandbox for a death. A Never pod whose sandbox
// died while an app ran is still not made again.
func TestNeverPodEditedAfterItFinishedRunsAgain(t *testing.T) {
	clk := testclock.NewFakeClock(t0.Add(time.Hour))
	for _, tc := range []struct {
		name       string
		apps       []string
		state      func(pod *v1.Pod) *podState
		newSandbox bool
	}{
		{"edited container", []string{"a"}, func(pod *v1.Pod) *podState {
			st := newState(pod).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateExited, 1).build()
			st.Containers[0].Hash = "before-the-edit"
			return st
		}, true},
		{"added container", []string{"a", "b"}, func(pod *v1.Pod) *podState {
			return newState(pod).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateExited, 0).build()
		}, true},
		{"no edit, an app still ran", []string{"a", "b"}, func(pod *v1.Pod) *podState {
			return newState(pod).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateRunning, 0).build()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyNever, nil, tc.apps...)
			a := computePodActions(pod, tc.state(pod), newBackoff(clk), nil)
			if a.CreateSandbox != tc.newSandbox {
				t.Errorf("CreateSandbox %v (apps %v), want %v", a.CreateSandbox, names(a.StartApps), tc.newSandbox)
			}
		})
	}
}

// An init container OOM-killed with exit code 0 has failed (the kubelet's
// isInitContainerFailed): under Never the pod, stopped for good, is
// Failed, not Pending for ever (once would wait for its timeout).
func TestOOMKilledInitContainerFailsTheNeverPod(t *testing.T) {
	pod := testPod(v1.RestartPolicyNever, []string{"i1"}, "a")
	st := newState(pod).sandbox("s", 0, engine.StateExited).container("s", "i1", 0, engine.StateExited, 0).build()
	st.Containers[0].OOMKilled = true
	a := computePodActions(pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
	if !a.PodFailed || a.CreateSandbox || !a.Empty() {
		t.Fatalf("actions: PodFailed=%v CreateSandbox=%v Empty=%v, want the pod failed and nothing to do", a.PodFailed, a.CreateSandbox, a.Empty())
	}
	if s := computePodStatus(statusInput{Pod: pod, State: st, Actions: a, Runtime: "docker", Now: t0.Add(time.Hour)}); s.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", s.Phase)
	}
}
