package cmd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// TestWaitForNeedsConvergedPods: a pod whose latest sandbox and containers
// run, but with an older sandbox running too (a killed podrun's start that
// completed late), shows every container running in its status, which
// shows only the latest attempt of each; `once` must not report success
// until the older sandbox is stopped. Here its stop fails twice: the wait
// goes on through the runner's error back-off, and ends once it is
// stopped.
func TestWaitForNeedsConvergedPods(t *testing.T) {
	fake := fakeNode1()
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "u1", "p-node1", "default"
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers = []v1.Container{{Name: "a", Image: "img:1"}, {Name: "b", Image: "img:1"}}

	ctx := context.Background()
	sbCfg := func(attempt int) *engine.SandboxConfig {
		return &engine.SandboxConfig{Pod: engine.PodRef{UID: "u1", Name: pod.Name, Namespace: pod.Namespace},
			Attempt: attempt, Hash: runner.SandboxHash(pod), Image: "pause:1"}
	}
	older, err := fake.RunSandbox(ctx, sbCfg(0))
	if err != nil {
		t.Fatal(err)
	}
	latest, err := fake.RunSandbox(ctx, sbCfg(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		id, err := fake.CreateContainer(ctx, latest, sbCfg(1), &engine.ContainerConfig{Name: c.Name,
			Type: engine.ContainerTypeApp, Attempt: 1, Hash: runner.ContainerHash(c), ResourcesHash: runner.ResourcesHash(c),
			Image: c.Image})
		if err != nil {
			t.Fatal(err)
		}
		if err := fake.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// The first two stops fail: the runner tries again after 1 s, then
	// after 2 s more.
	fake.FailNext("StopSandbox", errors.New("engine busy"))
	fake.FailNext("StopSandbox", errors.New("engine busy"))

	r := runPod(t, runner.Config{Runtime: fake, RelistPeriod: 20 * time.Millisecond}, pod)

	pods, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 1500*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "must be stopped") {
		t.Fatalf("wait while the older sandbox still runs: %v, want a time-out that says why", err)
	}
	if met, _ := conditionMet(pods, waitRunning); !met {
		t.Fatalf("the status does not show every container running: %+v", pods[0].Status)
	}

	if _, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	sbs, err := fake.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if running := sb.State == engine.StateRunning; running != (sb.ID == latest) {
			t.Errorf("sandbox %.12s (attempt %d) is %s once the wait ended; want only the latest running (older: %.12s)",
				sb.ID, sb.Attempt, sb.State, older)
		}
	}
}

// noEvents is a runtime without an event stream: a change is seen only
// when its state is read again.
type noEvents struct{ engine.Runtime }

// TestWaitForSeesAJobThatFinished: a job's container that exits after its
// pod's last sync, before anything told the runner, leaves a status that
// says Running. The wait must read the state again before it reports
// success, so that the finished pod is seen finished and its sandbox
// stopped (as the kubelet stops a finished pod's) before once exits and
// leaves nothing to stop it.
func TestWaitForSeesAJobThatFinished(t *testing.T) {
	fake := fakeNode1()
	pod := podOfOne("u1", "job", v1.RestartPolicyNever)
	r := runPodQuietly(t, noEvents{fake}, pod)
	ctx := context.Background()

	if _, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := fake.ListContainers(ctx)
	if err != nil || len(cs) != 1 || cs[0].State != engine.StateRunning {
		t.Fatalf("containers %+v, %v; want the job's, running", cs, err)
	}
	if err := fake.Exit(cs[0].ID, 0); err != nil {
		t.Fatal(err)
	}

	pods, err := waitFor(ctx, r, []*v1.Pod{pod}, waitRunning, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pods[0].Status.Phase != v1.PodSucceeded {
		t.Errorf("phase %s once the wait ended, want Succeeded: the job had finished", pods[0].Status.Phase)
	}
	sbs, err := fake.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.State == engine.StateRunning {
			t.Errorf("sandbox %.12s of the finished job still runs once the wait ended", sb.ID)
		}
	}
}

// podOfOne is pod name-node1 (uid uid) of one container, name, of img:1.
func podOfOne(uid, name string, policy v1.RestartPolicy) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = types.UID(uid), name+"-node1", "default"
	pod.Spec.RestartPolicy = policy
	pod.Spec.Containers = []v1.Container{{Name: name, Image: "img:1"}}
	return pod
}

// runPodQuietly is runPod on rt with the periodic relist and resync far
// away: with a runtime without events (noEvents), nothing but a wait
// reads the state again.
func runPodQuietly(t *testing.T, rt engine.Runtime, pod *v1.Pod) *runner.Runner {
	t.Helper()
	return runPod(t, runner.Config{Runtime: rt, RelistPeriod: time.Hour, SyncFrequency: time.Hour,
		HousekeepingPeriod: time.Hour}, pod)
}

// runPod runs a runner of cfg (node node1, the infra image pause:1) on pod
// until the test ends.
func runPod(t *testing.T, cfg runner.Config, pod *v1.Pod) *runner.Runner {
	t.Helper()
	cfg.RuntimeName, cfg.NodeName, cfg.RootDir, cfg.InfraImage = "fake", "node1", t.TempDir(), "pause:1"
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	r := runner.New(cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	updates := make(chan runner.PodUpdate, 1)
	go func() {
		defer close(done)
		r.Run(ctx, updates)
	}()
	t.Cleanup(func() { stop(); <-done })
	updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	return r
}

// fakeNode1 is a fake engine of node node1 with the images img:1 and the
// infra image pause:1 (runPod's).
func fakeNode1() *enginetest.Fake {
	fake := enginetest.NewFake("node1")
	fake.AddImage("img:1")
	fake.AddImage("pause:1")
	return fake
}
