package e2e

import (
	"fmt"
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
	base, stop := e.watchWithServer("--eviction-hard", "memory.available<1000Ti")
	defer stop(syscall.SIGTERM)

	var evicted v1.Pod
	waitFor(t, "the BestEffort pod to be evicted", 2*time.Minute, func() bool {
		evicted = pods(t, base)["be-"+e.node]
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
		return pods(t, base)["late-"+e.node].Status.Reason == "Evicted"
	})
	p := pods(t, base)["etcd-"+e.node]
	if p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
		t.Fatalf("the critical pod is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if now := e.running(); now["etcd/etcd"] != before["etcd/etcd"] || now["etcd/POD"] != before["etcd/POD"] {
		t.Errorf("under pressure, the critical pod's containers changed:\nbefore %v\nafter  %v", before, now)
	}
}
