package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// withContainerPolicy sets the first app container's own restartPolicy and
// restartPolicyRules.
func withContainerPolicy(pod *v1.Pod, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
	pod.Spec.Containers[0].RestartPolicy = &policy
	pod.Spec.Containers[0].RestartPolicyRules = rules
	return pod
}

func restartOn(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// TestContainerRestartRules: a container's own restartPolicy overrides the
// pod's, and its restartPolicyRules restart it on matching exit codes
// (KEP-5307); the decision to restart and the pod's phase agree, as in
// the kubelet's computePodActions and getPhase.
func TestContainerRestartRules(t *testing.T) {
	always, never, onFailure := v1.RestartPolicyAlways, v1.RestartPolicyNever, v1.RestartPolicyOnFailure
	cNever, cAlways, cOnFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure
	in, notIn := v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn
	tests := []struct {
		name      string
		pod       *v1.Pod
		exit      int
		restarted bool
		phase     v1.PodPhase // once the container has exited (and, when restarted, before the restart)
	}{
		{"rule In matches: restarted under pod and container Never", withContainerPolicy(testPod(never, nil, "a"), cNever, restartOn(in, 42)), 42, true, v1.PodRunning},
		{"rule In does not match: not restarted", withContainerPolicy(testPod(never, nil, "a"), cNever, restartOn(in, 42)), 1, false, v1.PodFailed},
		{"rule NotIn matches", withContainerPolicy(testPod(never, nil, "a"), cNever, restartOn(notIn, 0)), 3, true, v1.PodRunning},
		{"rule NotIn does not match: Never decides", withContainerPolicy(testPod(never, nil, "a"), cNever, restartOn(notIn, 0)), 0, false, v1.PodSucceeded},
		{"first matching rule decides, later rules unread", withContainerPolicy(testPod(never, nil, "a"), cNever, restartOn(in, 7), restartOn(notIn, 7)), 7, true, v1.PodRunning},
		{"container Never under pod Always", withContainerPolicy(testPod(always, nil, "a"), cNever), 1, false, v1.PodFailed},
		{"container Never under pod Always, exit 0", withContainerPolicy(testPod(always, nil, "a"), cNever), 0, false, v1.PodSucceeded},
		{"container Always under pod Never", withContainerPolicy(testPod(never, nil, "a"), cAlways), 1, true, v1.PodRunning},
		{"container Always under pod Never, exit 0", withContainerPolicy(testPod(never, nil, "a"), cAlways), 0, true, v1.PodRunning},
		{"container OnFailure under pod Never, failed", withContainerPolicy(testPod(never, nil, "a"), cOnFailure), 1, true, v1.PodRunning},
		{"container OnFailure under pod Never, succeeded", withContainerPolicy(testPod(never, nil, "a"), cOnFailure), 0, false, v1.PodSucceeded},
		{"container OnFailure under pod Always, succeeded", withContainerPolicy(testPod(always, nil, "a"), cOnFailure), 0, false, v1.PodSucceeded},
		{"rule matches under container OnFailure, exit 0", withContainerPolicy(testPod(onFailure, nil, "a"), cOnFailure, restartOn(in, 0)), 0, true, v1.PodRunning},
		{"no container policy: the pod's (Always)", testPod(always, nil, "a"), 1, true, v1.PodRunning},
		{"no container policy: the pod's (Never)", testPod(never, nil, "a"), 1, false, v1.PodFailed},
		{"RestartAllContainers is not carried out: the container's policy decides",
			withContainerPolicy(testPod(never, nil, "a"), cNever, v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: in, Values: []int32{42}}}), 42, false, v1.PodFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newState(tc.pod).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateExited, tc.exit).build()
			a := computePodActions(tc.pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			if got := len(a.StartApps) == 1; got != tc.restarted {
				t.Errorf("restarted = %v, want %v (actions %+v)", got, tc.restarted, a)
			}
			// A container that is not restarted leaves the pod finished:
			// its sandbox is stopped, and not made again once stopped.
			if a.StopSandbox == tc.restarted {
				t.Errorf("StopSandbox = %v with restarted = %v", a.StopSandbox, tc.restarted)
			}
			s := computePodStatus(statusInput{Pod: tc.pod, State: st, Runtime: "docker", Now: t0})
			if s.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tc.phase)
			}
			stopped := newState(tc.pod).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateExited, tc.exit).build()
			again := computePodActions(tc.pod, stopped, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			if again.CreateSandbox != tc.restarted {
				t.Errorf("with the sandbox stopped: CreateSandbox = %v, want %v", again.CreateSandbox, tc.restarted)
			}
		})
	}
}

