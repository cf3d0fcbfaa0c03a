package runner

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine/enginetest"
)

// TestFailedStartIsNoMissedEvent: a container whose start fails sends no
// event (Docker sends neither start nor die), and the pod worker, backing
// off, does not look at the pod again for a while: the relists meanwhile
// find a container no event announced. That change is podrun's own, not
// one the events missed, and must not be logged as a miss.
func TestFailedStartIsNoMissedEvent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	fake := enginetest.NewFake("node1")
	fake.SetClock(clk.Now)
	fake.AddImage("pause:1")
	fake.AddImage("img:1")
	var logs LockedBuffer
	r := New(Config{Runtime: fake, RuntimeName: "fake", NodeName: "node1", RootDir: t.TempDir(),
		InfraImage: "pause:1", HostIP: "192.0.2.10", RelistPeriod: time.Second, RelistMaxPeriod: time.Minute,
		HousekeepingPeriod: time.Hour, Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	waits := make(chan time.Duration, 64)
	r.cache.waited = func(d time.Duration) { waits <- d }

	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan PodUpdate, 1)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, updates) }()
	defer func() { cancel(); <-done }()

	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p-node1", "default", "uid-1"
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "img:1",
		Command: []string{enginetest.FakeScript, "start-fails"}}}
	updates <- PodUpdate{Op: OpAdd, Pods: []*v1.Pod{pod}}

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log:\n%s", what, logs.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	failedSyncs := func() int { return strings.Count(logs.String(), `msg="sync pod"`) }
	// The first try: a sandbox (its start is an event), a container, a
	// failed start; then the worker waits out the back-off (10 s).
	waitUntil("the first failed start", func() bool { return failedSyncs() == 1 })
	relist := func(d time.Duration) {
		t.Helper()
		clk.Step(d)
		waitUntil("the relist's next wait", func() bool { return len(waits) > 0 })
	}
	// Relists, one period apart (it grows while events flow), until the
	// back-off ends: the second try, another container that no event
	// announces; then the relists after it. The bound is real time, not
	// the fake clock's: on a busy machine the worker may set its back-off
	// timer only after a few steps, which then come due later on the fake
	// clock, but still come.
	deadline := time.Now().Add(30 * time.Second)
	for failedSyncs() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second try after %s of relists; log:\n%s", clk.Since(time.Unix(1_000_000, 0)), logs.String())
		}
		relist(<-waits)
		if fake.Calls("CreateContainer") == 2 {
			waitUntil("the second failed start", func() bool { return failedSyncs() == 2 })
		}
	}
	for range 3 {
		relist(<-waits)
	}
	if strings.Contains(logs.String(), "not even by the relist after") {
		t.Errorf("a failed start of podrun's own was logged as an event missed:\n%s", logs.String())
	}
}
