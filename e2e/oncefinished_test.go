package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	v1 "k8s.io/api/core/v1"
)

// TestOnceStopsAFinishedJobsSandbox: `once --wait running` of a job and of
// a pod that comes up only after the job has finished (its init container
// waits for the file the job leaves) exits with the job's sandbox stopped,
// as the kubelet stops a finished pod's: no podrun is left to stop it.
func TestOnceStopsAFinishedJobsSandbox(t *testing.T) {
	e := newEnv(t)
	sig := filepath.Join(e.dir, "sig")
	job := e.write("job.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes: [{name: sig, hostPath: {path: %[2]s, type: DirectoryOrCreate}}]
  containers:
  - name: job
    image: %[1]s
    command: ["touch", "/sig/done"]
    volumeMounts: [{name: sig, mountPath: /sig}]
`, testImage, sig))
	after := e.write("after.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: after}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: sig, hostPath: {path: %[2]s, type: DirectoryOrCreate}}]
  initContainers:
  - name: wait
    image: %[1]s
    command: ["sh", "-c", "until [ -f /sig/done ]; do sleep 0.05; done"]
    volumeMounts: [{name: sig, mountPath: /sig}]
  containers:
  - {name: app, image: %[1]s, command: ["sleep", "3600"]}
`, testImage, sig))
	r := e.podrun(2*time.Minute, "once", job, after, "--wait", "running", "--timeout", "90s", "-o", "json")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var report v1.PodList
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatalf("report: %v\n%s", err, r.stdout)
	}
	for _, p := range report.Items {
		if p.Name == "job-"+e.node && p.Status.Phase != v1.PodSucceeded {
			t.Errorf("job reported %s, want Succeeded: it had finished before the other pod came up", p.Status.Phase)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	running, err := docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "io.podrun.node="+e.node), filters.Arg("label", "io.podrun.pod.name=job-"+e.node),
		filters.Arg("label", "io.podrun.container.type=sandbox"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 0 {
		t.Errorf("the finished job's sandbox %.12s still runs after once exited", running[0].ID)
	}
	if r := e.podrun(time.Minute, "down", "--all"); r.code != 0 {
		t.Errorf("down: exit %d\n%s", r.code, r.stderr)
	}
}