// TestRestartRuleBacksOff: a container a rule restarts crash-loops with
// the kubelet's back-off, as one its policy restarts.
func TestRestartRuleBacksOff(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	bo := newBackoff(clk)
	pod := withContainerPolicy(testPod(v1.RestartPolicyNever, nil, "a"), v1.ContainerRestartPolicyNever,
		restartOn(v1.ContainerRestartRuleOnExitCodesOpIn, 42))
	st := newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateExited, 42).build()
	st.Containers[0].FinishedAt = clk.Now()
	a := computePodActions(pod, st, bo, nil)
	if len(a.StartApps) != 1 || a.Reasons["a"] != "exited with code 42, restartPolicyRules[0] matched" {
		t.Fatalf("first exit: start %v, reason %q", names(a.StartApps), a.Reasons["a"])
	}
	bo.Next(backoffKey(pod, &pod.Spec.Containers[0]), st.Containers[0].FinishedAt)

	st = newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "a", 1, engine.StateExited, 42).build()
	st.Containers[0].FinishedAt = clk.Now()
	a = computePodActions(pod, st, bo, nil)
	if len(a.StartApps) != 0 || a.Waiting["a"].Reason != "CrashLoopBackOff" {
		t.Fatalf("second exit at once: start %v, waiting %+v; want CrashLoopBackOff", names(a.StartApps), a.Waiting)
	}
	s := computePodStatus(statusInput{Pod: pod, State: st, Actions: a, Runtime: "docker", Now: clk.Now()})
	if s.Phase != v1.PodRunning || s.ContainerStatuses[0].State.Waiting == nil || s.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("status in back-off: phase %s, %+v", s.Phase, s.ContainerStatuses[0])
	}
}

// TestInitContainerRestartPolicy: a (non-sidecar) init container's own
// restartPolicy and rules decide whether its failure is retried or fails
// the pod, as the kubelet's computeInitContainerActions and getPhase.
func TestInitContainerRestartPolicy(t *testing.T) {
	init := func(podPolicy v1.RestartPolicy, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
		p := testPod(podPolicy, []string{"i"}, "a")
		p.Spec.InitContainers[0].RestartPolicy = &policy
		p.Spec.InitContainers[0].RestartPolicyRules = rules
		return p
	}
	in := v1.ContainerRestartRuleOnExitCodesOpIn
	tests := []struct {
		name   string
		pod    *v1.Pod
		exit   int
		failed bool
	}{
		{"OnFailure under pod Never: retried", init(v1.RestartPolicyNever, v1.ContainerRestartPolicyOnFailure), 1, false},
		{"Never under pod Always: fails the pod", init(v1.RestartPolicyAlways, v1.ContainerRestartPolicyNever), 1, true},
		{"rule match under Never: retried", init(v1.RestartPolicyNever, v1.ContainerRestartPolicyNever, restartOn(in, 3)), 3, false},
		{"no rule match under Never: fails the pod", init(v1.RestartPolicyNever, v1.ContainerRestartPolicyNever, restartOn(in, 3)), 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newState(tc.pod).sandbox("s", 0, engine.StateRunning).container("s", "i", 0, engine.StateExited, tc.exit).build()
			a := computePodActions(tc.pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			retried := a.StartInit != nil && a.StartInit.Name == "i"
			if a.PodFailed != tc.failed || retried == tc.failed {
				t.Errorf("PodFailed %v, retried %v; want failed %v", a.PodFailed, retried, tc.failed)
			}
			s := computePodStatus(statusInput{Pod: tc.pod, State: st, Actions: a, Runtime: "docker", Now: t0})
			want := v1.PodPending
			if tc.failed {
				want = v1.PodFailed
			}
			if s.Phase != want {
				t.Errorf("phase %s, want %s", s.Phase, want)
			}
		})
	}
}
