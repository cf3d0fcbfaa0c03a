package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodCgroupResources: a pod's cgroup limits come from spec.resources
// (cpu limit as a quota, cpu request as shares, memory limit) and the
// per-pod pids limit; a pod with neither needs no cgroup.
func TestPodCgroupResources(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	if res := (&PodCgroups{Driver: "cgroupfs"}).podCgroupResources(pod); res != nil {
		t.Errorf("a pod without pod-level resources: %+v, want no cgroup", res)
	}
	pod.Spec.Resources = &v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}
	res := (&PodCgroups{Driver: "cgroupfs", MaxPIDs: 100}).podCgroupResources(pod)
	if res == nil || res.Memory == nil || res.CPU == nil || res.Pids == nil {
		t.Fatalf("resources %+v", res)
	}
	if *res.Memory.Limit != 64<<20 || *res.CPU.Quota != 50000 || *res.CPU.Period != 100000 || *res.CPU.Shares != 256 || *res.Pids.Limit != 100 {
		t.Errorf("memory %d quota %d/%d shares %d pids %d; want 64Mi, 50000/100000, 256, 100",
			*res.Memory.Limit, *res.CPU.Quota, *res.CPU.Period, *res.CPU.Shares, *res.Pids.Limit)
	}
}

// TestPodCgroupNeedsCgroupfs: without Docker's cgroupfs driver a pod that
// needs a cgroup of its own cannot start (a configError saying why); one
// that needs none runs as before.
func TestPodCgroupNeedsCgroupfs(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	for _, c := range []*PodCgroups{nil, {Driver: "systemd"}} {
		if parent, err := c.Ensure(pod); parent != "" || err != nil {
			t.Errorf("%+v: a pod needing no cgroup: %q, %v", c, parent, err)
		}
	}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}
	_, err := (&PodCgroups{Driver: "systemd"}).Ensure(pod)
	if err == nil || !isConfigError(err) {
		t.Fatalf("systemd driver: %v, want a configError", err)
	}
}

// TestPodCgroupPathIsPerNode: pods of two nodes on one host with one UID
// (a manifest may set any metadata.uid) get cgroups of their own; a node
// name that is no single path element is refused.
func TestPodCgroupPathIsPerNode(t *testing.T) {
	a, err := (&PodCgroups{Parent: "/podrun", Node: "node-a.example"}).group("u1")
	if err != nil || a != "/podrun/node-a.example/podu1" {
		t.Errorf("node-a.example: %q, %v; want /podrun/node-a.example/podu1", a, err)
	}
	if b, _ := (&PodCgroups{Parent: "/podrun", Node: "node-b"}).group("u1"); b == a {
		t.Errorf("nodes a and b share the cgroup %s", a)
	}
	for _, node := range []string{"", "..", "a/b"} {
		if g, err := (&PodCgroups{Parent: "/podrun", Node: node}).group("u1"); err == nil {
			t.Errorf("node %q: cgroup %s, want a refusal", node, g)
		}
	}
}

// TestPodCgroupRemoveKeepsABusyLegacyCgroup: the cgroup an older podrun
// made for a UID (Parent/pod<uid>, shared by every node) goes with the pod
// once empty, and is kept while a process (another node's pod) is in it.
func TestPodCgroupRemoveKeepsABusyLegacyCgroup(t *testing.T) {
	if os.Geteuid() != 0 || cgroups.Mode() == cgroups.Unified {
		t.Skip("needs root and cgroup v1")
	}
	c := &PodCgroups{Parent: fmt.Sprintf("/podrun-test-%d", os.Getpid()), Node: "n1"}
	legacy := c.legacyGroup("u1")
	cg, err := cgroup1.New(cgroup1.StaticPath(legacy), &specs.LinuxResources{})
	if err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	t.Cleanup(func() {
		cg.Delete()
		for _, d := range must(filepath.Glob(filepath.Join("/sys/fs/cgroup/*", c.Parent))) {
			os.Remove(d)
		}
	})
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cg.Add(cgroup1.Process{Pid: sleep.Process.Pid}); err != nil {
		sleep.Process.Kill()
		t.Fatal(err)
	}
	if err := c.Remove("u1"); err != nil {
		t.Errorf("remove with the legacy cgroup busy: %v", err)
	}
	if _, err := cgroup1.Load(cgroup1.StaticPath(legacy)); err != nil {
		t.Errorf("the busy legacy cgroup: %v, want it kept", err)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if err := c.Remove("u1"); err != nil {
		t.Errorf("remove with the legacy cgroup empty: %v", err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/pids", legacy)); !os.IsNotExist(err) {
		t.Errorf("the empty legacy cgroup: %v, want it gone", err)
	}
}

func must[T any](v T, _ error) T { return v }
