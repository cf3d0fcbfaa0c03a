package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
)

// probeStub says which containers are started and ready; none must be
// killed.
type probeStub struct{ started, ready map[string]bool }

func (p probeStub) KillVerdict(string) (health.Verdict, bool) { return health.Verdict{}, false }
func (p probeStub) Started(id string) bool                    { return p.started[id] }
func (p probeStub) Ready(id string) bool                      { return p.ready[id] }

func sidecarTestPod() *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, []string{"proxy", "setup"}, "app")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers[0].RestartPolicy = &always
	return pod
}

// TestSidecarStartGatesNextInit: the init container after a sidecar starts
// only once the sidecar has started (its startup probe passed).
func TestSidecarStartGatesNextInit(t *testing.T) {
	pod := sidecarTestPod()
	st := newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "proxy", 0, engine.StateRunning, 0).build()
	bo := newBackoff(testclock.NewFakeClock(t0.Add(time.Hour)))

	a := computePodActions(pod, st, bo, probeStub{})
	if a.StartInit != nil || len(a.StartApps) != 0 {
		t.Fatalf("sidecar not started yet: started init %v, apps %v; want nothing", a.StartInit, names(a.StartApps))
	}
	if w := a.Waiting["app"]; w.Reason != "PodInitializing" {
		t.Errorf("app waiting %+v, want PodInitializing", w)
	}

	a = computePodActions(pod, st, bo, probeStub{started: map[string]bool{"proxy-0": true}})
	if a.StartInit == nil || a.StartInit.Name != "setup" {
		t.Fatalf("sidecar started: started init %v, want setup", a.StartInit)
	}

	// Once the app runs, a restarted sidecar that has not started again
	// holds nothing back.
	st = newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "proxy", 1, engine.StateRunning, 0).
		container("s", "setup", 0, engine.StateExited, 0).container("s", "app", 0, engine.StateRunning, 0).build()
	if a := computePodActions(pod, st, bo, probeStub{}); !a.Empty() {
		t.Errorf("restarted sidecar with the app running: actions %+v, want none", a)
	}
}

// TestSidecarReadinessCountsForPod: a running app with an unready sidecar
// makes an unready pod; initialised needs the sidecar started.
func TestSidecarReadinessCountsForPod(t *testing.T) {
	pod := sidecarTestPod()
	st := newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "proxy", 0, engine.StateRunning, 0).
		container("s", "setup", 0, engine.StateExited, 0).container("s", "app", 0, engine.StateRunning, 0).build()
	cond := func(s v1.PodStatus, typ v1.PodConditionType) v1.ConditionStatus {
		for _, c := range s.Conditions {
			if c.Type == typ {
				return c.Status
			}
		}
		return ""
	}
	for _, tc := range []struct {
		name         string
		probes       probeStub
		ready, inits v1.ConditionStatus
	}{
		{"all ready", probeStub{started: map[string]bool{"proxy-0": true, "app-0": true},
			ready: map[string]bool{"proxy-0": true, "app-0": true}}, v1.ConditionTrue, v1.ConditionTrue},
		{"sidecar unready", probeStub{started: map[string]bool{"proxy-0": true, "app-0": true},
			ready: map[string]bool{"app-0": true}}, v1.ConditionFalse, v1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0, Probes: tc.probes})
			if got := cond(s, v1.PodReady); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if got := cond(s, v1.ContainersReady); got != tc.ready {
				t.Errorf("ContainersReady %s, want %s", got, tc.ready)
			}
			if got := cond(s, v1.PodInitialized); got != tc.inits {
				t.Errorf("Initialized %s, want %s", got, tc.inits)
			}
		})
	}

	// Before the app exists, a running sidecar that has not started leaves
	// the pod uninitialised.
	st = newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "proxy", 0, engine.StateRunning, 0).build()
	s := computePodStatus(statusInput{Pod: pod, State: st, Runtime: "docker", Now: t0, Probes: probeStub{}})
	if got := cond(s, v1.PodInitialized); got != v1.ConditionFalse {
		t.Errorf("sidecar not started: Initialized %s, want False", got)
	}
}

// killStub has the containers of kill killed by a probe verdict; every
// container is started.
type killStub map[string]health.Verdict

func (k killStub) KillVerdict(id string) (health.Verdict, bool) { v, ok := k[id]; return v, ok }
func (k killStub) Started(string) bool                          { return true }
func (k killStub) Ready(string) bool                            { return true }

// TestProbeKillMessages: a probe's kill carries the kubelet's Killing
// message, for a sidecar ("Init container ...") and for an app container,
// restarted or not under the pod's restart policy.
func TestProbeKillMessages(t *testing.T) {
	bo := newBackoff(testclock.NewFakeClock(t0.Add(time.Hour)))
	liveness := health.Verdict{Probe: health.ProbeLiveness, Message: "Liveness probe failed: boom"}
	startup := health.Verdict{Probe: health.ProbeStartup, Message: "Startup probe failed: boom"}
	for _, tc := range []struct {
		policy v1.RestartPolicy
		want   map[string]string
	}{
		{v1.RestartPolicyAlways, map[string]string{
			"proxy": "Init container proxy failed liveness probe",
			"app":   "Container app failed startup probe, will be restarted",
		}},
		{v1.RestartPolicyNever, map[string]string{
			"proxy": "Init container proxy failed liveness probe",
			"app":   "Container app failed startup probe",
		}},
	} {
		pod := sidecarTestPod()
		pod.Spec.RestartPolicy = tc.policy
		st := newState(pod).sandbox("s", 0, engine.StateRunning).container("s", "proxy", 0, engine.StateRunning, 0).
			container("s", "setup", 0, engine.StateExited, 0).container("s", "app", 0, engine.StateRunning, 0).build()
		a := computePodActions(pod, st, bo, killStub{"proxy-0": liveness, "app-0": startup})
		got := map[string]string{}
		for _, k := range a.Kill {
			got[k.Container.Name] = k.Event
		}
		if len(got) != len(tc.want) || got["proxy"] != tc.want["proxy"] || got["app"] != tc.want["app"] {
			t.Errorf("%s: Killing messages %q, want %q", tc.policy, got, tc.want)
		}
	}
}
