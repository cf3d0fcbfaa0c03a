package runner_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// BenchmarkIdlePodStacks reports the goroutine stack memory that running
// pods hold while nothing happens, per pod: what an edge box pays for
// each pod all day. Each pod has a worker goroutine, waiting between
// syncs; a sync's calls grow the stack of the goroutine that runs them
// (deeper on a real engine's client than on the fake). The figure is
// runtime/metrics' stack memory, after two collections (the first may
// shrink stacks, the second frees what that released), less the same with
// the runner running no pod.
//
//	go test -run '^$' -bench IdlePodStacks -benchtime 3x ./runner/
func BenchmarkIdlePodStacks(b *testing.B) {
	const pods = 100
	var perPod float64
	for b.Loop() {
		h := start(b, newFake(b), nil)
		goroutines, before := runtime.NumGoroutine(), stackBytes()
		var batch []*v1.Pod
		for i := range pods {
			batch = append(batch, newPod(fmt.Sprintf("u%d", i), fmt.Sprintf("p%d-node1", i), v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}}))
		}
		h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: batch}
		for _, p := range batch {
			h.waitStatus(string(p.UID), "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && allRunning(p) })
		}
		// Idle: no sync under way, each pod's worker alone waits.
		waitUntil(b, "every pod's worker idle", func() bool { return runtime.NumGoroutine() == goroutines+pods })
		perPod = (float64(stackBytes()) - float64(before)) / pods
		h.stop()
	}
	b.ReportMetric(perPod, "stack-bytes/pod")
}

// stackBytes is the memory of goroutine stacks, after two collections.
func stackBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
