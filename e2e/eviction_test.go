package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestMemoryPressureEvictsBestEffortNotCritical runs watch with a memory
// threshold no machine meets, so the node is under memory pressure from
// the start: the BestEffort pod is evicted (Failed, reason Evicted, its
// containers stopped) and the Guaranteed node-critical pod, as etcd is
// written, keeps running.
func TestMemoryPressureEvictsBestEffortNotCritical(t *testing.T) {
	e := newEnv(t)
	e.write("besteffort.yaml", sleepPod("be", 1))
	e.write("etcd.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 1
  containers:
  - name: etcd
    image: %s
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
`, testImage))
	_, stop := e.watchWithServer("--eviction-hard", "memory.available<1000Ti")
	defer stop(syscall.SIGTERM)

	var evicted v1.Pod
	waitFor(t, "the BestEffort pod to be evicted", 2*time.Minute, func() bool {
		evicted = e.pods()["be-"+e.node]
		return evicted.Status.Reason == "Evicted"
	})
	if evicted.Status.Phase != v1.PodFailed || !strings.Contains(evicted.Status.Message, "The node was low on resource: memory") {
		t.Errorf("evicted pod: phase %s, message %q", evicted.Status.Phase, evicted.Status.Message)
	}
	waitFor(t, "the evicted pod's containers to stop", time.Minute, func() bool {
		r := e.running()
		return r["be/POD"] == "" && r["be/c0"] == "" && r["etcd/etcd"] != ""
	})
	before := e.running()

	// A later BestEffort pod is evicted at a later look; the critical pod
	// was a candidate at every look, and still runs as it did.
	e.write("late.yaml", sleepPod("late", 1))
	waitFor(t, "the later BestEffort pod to be evicted", 2*time.Minute, func() bool {
		return e.pods()["late-"+e.node].Status.Reason == "Evicted"
	})
	p := e.pods()["etcd-"+e.node]
	if p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
		t.Fatalf("the critical pod is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if now := e.running(); now["etcd/etcd"] != before["etcd/etcd"] || now["etcd/POD"] != before["etcd/POD"] {
		t.Errorf("under pressure, the critical pod's containers changed:\nbefore %v\nafter  %v", before, now)
	}
}

// TestLocalStorageLimitsEvict: a pod writing past its disk emptyDir's
// sizeLimit, and one writing past its container's ephemeral-storage limit,
// are evicted with the kubelet's messages; a pod within its limits runs on.
// Container GC then removes every container and sandbox of the evicted
// pods, and their emptyDirs are removed, their status staying Evicted.
func TestLocalStorageLimitsEvict(t *testing.T) {
	e := newEnv(t)
	pod := func(name, resources, volume, write string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: scratch
    emptyDir: {sizeLimit: %s}
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "head -c 4194304 /dev/zero > %s && exec sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
    resources: {limits: {ephemeral-storage: %s}}
`, name, volume, testImage, write, resources)
	}
	e.write("dir.yaml", pod("dir", "100Mi", "1Mi", "/scratch/filler"))
	e.write("layer.yaml", pod("layer", "1Mi", "100Mi", "/filler"))
	e.write("within.yaml", pod("within", "100Mi", "100Mi", "/scratch/filler"))
	_, stop := e.watchWithServer("--container-gc-period", "1s")
	defer stop(syscall.SIGTERM)

	want := map[string]string{
		"dir":   `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".`,
		"layer": `Container c exceeded its local ephemeral storage limit "1Mi".`,
	}
	waitFor(t, "the pods over their limits to be evicted", 2*time.Minute, func() bool {
		got := e.pods()
		for name := range want {
			if got[name+"-"+e.node].Status.Reason != "Evicted" {
				return false
			}
		}
		return true
	})
	got := e.pods()
	for name, msg := range want {
		if m := got[name+"-"+e.node].Status.Message; m != msg {
			t.Errorf("%s: message %q, want %q", name, m, msg)
		}
	}
	if p := got["within-"+e.node]; p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its limits is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}

	objects := func(pod string) int {
		n := 0
		for _, c := range e.containers() {
			if c.Labels["io.podrun.pod.name"] == pod {
				n++
			}
		}
		return n
	}
	for name := range want {
		pod := got[name+"-"+e.node]
		emptyDirs := filepath.Join(e.root, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir")
		waitFor(t, name+"'s containers, sandbox and emptyDirs removed", 2*time.Minute, func() bool {
			_, err := os.Lstat(emptyDirs)
			return objects(pod.Name) == 0 && errors.Is(err, fs.ErrNotExist)
		})
		if p := e.pods()[pod.Name]; p.Status.Reason != "Evicted" || p.Status.Message != want[name] {
			t.Errorf("%s after its containers went: %s %q, want Evicted %q", name, p.Status.Reason, p.Status.Message, want[name])
		}
	}
	if n := objects("within-" + e.node); n != 2 {
		t.Errorf("the pod within its limits has %d containers and sandboxes, want 2", n)
	}
}
