package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	v1 "k8s.io/api/core/v1"
)

// securityPod is a pod of the test image with one container app running
// sh -c script under restartPolicy; spec and securityContext are indented
// YAML added to the pod's spec and to the container.
func securityPod(name, policy, script, spec, securityContext string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
%s  containers:
  - name: app
    image: %s
    command: [sh, -c, %q]
%s`, name, policy, spec, testImage, script, securityContext)
}

// userImage commits the test image with its user set to user (a
// Dockerfile USER) under a tag of its own, removed at the end of the test,
// and returns the tag.
func userImage(t *testing.T, user string) string {
	t.Helper()
	ctx := context.Background()
	ref := "podrun-e2e/user:" + randSuffix()
	c, err := docker.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"true"}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	img, err := docker.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref, Changes: []string{"USER " + user}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true}) })
	return ref
}

// onceReport runs once and returns its exit code and its -o json report's
// pods by name.
func (e *env) onceReport(timeout string, args ...string) (int, map[string]v1.Pod, result) {
	e.t.Helper()
	r := e.podrun(3*time.Minute, "once", append([]string{"--timeout", timeout, "-o", "json"}, args...)...)
	var report struct {
		Items []v1.Pod `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		e.t.Fatalf("once report: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	pods := map[string]v1.Pod{}
	for _, p := range report.Items {
		pods[p.Name] = p
	}
	return r.code, pods, r
}

// waitingOf is the waiting state of the pod's container app, or nil.
func waitingOf(p v1.Pod) *v1.ContainerStateWaiting {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "app" {
			return cs.State.Waiting
		}
	}
	return nil
}

// TestSecurityRefusedContainersWait: runAsNonRoot over the test image
// (which runs as root, no USER) and over one whose USER is a name, and a
// runtimeClassName nobody declared:
// each pod's container waits with CreateContainerConfigError and the
// kubelet's (or podrun's) message, in once's report; no app container is
// made, and the pod of the unknown class gets no sandbox either.
func TestSecurityRefusedContainersWait(t *testing.T) {
	e := newEnv(t)
	e.write("root.yaml", securityPod("rootimage", "Always", "sleep 3600", "",
		"    securityContext: {runAsNonRoot: true}\n"))
	noclass := e.write("noclass.yaml", securityPod("noclass", "Always", "sleep 3600", "  runtimeClassName: nope\n", ""))
	named := userImage(t, "nobody")
	e.write("named.yaml", strings.Replace(securityPod("imagename", "Always", "sleep 3600", "",
		"    securityContext: {runAsNonRoot: true}\n"), testImage, named, 1))

	code, pods, r := e.onceReport("20s", e.dir)
	if code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, r.stdout, r.stderr)
	}
	root := "rootimage-" + e.node
	w := waitingOf(pods[root])
	if w == nil || w.Reason != "CreateContainerConfigError" || w.Message != fmt.Sprintf(
		"container has runAsNonRoot and image will run as root (pod: %q, container: app)",
		root+"_default("+string(pods[root].UID)+")") {
		t.Errorf("%s: waiting %+v", root, w)
	}
	// once warned of the class before it started anything, at its line.
	contains(t, "stderr", r.stderr, noclass+`:8: spec.runtimeClassName: RuntimeClass \"nope\" not found`)
	w = waitingOf(pods["noclass-"+e.node])
	if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, `RuntimeClass "nope" not found`) ||
		!strings.Contains(w.Message, "--runtime-class nope=RUNTIME") {
		t.Errorf("noclass: waiting %+v", w)
	}
	w = waitingOf(pods["imagename-"+e.node])
	if w == nil || w.Reason != "CreateContainerConfigError" ||
		!strings.Contains(w.Message, "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root") {
		t.Errorf("imagename: waiting %+v", w)
	}
	for _, c := range e.containers() {
		pod, typ := c.Labels["io.podrun.pod.name"], c.Labels["io.podrun.container.type"]
		if typ != "sandbox" || (pod != root && pod != "imagename-"+e.node) {
			t.Errorf("container %s of %s (%s) was made", c.Names, pod, typ)
		}
	}
	// The table report says it as well.
	r = e.podrun(3*time.Minute, "once", "--timeout", "10s", e.dir)
	contains(t, "table report", r.stdout, "CreateContainerConfigError: container has runAsNonRoot and image will run as root")
}

