package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOnceHostPortConflict: two pods ask for one host port. once brings
// the first up (it serves on the port) and refuses the second with the
// kubelet's reason, NodePorts, naming the port and the pod that holds it;
// nothing of the second is made in Docker, and the run exits 1.
func TestOnceHostPortConflict(t *testing.T) {
	e := newEnv(t)
	port := freePort(t)
	first := e.write("a.yaml", webPod("first", port))
	e.write("b.yaml", webPod("second", port))

	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "first-"+e.node, "Running", "second-"+e.node, "NodePorts",
		"Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
		fmt.Sprintf("host port 127.0.0.1:%d/TCP of container httpd is held by pod default/first-%s", port, e.node), first)
	contains(t, "stderr", r.stderr, "pods failed: [default/second-"+e.node+"]")

	body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
	contains(t, "served page", body, "pod=first-"+e.node)
	for _, c := range e.containers() {
		if pod := c.Labels["io.podrun.pod.name"]; pod != "first-"+e.node {
			t.Errorf("a container of %s exists: %s %v", pod, c.Names, c.State)
		}
	}

	// Again: the first is adopted as it is, the second refused again.
	r = e.podrun(2*time.Minute, "once", e.dir, "--timeout", "1m")
	if r.code != 1 || !strings.Contains(r.stdout, "NodePorts") {
		t.Fatalf("second once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); !strings.Contains(body, "pod=first-"+e.node) {
		t.Errorf("after the second once the port serves %q", body)
	}
}

// TestOnceSysctlRefusedOthersUp: a pod setting a sysctl the node does
// not allow is refused (SysctlForbidden) and nothing of it is made; as for
// any pod refused before it runs, once still brings the other pods up
// and reports them running, then exits 1. (It used to end the wait at
// the refusal, leaving the other pods not yet made.)
func TestOnceSysctlRefusedOthersUp(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", sleepPod("good", 2))
	e.write("b.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: bad
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    sysctls: [{name: kernel.msgmax, value: "65536"}]
  containers:
  - {name: c, image: `+testImage+`, command: [sleep, "3600"]}
`)
	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "bad-"+e.node, "SysctlForbidden", `forbidden sysctl: "kernel.msgmax" not allowlisted`)
	contains(t, "stderr", r.stderr, "pods failed: [default/bad-"+e.node+"]")
	running := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "good-"+e.node) && strings.Contains(line, "Running") {
			running++
		}
	}
	if running != 2 {
		t.Errorf("the report shows %d running containers of good, want 2:\n%s", running, r.stdout)
	}
	up := 0
	for _, c := range e.containers() {
		switch c.Labels["io.podrun.pod.name"] {
		case "good-" + e.node:
			if c.State == "running" {
				up++
			}
		default:
			t.Errorf("a container of %s exists: %s %v", c.Labels["io.podrun.pod.name"], c.Names, c.State)
		}
	}
	if up != 3 { // its sandbox and two containers
		t.Errorf("%d containers of good run, want its sandbox and 2", up)
	}
}

// TestOnceMissingConfigMap: a pod whose env needs a ConfigMap that no
// manifest defines runs its sandbox, and its container waits with
// CreateContainerConfigError, which the report names; once warned of it,
// at its line, before it started anything. validate says the same, as an
// error.
func TestOnceMissingConfigMap(t *testing.T) {
	e := newEnv(t)
	p := e.write("app.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: `+testImage+`
    command: [sleep, "3600"]
    envFrom:
    - configMapRef: {name: settings}
`)
	// The timeout is what once waits before it reports: long enough for
	// a busy dockerd to start the sandbox, after which the container's
	// config is found wanting.
	r := e.podrun(2*time.Minute, "once", p, "--timeout", "40s")
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "app-"+e.node, `Waiting (CreateContainerConfigError: configmap "settings" not found)`)
	contains(t, "stderr", r.stderr, p+`:12: spec.containers[0].envFrom[0].configMapRef.name: configmap \"settings\" not found`,
		"timed out")
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.type"] != "sandbox" {
			t.Errorf("a container was made: %s", c.Names)
		}
	}

	r = e.podrun(time.Minute, "validate", p)
	if r.code != 2 {
		t.Fatalf("validate: exit %d, want 2\n%s", r.code, r.stderr)
	}
	contains(t, "validate", r.stderr, p+`:12: spec.containers[0].envFrom[0].configMapRef.name: configmap "settings" not found`)
}
