package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// sidecarPod has a sidecar that says it started (its startup probe) only
// once it has written /shared/up, an init container that fails unless the
// sidecar has started, and an app.
func sidecarPod(name string, policy v1.RestartPolicy, appCommand string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
  volumes:
  - name: shared
    emptyDir: {}
  initContainers:
  - name: proxy
    image: %s
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; touch /shared/up; exec sleep 3600"]
    volumeMounts:
    - {name: shared, mountPath: /shared}
    startupProbe:
      exec: {command: ["test", "-f", "/shared/up"]}
      periodSeconds: 1
      failureThreshold: 60
    readinessProbe:
      exec: {command: ["test", "-f", "/shared/up"]}
      periodSeconds: 1
  - name: setup
    image: %s
    command: ["test", "-f", "/shared/up"]
    volumeMounts:
    - {name: shared, mountPath: /shared}
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", %q]
`, name, policy, testImage, testImage, testImage, appCommand)
}

// TestSidecarAdoptedAndRestartedAlone brings a pod with a sidecar up with
// once, hands it to watch (which must adopt it as it is), then kills the
// sidecar: the sidecar alone is restarted, the app and the sandbox stay.
func TestSidecarAdoptedAndRestartedAlone(t *testing.T) {
	e := newEnv(t)
	e.write("pod.yaml", sidecarPod("side", v1.RestartPolicyAlways, "exec sleep 3600"))
	if r := e.podrun(3*time.Minute, "once", "--wait", "ready", e.dir); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	before := e.running()
	if before["side/proxy"] == "" || before["side/app"] == "" || before["side/POD"] == "" {
		t.Fatalf("after once, running: %v", before)
	}

	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	e.waitSynced("side")
	p := e.pods()["side-"+e.node]
	// The init container ran once: it started only after the sidecar's
	// startup probe passed (before that, /shared/up is missing and it fails).
	if st := initStatus(&p, "setup"); st == nil || st.RestartCount != 0 || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Errorf("init container setup: %+v, want one successful run", st)
	}
	if now := e.running(); !sameIDs(now, before) {
		t.Fatalf("watch did not adopt the pod as it was:\nbefore %v\nafter  %v", before, now)
	}

	if err := docker.ContainerKill(context.Background(), before["side/proxy"], "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sidecar to be restarted", time.Minute, func() bool {
		r := e.running()
		return r["side/proxy"] != "" && r["side/proxy"] != before["side/proxy"]
	})
	now := e.running()
	if now["side/app"] != before["side/app"] || now["side/POD"] != before["side/POD"] {
		t.Fatalf("the sidecar's death touched the app or the sandbox:\nbefore %v\nafter  %v", before, now)
	}
	// While the restarted sidecar is not ready, neither is the pod; then it
	// is again.
	waitFor(t, "the pod to be ready again", time.Minute, func() bool {
		p := e.pods()["side-"+e.node]
		st := initStatus(&p, "proxy")
		return st != nil && st.Ready && st.RestartCount == 1 && podReady(p)
	})
}

// TestSidecarJobCompletes runs a Job-like pod (restartPolicy Never) whose
// app finishes while its sidecar would run forever: once --wait complete
// ends, the pod Succeeded, the sidecar stopped.
func TestSidecarJobCompletes(t *testing.T) {
	e := newEnv(t)
	e.write("job.yaml", sidecarPod("job", v1.RestartPolicyNever, "echo done"))
	r := e.podrun(3*time.Minute, "once", "--wait", "complete", "-o", "json", e.dir)
	if r.code != 0 {
		t.Fatalf("once --wait complete: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "once's report", r.stdout, `"phase": "Succeeded"`)
	if run := e.running(); len(run) != 0 {
		t.Errorf("after the job completed, still running: %v", run)
	}
}

func initStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}
