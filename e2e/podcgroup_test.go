package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
)

// TestPodCgroupLimits: a pod with pod-level resources, under
// --pod-max-pids, gets a cgroup of its own holding its sandbox and
// containers, with the pod's memory and cpu limits and the pids limit;
// `down` removes it.
func TestPodCgroupLimits(t *testing.T) {
	e := newEnv(t)
	p := e.write("pod.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: cg
spec:
  terminationGracePeriodSeconds: 1
  resources:
    limits: {cpu: 500m, memory: 96Mi}
  containers:
  - name: a
    image: %s
    command: ["sleep", "3600"]
  - name: b
    image: %s
    command: ["sleep", "3600"]
`, testImage, testImage))
	if r := e.podrun(2*time.Minute, "once", "--wait", "running", "--pod-max-pids", "64", p); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	running := e.running()
	ins, err := docker.ContainerInspect(context.Background(), running["cg/a"])
	if err != nil {
		t.Fatal(err)
	}
	parent := ins.HostConfig.CgroupParent
	uid := ins.Config.Labels["io.podrun.pod.uid"]
	if parent != "/podrun/pod"+uid {
		t.Fatalf("container a's cgroup parent %q, want /podrun/pod%s", parent, uid)
	}
	// Whatever happens below, leave no cgroup behind (after the
	// containers are gone: env's cleanup runs first, being registered
	// before).
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", parent))
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parent))
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	for _, name := range []string{"cg/POD", "cg/b"} {
		other, err := docker.ContainerInspect(context.Background(), running[name])
		if err != nil || other.HostConfig.CgroupParent != parent {
			t.Errorf("%s: cgroup parent %q (%v), want %q", name, other.HostConfig.CgroupParent, err, parent)
		}
	}
	read := func(file string) string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[string]string{}
	if cgroups.Mode() == cgroups.Unified {
		dir := filepath.Join("/sys/fs/cgroup", parent)
		want[filepath.Join(dir, "memory.max")] = fmt.Sprint(96 << 20)
		want[filepath.Join(dir, "cpu.max")] = "50000 100000"
		want[filepath.Join(dir, "pids.max")] = "64"
	} else {
		want[filepath.Join("/sys/fs/cgroup/memory", parent, "memory.limit_in_bytes")] = fmt.Sprint(96 << 20)
		want[filepath.Join("/sys/fs/cgroup/cpu", parent, "cpu.cfs_quota_us")] = "50000"
		want[filepath.Join("/sys/fs/cgroup/pids", parent, "pids.max")] = "64"
	}
	for file, v := range want {
		if got := read(file); got != v {
			t.Errorf("%s = %s, want %s", file, got, v)
		}
	}

	if r := e.podrun(2*time.Minute, "down", p); r.code != 0 {
		t.Fatalf("down: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for file := range want {
		if _, err := os.Stat(filepath.Dir(file)); !os.IsNotExist(err) {
			t.Errorf("after down, %s: %v, want it gone", filepath.Dir(file), err)
		}
	}
}
