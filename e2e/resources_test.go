package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// resourcePod is a pod whose one container sleeps and asks for n of the
// extended resource res.
func resourcePod(name, res string, n int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: [sleep, "3600"]
    resources:
      limits: {%s: %d}
`, name, testImage, res, n)
}

// TestOnceGPUWithoutNvidiaRuntime: on a Docker Engine without the NVIDIA
// runtime (this machine's), a pod asking for nvidia.com/gpu is refused at
// admission as the kubelet refuses a pod asking for what the node lacks:
// Failed, OutOfnvidia.com/gpu, with a message that says the engine has no
// NVIDIA runtime; once exits 1 and nothing of the pod is made in Docker.
// validate accepts the pod and warns of what it needs. (An engine with
// the runtime gets the container, with Docker's device request.)
func TestOnceGPUWithoutNvidiaRuntime(t *testing.T) {
	e := newEnv(t)
	p := e.write("gpu.yaml", resourcePod("gpu", "nvidia.com/gpu", 1))

	v := e.podrun(time.Minute, "validate", p)
	if v.code != 0 {
		t.Fatalf("validate: exit %d\nstdout:\n%s\nstderr:\n%s", v.code, v.stdout, v.stderr)
	}
	contains(t, "validate's output", v.stdout, p+":12: spec.containers[0].resources.limits[nvidia.com/gpu]",
		"without that runtime the pod fails OutOfnvidia.com/gpu")

	info, err := docker.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, hasNvidia := info.Runtimes["nvidia"]

	r := e.podrun(3*time.Minute, "once", p, "--timeout", "2m")
	if hasNvidia {
		// The pod is admitted; its container asks Docker for one GPU.
		for _, c := range e.containers() {
			if c.Labels["io.podrun.container.name"] != "app" {
				continue
			}
			ins, err := docker.ContainerInspect(context.Background(), c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := ins.HostConfig.DeviceRequests; len(d) != 1 || d[0].Driver != "nvidia" || d[0].Count != 1 {
				t.Errorf("device requests %+v, want nvidia x1", d)
			}
			return
		}
		t.Fatalf("the engine has the NVIDIA runtime, but the GPU pod has no container\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "gpu-"+e.node, "Failed", "OutOfnvidia.com/gpu",
		"Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0",
		`the container engine has no NVIDIA runtime (docker info lists no "nvidia" runtime)`)
	contains(t, "stderr", r.stderr, "pods failed: [default/gpu-"+e.node+"]")
	for _, c := range e.containers() {
		if c.Labels["io.podrun.pod.name"] == "gpu-"+e.node {
			t.Errorf("a container of the refused pod exists: %s %s", c.Names, c.State)
		}
	}
}

// TestOnceDeclaredExtendedResource: an extended resource is refused
// (OutOf<name>, saying how to declare it) until --extended-resource
// declares it; declared with a count of 1, the first of two pods asking
// for one runs and the second is refused, naming the pod that holds it.
// Nothing of a refused pod is made in Docker, and once exits 1.
func TestOnceDeclaredExtendedResource(t *testing.T) {
	e := newEnv(t)
	a := e.write("a.yaml", resourcePod("dongle-a", "example.com/dongle", 1))
	e.write("b.yaml", resourcePod("dongle-b", "example.com/dongle", 1))

	r := e.podrun(3*time.Minute, "once", a, "--timeout", "2m")
	if r.code != 1 {
		t.Fatalf("once without the declaration: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "OutOfexample.com/dongle", "requested: 1, used: 0, capacity: 0",
		"declare what the node has with --extended-resource example.com/dongle=COUNT")
	if n := len(e.containers()); n != 0 {
		t.Fatalf("the refused pod made %d containers", n)
	}

	r = e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m", "--extended-resource", "example.com/dongle=1")
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "dongle-a-"+e.node, "Running", "dongle-b-"+e.node, "OutOfexample.com/dongle",
		"Node didn't have enough resource: example.com/dongle, requested: 1, used: 1, capacity: 1: "+
			"declared with --extended-resource example.com/dongle=1; held by default/dongle-a-"+e.node)
	contains(t, "stderr", r.stderr, "pods failed: [default/dongle-b-"+e.node+"]")
	running := 0
	for _, c := range e.containers() {
		switch pod := c.Labels["io.podrun.pod.name"]; {
		case pod != "dongle-a-"+e.node:
			t.Errorf("a container of %s exists: %s %s", pod, c.Names, c.State)
		case c.State == "running" && c.Labels["io.podrun.container.name"] == "app":
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d app containers of dongle-a run, want 1", running)
	}
	if strings.Contains(r.stdout, "dongle-a-"+e.node+": Pod was rejected") {
		t.Errorf("the holder is reported refused:\n%s", r.stdout)
	}
}
