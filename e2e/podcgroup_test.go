package e2e

import (
	"context"
	"fmt"
	"os"
	"path"
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
	if want := "/podrun/" + e.node + "/pod" + uid; parent != want {
		t.Fatalf("container a's cgroup parent %q, want %s", parent, want)
	}
	removeCgroupsAtEnd(t, e, parent)
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

// removeCgroupsAtEnd removes, whatever the test did, the pod cgroup parent
// of e's pod and its node's cgroup, once e's containers are gone.
func removeCgroupsAtEnd(t *testing.T, e *env, parent string) {
	t.Cleanup(func() {
		e.cleanup() // cleanups run last registered first: the env's comes later
		for _, p := range []string{parent, path.Dir(parent)} {
			dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", p))
			for _, d := range append(dirs, filepath.Join("/sys/fs/cgroup", p)) {
				os.Remove(d)
			}
		}
	})
}

// cpuQuota is the cpu quota of the cgroup at p ("" when it is gone).
func cpuQuota(p string) string {
	file := filepath.Join("/sys/fs/cgroup/cpu", p, "cpu.cfs_quota_us")
	if cgroups.Mode() == cgroups.Unified {
		file = filepath.Join("/sys/fs/cgroup", p, "cpu.max")
	}
	b, _ := os.ReadFile(file)
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// TestPodCgroupIsTheNodesOwn: a manifest of another node on the host that
// sets metadata.uid to a pod's UID (static pod UIDs are predictable) gets
// a pod cgroup of its own: it neither rewrites the pod's limits nor joins
// its cgroup, and its `down` leaves that cgroup alone.
func TestPodCgroupIsTheNodesOwn(t *testing.T) {
	victim, other := newEnv(t), newEnv(t)
	pod := func(name, uid, cpu string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  uid: %q
spec:
  terminationGracePeriodSeconds: 1
  resources:
    limits: {cpu: %s}
  containers:
  - name: a
    image: %s
    command: ["sleep", "3600"]
`, name, uid, cpu, testImage)
	}
	up := func(e *env, manifest string) (parent string) {
		t.Helper()
		if r := e.podrun(2*time.Minute, "once", "--wait", "running", manifest); r.code != 0 {
			t.Fatalf("once on %s: exit %d\n%s\n%s", e.node, r.code, r.stdout, r.stderr)
		}
		ins, err := docker.ContainerInspect(context.Background(), e.running()["cg/a"])
		if err != nil {
			t.Fatal(err)
		}
		removeCgroupsAtEnd(t, e, ins.HostConfig.CgroupParent)
		return ins.HostConfig.CgroupParent
	}
	down := func(e *env, manifest string) {
		t.Helper()
		if r := e.podrun(2*time.Minute, "down", manifest); r.code != 0 {
			t.Fatalf("down on %s: exit %d\n%s\n%s", e.node, r.code, r.stdout, r.stderr)
		}
	}
	uid := "uid-of-" + victim.node
	vp := victim.write("cg.yaml", pod("cg", uid, "500m"))
	theirs := up(victim, vp)
	if got := cpuQuota(theirs); got != "50000" {
		t.Fatalf("the victim's cgroup %s quota %q, want 50000", theirs, got)
	}
	op := other.write("cg.yaml", pod("cg", uid, "10m"))
	if ours := up(other, op); ours == theirs {
		t.Errorf("node %s's pod went into node %s's cgroup %s", other.node, victim.node, theirs)
	}
	if got := cpuQuota(theirs); got != "50000" {
		t.Errorf("the victim's cgroup quota after the other node's pod came: %q, want 50000", got)
	}
	down(other, op)
	if got := cpuQuota(theirs); got != "50000" {
		t.Errorf("the victim's cgroup quota after the other node's pod went: %q, want 50000 (the cgroup kept)", got)
	}
	down(victim, vp)
	if got := cpuQuota(theirs); got != "" {
		t.Errorf("the victim's cgroup after its down: quota %q, want it gone", got)
	}
}