// TestSecurityNonRootUserAndRuntimeClass: runAsNonRoot with runAsUser 1000
// runs, as uid 1000, and so does it without a runAsUser over an image
// whose USER is 1000:1000; a RuntimeClass of --runtime-class and one of a
// RuntimeClass object in the manifests run the pod's sandbox and
// container with the Docker runtime they name (io.containerd.runc.v2 is
// not Docker's default, runc, so the mapping is seen).
func TestSecurityNonRootUserAndRuntimeClass(t *testing.T) {
	e := newEnv(t)
	e.write("nonroot.yaml", securityPod("nonroot", "Never", "id -u", "",
		"    securityContext: {runAsNonRoot: true, runAsUser: 1000}\n"))
	uid := userImage(t, "1000:1000")
	e.write("imageuser.yaml", strings.Replace(securityPod("imageuser", "Never", "id -u", "",
		"    securityContext: {runAsNonRoot: true}\n"), testImage, uid, 1))
	e.write("flagclass.yaml", securityPod("flagclass", "Never", "true", "  runtimeClassName: shim\n", ""))
	e.write("objclass.yaml", securityPod("objclass", "Never", "true", "  runtimeClassName: plain\n", "")+`---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: plain
handler: runc
`)
	code, pods, r := e.onceReport("90s", "--wait", "complete", "--runtime-class", "shim=io.containerd.runc.v2", e.dir)
	if code != 0 {
		t.Fatalf("once: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, r.stdout, r.stderr)
	}
	for _, name := range []string{"nonroot", "imageuser", "flagclass", "objclass"} {
		if p := pods[name+"-"+e.node]; p.Status.Phase != v1.PodSucceeded {
			t.Errorf("%s: phase %s", name, p.Status.Phase)
		}
	}
	for _, name := range []string{"nonroot", "imageuser"} {
		logs := e.podrun(time.Minute, "logs", name+"-"+e.node, "-c", "app")
		if logs.code != 0 || strings.TrimSpace(logs.stdout) != "1000" {
			t.Errorf("%s: id -u printed %q (exit %d, %s), want 1000", name, logs.stdout, logs.code, logs.stderr)
		}
	}

	want := map[string]string{"flagclass-" + e.node: "io.containerd.runc.v2", "objclass-" + e.node: "runc"}
	seen := map[string]int{}
	for _, c := range e.containers() {
		pod := c.Labels["io.podrun.pod.name"]
		rt, ok := want[pod]
		if !ok {
			continue
		}
		ins, err := docker.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ins.HostConfig.Runtime != rt {
			t.Errorf("%s %s: runtime %q, want %q", pod, c.Labels["io.podrun.container.type"], ins.HostConfig.Runtime, rt)
		}
		seen[pod]++
	}
	for pod := range want {
		if seen[pod] != 2 {
			t.Errorf("%s: %d containers inspected, want its sandbox and app", pod, seen[pod])
		}
	}
}

// psPods runs `podrun ps -o json` against the env's watch and returns its
// pods by name.
func (e *env) psPods() map[string]v1.Pod {
	e.t.Helper()
	r := e.podrun(30*time.Second, "ps", "-o", "json")
	var list struct {
		Items []v1.Pod `json:"items"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		return nil
	}
	out := map[string]v1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// TestSecurityWatchShowsRefusalsAndTakesNewClasses: under watch, `podrun
// ps -o json` shows a root image under runAsNonRoot and an undeclared
// class waiting with CreateContainerConfigError; a RuntimeClass written
// into the watched directory afterwards is used at the pod's next try,
// and it runs, with that runtime.
func TestSecurityWatchShowsRefusalsAndTakesNewClasses(t *testing.T) {
	e := newEnv(t)
	e.write("root.yaml", securityPod("rootimage", "Always", "sleep 3600", "",
		"    securityContext: {runAsNonRoot: true}\n"))
	e.write("late.yaml", securityPod("late", "Always", "sleep 3600", "  runtimeClassName: late\n", ""))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)

	root, late := "rootimage-"+e.node, "late-"+e.node
	var last map[string]v1.Pod
	waitFor(t, "ps to show both waiting with CreateContainerConfigError", time.Minute, func() bool {
		last = e.psPods()
		a, b := waitingOf(last[root]), waitingOf(last[late])
		return a != nil && a.Reason == "CreateContainerConfigError" && b != nil && b.Reason == "CreateContainerConfigError"
	})
	if msg := waitingOf(last[root]).Message; !strings.HasPrefix(msg, "container has runAsNonRoot and image will run as root (pod: ") {
		t.Errorf("%s: %q", root, msg)
	}
	if msg := waitingOf(last[late]).Message; !strings.Contains(msg, `RuntimeClass "late" not found`) {
		t.Errorf("%s: %q", late, msg)
	}

	e.write("class.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: late\nhandler: runc\n")
	waitFor(t, "the late pod running once its class is declared", 2*time.Minute, func() bool {
		p := e.psPods()[late]
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	for _, c := range e.containers() {
		if c.Labels["io.podrun.pod.name"] != late {
			continue
		}
		ins, err := docker.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ins.HostConfig.Runtime != "runc" {
			t.Errorf("%s: runtime %q", c.Names, ins.HostConfig.Runtime)
		}
	}
}
