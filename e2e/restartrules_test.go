package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// exitOncePod is a pod of restartPolicy Never whose containers (YAML list
// items, each its restart fields) share the emptyDir "mark".
func exitOncePod(name string, containers ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes:
  - name: mark
    emptyDir: {}
  containers:
%s`, name, strings.Join(containers, ""))
}

// exitOnce is a container that exits code on its first run (it leaves a
// mark in the pod's emptyDir) and 0 on its next, with the restart fields
// policy (YAML, indented as a container's fields).
func exitOnce(name string, code int, policy string) string {
	return fmt.Sprintf(`  - name: %[1]s
    image: %[2]s
    command: ["sh", "-c", "if [ -f /mark/ran-%[1]s ]; then exit 0; fi; touch /mark/ran-%[1]s; exit %[3]d"]
    volumeMounts: [{name: mark, mountPath: /mark}]
%[4]s`, name, testImage, code, policy)
}

// restartOn42 is a container's restartPolicy Never with a rule that
// restarts it on exit code 42.
const restartOn42 = `    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}
`

// restartRulePod has two containers under restartOn42: "rule" exits 42
// on its first run and 0 on its second; "other" exits 1 first.
func restartRulePod(name string) string {
	return exitOncePod(name, exitOnce("rule", 42, restartOn42), exitOnce("other", 1, restartOn42))
}

// failOncePod is the Job conformance spec's pod: its container,
// restartPolicy OnFailure under the pod's Never, fails its first run and
// succeeds its second.
func failOncePod(name string) string {
	return exitOncePod(name, exitOnce("job", 1, "    restartPolicy: OnFailure\n"))
}

// TestContainerRestartRules: under a pod's restartPolicy Never, the
// container that exits 42 is restarted by its rule, on real Docker; the
// one that exits 1 is not; then nothing will run again, and the pod is
// Failed (one container failed for good), as the kubelet's getPhase says.
// A container's own OnFailure restarts it under the pod's Never.
func TestContainerRestartRules(t *testing.T) {
	e := newEnv(t)
	// The container's OnFailure overrides the pod's Never: restarted once,
	// then the pod Succeeded (a Job's pod failure policy never sees it fail).
	failOnce := e.write("failonce.yaml", failOncePod("failonce"))
	r := e.podrun(3*time.Minute, "once", "--wait", "complete", "--timeout", "2m", "-o", "json", failOnce)
	if p := onceReport(t, r)["failonce-"+e.node]; r.code != 0 || p.Status.Phase != v1.PodSucceeded || statusOf(t, p, "job").RestartCount != 1 {
		t.Errorf("failonce: exit %d, phase %s, statuses %+v; want Succeeded after one restart\n%s",
			r.code, p.Status.Phase, p.Status.ContainerStatuses, r.stderr)
	}

	rules := e.write("rules.yaml", restartRulePod("rules"))
	r = e.podrun(3*time.Minute, "once", "--wait", "complete", "--timeout", "2m", "-o", "json", rules)
	if r.code != 1 {
		t.Fatalf("once --wait complete: exit %d, want 1 (the pod failed)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	p, ok := onceReport(t, r)["rules-"+e.node]
	if !ok {
		t.Fatalf("no pod in the report:\n%s", r.stdout)
	}
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", p.Status.Phase)
	}
	rule := statusOf(t, p, "rule")
	// Its second run exits 0 only if the first ran (and exited 42).
	if rule.RestartCount != 1 || rule.State.Terminated == nil || rule.State.Terminated.ExitCode != 0 {
		t.Errorf("container rule: want one restart after exit 42, then exit 0; got %+v", rule)
	}
	other := statusOf(t, p, "other")
	if other.RestartCount != 0 || other.State.Terminated == nil || other.State.Terminated.ExitCode != 1 {
		t.Errorf("container other: want one run that exited 1, not restarted; got %+v", other)
	}
	if run := e.running(); len(run) != 0 {
		t.Errorf("after the pod finished, still running: %v", run)
	}
}
