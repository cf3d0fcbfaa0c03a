package e2e

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// The readiness probe runs the moment the startup probe passes, as the
// kubelet triggers it (conformance: "should be ready immediately after
// startupProbe succeeds"). Its period is an hour, so a readiness probe
// left to its next tick would not make the pod ready within the wait.
func TestReadinessProbedWhenStartupPasses(t *testing.T) {
	e := newEnv(t)
	e.write("startup.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: startup}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo ok >/tmp/health; exec sleep 3600"]
    startupProbe:
      exec: {command: ["cat", "/tmp/startup"]}
      periodSeconds: 1
      failureThreshold: 3600
    readinessProbe:
      exec: {command: ["cat", "/tmp/health"]}
      periodSeconds: 3600
`, testImage))
	base, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "startup-" + e.node
	startupRuns := func() float64 {
		return metric(t, base, "podrun_probe_results_total", map[string]string{"probe_type": "Startup", "result": "failure"})
	}
	// The readiness worker has had its first (gated) tick by the time the
	// startup probe has failed twice.
	waitFor(t, "the startup probe to fail twice", time.Minute, func() bool { return startupRuns() >= 2 })
	if p := e.pods()[name]; podReady(p) {
		t.Fatal("ready before the startup probe passed")
	}

	e.execIn("startup", "app", "touch", "/tmp/startup")
	waitFor(t, "Ready, long before the readiness period (1 h) ends", 2*time.Minute, func() bool {
		return podReady(e.pods()[name])
	})
}

// A pod whose manifest is removed is not ready while its containers stop
// (here a SIGTERM trap that takes 20 s), and its liveness probe no longer
// runs, though the trap removes the file it checks (conformance: "should
// mark readiness on pods to false and disable liveness probes while pod is
// in progress of terminating").
func TestTerminatingPodNotReadyLivenessOff(t *testing.T) {
	e := newEnv(t)
	path := e.write("term.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: term}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: %s
    command:
    - sh
    - -c
    - |
      _term() {
        rm -f /tmp/ready /tmp/liveness
        sleep 20
        exit 0
      }
      trap _term TERM
      touch /tmp/ready /tmp/liveness
      while true; do sleep 1; done
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      exec: {command: ["cat", "/tmp/liveness"]}
      periodSeconds: 1
      failureThreshold: 1
`, testImage))
	base, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "term-" + e.node
	waitFor(t, "running and ready", 2*time.Minute, func() bool { return podReady(e.pods()[name]) })
	liveFailures := func() float64 {
		return metric(t, base, "podrun_probe_results_total", map[string]string{"probe_type": "Liveness", "result": "failure"})
	}
	if n := liveFailures(); n != 0 {
		t.Fatalf("%v liveness failures before the removal", n)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Not ready while it is still there: the trap keeps it 20 s.
	waitFor(t, "not ready while terminating", time.Minute, func() bool {
		p, ok := e.pods()[name]
		if !ok {
			t.Fatal("the pod was gone before it was shown not ready")
		}
		return !podReady(p)
	})
	if e.running()["term/app"] == "" {
		t.Fatal("the container had stopped before the pod was shown not ready")
	}
	waitFor(t, "the pod gone", 2*time.Minute, func() bool {
		_, ok := e.pods()[name]
		return !ok
	})
	if n := liveFailures(); n != 0 {
		t.Fatalf("the liveness probe ran %v times (failing) while the pod terminated", n)
	}
}
