package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
)

// TestProbeKillStartsItsSuccessor: as in the kubelet, the sync that kills a
// container for a failed liveness or startup probe also starts its
// successor (under Always and OnFailure; a sidecar always), so the exit
// code the killed run ends with does not decide the restart. The
// crash-loop back-off counts from the newest run that had exited before
// the kill: none, or one long gone, lets the successor start at once; one
// within the back-off holds it, and the next sync decides on the killed
// run's exit as for a crash.
func TestProbeKillStartsItsSuccessor(t *testing.T) {
	liveness := health.Verdict{Probe: health.ProbeLiveness, Message: "Liveness probe failed: boom"}
	for _, tc := range []struct {
		name    string
		policy  v1.RestartPolicy
		sidecar bool
		// exitedAgo, when set, is how long before the kill an earlier run
		// exited, its restart having counted towards the back-off.
		exitedAgo time.Duration
		wantStart bool
	}{
		{name: "Always, nothing exited before", policy: v1.RestartPolicyAlways, wantStart: true},
		{name: "OnFailure, nothing exited before", policy: v1.RestartPolicyOnFailure, wantStart: true},
		{name: "Never", policy: v1.RestartPolicyNever},
		{name: "Always, the run before exited 3 s ago", policy: v1.RestartPolicyAlways, exitedAgo: 3 * time.Second},
		{name: "Always, the run before exited a minute ago", policy: v1.RestartPolicyAlways, exitedAgo: time.Minute,
			wantStart: true},
		{name: "sidecar under Never", policy: v1.RestartPolicyNever, sidecar: true, wantStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.policy, nil, "app")
			name := "app"
			if tc.sidecar {
				pod = sidecarTestPod()
				pod.Spec.RestartPolicy = tc.policy
				name = "proxy"
			}
			b := newState(pod).sandbox("s", 0, engine.StateRunning)
			attempt := 0
			if tc.exitedAgo > 0 {
				b.container("s", name, 0, engine.StateExited, 137)
				attempt = 1
			}
			b.container("s", name, attempt, engine.StateRunning, 0)
			if tc.sidecar {
				b.container("s", "setup", 0, engine.StateExited, 0).container("s", "app", 0, engine.StateRunning, 0)
			}
			st := b.build()
			clk := testclock.NewFakeClock(t0.Add(time.Hour))
			bo := newBackoff(clk)
			c := findContainer(pod, name)
			if prev := st.lastExited(name); prev != nil {
				clk.SetTime(prev.FinishedAt)
				bo.Next(backoffKey(pod, c), prev.FinishedAt) // its restart
				clk.SetTime(prev.FinishedAt.Add(tc.exitedAgo))
			}
			running := st.latest(name, "s")
			a := computePodActions(pod, st, bo, killStub{running.ID: liveness})

			if got := killNames(a.Kill); !eq(got, []string{running.ID}) {
				t.Errorf("killed %v, want [%s]", got, running.ID)
			}
			started := false
			if tc.sidecar {
				started = eq(names(a.initStarts()), []string{name})
			} else {
				started = eq(names(a.StartApps), []string{name})
			}
			if started != tc.wantStart {
				t.Errorf("successor started in the killing sync: %v, want %v (apps %v, init %v)", started, tc.wantStart,
					names(a.StartApps), names(a.initStarts()))
			}
			w, waits := a.Waiting[name]
			if held := !tc.wantStart && tc.exitedAgo > 0; held != (waits && w.Reason == "CrashLoopBackOff") {
				t.Errorf("waiting %+v (present %v), want CrashLoopBackOff: %v", w, waits, held)
			}
		})
	}
}
