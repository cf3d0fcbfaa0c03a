package cmd

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// logs runs `podrun logs args...` with the fake engine; daemon, when not
// nil, are the pods the podrun watch of the root dir answers with (else
// none answers).
func (e *cmdEnv) logs(daemon []*v1.Pod, args ...string) error {
	e.t.Helper()
	var opts *logsOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newLogsCmd(g, func(_ context.Context, o *logsOptions) error { opts = o; return nil })
	}, append([]string{"logs"}, args...)...)
	opts.Engine = engineOf[logEngine](e)
	opts.DaemonPods = func(context.Context) ([]*v1.Pod, error) {
		if daemon == nil {
			return nil, errors.New("no daemon")
		}
		return daemon, nil
	}
	return logsRun(context.Background(), opts)
}

// runs makes pod web-node1 with the runs of its container app, one per
// script, attempt 0 first: each echoes its words and exits. It returns
// their IDs.
func (e *cmdEnv) runs(scripts ...[]string) []string {
	e.t.Helper()
	ctx := context.Background()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: "web-uid", Name: "web-node1", Namespace: "default"}, Image: "pause:1"}
	e.fake.AddImage("pause:1")
	sbID, err := e.fake.RunSandbox(ctx, sb)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for i, script := range scripts {
		id, err := e.fake.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "app", Type: engine.ContainerTypeApp,
			Attempt: i, Image: "img:1", Command: append([]string{enginetest.FakeScript}, script...)})
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.fake.StartContainer(ctx, id); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestLogsPreviousOfOneRun: a container that has run once has no previous
// run; kubectl says so and fails, rather than print the current run.
func TestLogsPreviousOfOneRun(t *testing.T) {
	e := newCmdEnv(t)
	if err := e.once(e.write("job.yaml", jobPod("job", "echo", "hello")), "--wait", "complete", "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	e.reset()
	wantExit(t, "logs --previous of one run", e.logs(nil, "job", "--previous"), exitBadInput,
		`previous terminated container "job" in pod "job-node1" not found`)
	if e.out.Len() != 0 {
		t.Errorf("logs --previous of one run printed %q", e.out)
	}
}

// TestLogsPreviousWithoutDaemon: with no watch to restart it, a container's
// previous run is the one before its newest, whether the newest runs or has
// ended.
func TestLogsPreviousWithoutDaemon(t *testing.T) {
	e := newCmdEnv(t)
	e.runs([]string{"echo", "first"}, []string{"echo", "second"})
	wantExit(t, "logs --previous", e.logs(nil, "web", "--previous"), exitOK)
	if e.out.String() != "first\n" {
		t.Errorf("logs --previous: %q, want the first run's", e.out)
	}
	e.reset()
	wantExit(t, "logs", e.logs(nil, "web"), exitOK)
	if e.out.String() != "second\n" {
		t.Errorf("logs: %q, want the newest run's", e.out)
	}
}

// TestLogsPreviousFromDaemon: while a watch runs the pod, the previous run
// is the one its status names as lastState: during a crash loop's back-off,
// the newest run, the one that crashed; none when the status has none.
func TestLogsPreviousFromDaemon(t *testing.T) {
	e := newCmdEnv(t)
	ids := e.runs([]string{"echo", "first"}, []string{"echo", "crashed"})
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "web-uid", "web-node1", "default"
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app",
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, ContainerID: "fake://" + ids[1]}}}}
	wantExit(t, "logs --previous in a crash loop", e.logs([]*v1.Pod{pod}, "web", "--previous"), exitOK)
	if e.out.String() != "crashed\n" {
		t.Errorf("logs --previous in a crash loop: %q, want the run that crashed", e.out)
	}
	e.reset()
	pod.Status.ContainerStatuses[0].LastTerminationState = v1.ContainerState{}
	wantExit(t, "logs --previous with no lastState", e.logs([]*v1.Pod{pod}, "web", "--previous"), exitBadInput,
		`previous terminated container "app" in pod "web-node1" not found`)
}
