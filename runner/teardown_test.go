package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// callRecorder is the fake engine with its stops and removals recorded in
// the order they were made, by object ID.
type callRecorder struct {
	*enginetest.Fake
	mu    sync.Mutex
	calls []string // "<method> <id>"
}

func (c *callRecorder) record(method, id string) {
	c.mu.Lock()
	c.calls = append(c.calls, method+" "+id)
	c.mu.Unlock()
}

func (c *callRecorder) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	c.record("StopContainer", id)
	return c.Fake.StopContainer(ctx, id, grace)
}

func (c *callRecorder) RemoveContainer(ctx context.Context, id string) error {
	c.record("RemoveContainer", id)
	return c.Fake.RemoveContainer(ctx, id)
}

func (c *callRecorder) RemoveSandbox(ctx context.Context, id string) error {
	c.record("RemoveSandbox", id)
	return c.Fake.RemoveSandbox(ctx, id)
}

// index is where "<method> <id>" was recorded; -1 when it was not.
func (c *callRecorder) index(method, id string) int {
	return slices.Index(c.calls, method+" "+id)
}

// A teardown stops a container before its removal only where the stop is
// more than a kill (a grace period); a container without one is removed at
// once, its forced removal killing it, whether or not it has a preStop
// hook (none runs without a grace period). Either way
// the app containers go before their sandbox, and every pod is found by
// one list without a look at each container.
func TestTeardownStopsOnlyWhatNeedsAGracefulStop(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	zero := newPod("u0", "zero-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	var noGrace int64
	zero.Spec.TerminationGracePeriodSeconds = &noGrace
	graceful := newPod("u1", "graceful-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	hooked := newPod("u2", "hooked-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	hooked.Spec.TerminationGracePeriodSeconds = &noGrace
	hooked.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	pods := []*v1.Pod{zero, graceful, hooked}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: pods}
	for _, p := range pods {
		h.waitStatus(string(p.UID), "running", allRunning)
	}
	h.stop()

	sbs, cs, err := fake.ListPodObjects(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	sandboxOf, ids := map[string]string{}, map[string]string{} // by pod UID; by pod UID/container
	for _, sb := range sbs {
		sandboxOf[sb.Pod.UID] = sb.ID
	}
	for _, c := range cs {
		ids[c.Pod.UID+"/"+c.Name] = c.ID
	}
	fake.ResetCalls()
	rec := &callRecorder{Fake: fake}
	r := runner.New(runner.Config{Runtime: rec, RuntimeName: "fake", NodeName: fake.NodeName(), RootDir: t.TempDir(),
		Clock: clockOf(t, fake), Log: slog.New(slog.NewTextHandler(testLogOut(), nil)), PodCgroups: runner.NewPodCgroups(fake.NodeName(), "", 0)})
	var targets []runner.TeardownTarget
	for _, p := range pods {
		targets = append(targets, runner.TeardownTarget{UID: string(p.UID), Name: p.Name, Pod: p})
	}
	r.TeardownPods(context.Background(), targets, -1, func(tt runner.TeardownTarget, err error) {
		if err != nil {
			t.Errorf("teardown of %s: %v", tt.Name, err)
		}
	})

	if lists, full := fake.Calls("ListPodSummaries"), fake.Calls("ListContainers"); lists != 1 || full != 0 {
		t.Errorf("%d summary lists and %d full container lists, want 1 and 0", lists, full)
	}
	if sbs, cs, _ := fake.ListPodObjects(context.Background(), ""); len(sbs)+len(cs) != 0 {
		t.Errorf("left: %d sandboxes, %d containers", len(sbs), len(cs))
	}
	for _, p := range pods {
		uid := string(p.UID)
		needsStop := p == graceful
		sbRemoved := rec.index("RemoveSandbox", sandboxOf[uid])
		if sbRemoved < 0 {
			t.Errorf("%s: sandbox not removed: %v", p.Name, rec.calls)
		}
		for _, c := range p.Spec.Containers {
			id := ids[uid+"/"+c.Name]
			stopped, removed := rec.index("StopContainer", id), rec.index("RemoveContainer", id)
			switch {
			case removed < 0 || removed > sbRemoved:
				t.Errorf("%s/%s: removed at %d, its sandbox at %d: want the container first (%v)", p.Name, c.Name, removed, sbRemoved, rec.calls)
			case needsStop && (stopped < 0 || stopped > removed):
				t.Errorf("%s/%s: stopped at %d, removed at %d: want a stop first (%v)", p.Name, c.Name, stopped, removed, rec.calls)
			case !needsStop && stopped >= 0:
				t.Errorf("%s/%s: stopped before its removal, with no grace period and no hook (%v)", p.Name, c.Name, rec.calls)
			}
		}
	}
}

// A pod being torn down stops being ready at once, while its containers
// still stop (here: a preStop hook that has not returned), and its
// liveness probe no longer acts: as the conformance specs "should mark
// readiness on pods to false [and disable liveness probes] while pod is in
// progress of terminating" look for.
//
// The probes' timers are on the fake clock, so what stops them is seen
// there: while the preStop hook runs, the readiness and liveness timers
// are gone. Each step of a probe period waits for the timers that must be
// there before it, lest it be lost. The control (not terminating) takes
// the same step with the same failing probe, and that step kills the
// container: so the steps of the terminating pod would have too, had its
// liveness probe still run.
func TestTerminatingPodIsNotReadyAndNotLivenessKilled(t *testing.T) {
	for _, terminating := range []bool{false, true} {
		t.Run(fmt.Sprintf("terminating=%v", terminating), func(t *testing.T) {
			fake := newFake(t)
			release := make(chan struct{})
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			inPreStop := make(chan struct{}, 1)
			var mu sync.Mutex
			healthy, failedRuns := true, 0
			fake.SetExecHandler(func(id string, cmd []string) (int, []byte, error) {
				switch cmd[0] {
				case "prestop": // also the control's liveness kill's
					select {
					case inPreStop <- struct{}{}:
					default:
					}
					<-release
					return 0, nil, nil
				case "live":
					mu.Lock()
					defer mu.Unlock()
					if !healthy {
						failedRuns++
						return 1, []byte("no"), nil
					}
				}
				return 0, nil, nil
			})
			failed := func() int {
				mu.Lock()
				defer mu.Unlock()
				return failedRuns
			}
			events := &eventLog{}
			// No relist on the steps: its timer, made again after each
			// relist, would blur the count of the probes' timers.
			h := start(t, fake, func(c *runner.Config) { c.Events = events; c.RelistPeriod = time.Hour })
			pod := newPod("u1", "term-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			pod.Spec.Containers[0].ReadinessProbe = everySecond("ready")
			pod.Spec.Containers[0].LivenessProbe = everySecond("live")
			pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"prestop"}}}}
			grace := int64(30)
			pod.Spec.TerminationGracePeriodSeconds = &grace
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
			h.stepUntilStatus("u1", "running and ready", time.Second, func(p *v1.Pod) bool { return allRunning(p) && isPodReady(p) })
			// Both probes wait for their next period (the pod's worker,
			// with nothing to do, waits on no timer).
			probeTimers := 2
			waitUntil(t, "the readiness and liveness probes' timers", func() bool { return h.timers() == probeTimers })

			if terminating {
				// The API deletes it (deletionTimestamp set).
				deleting := pod.DeepCopy()
				now := metav1.NewTime(h.clk.Now())
				deleting.DeletionTimestamp = &now
				deleting.DeletionGracePeriodSeconds = &grace
				h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{deleting}}
				select {
				case <-inPreStop:
				case <-time.After(10 * time.Second):
					t.Fatal("the preStop hook did not run")
				}
				p := h.waitStatus("u1", "not ready while terminating", func(p *v1.Pod) bool { return !isPodReady(p) })
				if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || cs[0].Ready {
					t.Fatalf("container status while its preStop hook runs: %+v, want running, not ready", cs)
				}
				// The container being stopped is probed no more: both
				// probes' timers are gone.
				probeTimers = 0
				waitUntil(t, "the probes of the stopping container to end", func() bool { return h.timers() == probeTimers })
			}
			mu.Lock()
			healthy = false
			mu.Unlock()
			// A liveness period, once the timers that must be there are.
			stepPeriod := func() {
				t.Helper()
				waitUntil(t, fmt.Sprintf("%d probe timers", probeTimers), func() bool { return h.timers() == probeTimers })
				h.step(time.Second)
			}

			if !terminating {
				// One period: the liveness probe fails and kills.
				stepPeriod()
				waitUntil(t, "the liveness kill", func() bool { return events.has("failed liveness probe") })
				if failed() == 0 || !events.has("Unhealthy") {
					t.Fatalf("killed with no failed liveness run (%d) or no Unhealthy event: %q", failed(), events.all())
				}
				return
			}
			for range 5 { // liveness periods: a probe still running would kill
				stepPeriod()
			}
			p := h.waitStatus("u1", "still terminating", func(*v1.Pod) bool { return true })
			if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || cs[0].RestartCount != 0 || isPodReady(p) {
				t.Fatalf("container status after 5 liveness periods in its preStop hook: %+v, want running, not restarted, not ready", cs)
			}
			close(release)
			h.waitGone("u1")
			if n := failed(); n != 0 || events.has("failed liveness probe") || events.has("Unhealthy") {
				t.Fatalf("liveness acted on a terminating pod (%d failed runs): %q", n, events.all())
			}
		})
	}
}

// A manifest may set any metadata.uid, and static pod UIDs are
// predictable: the teardown of a pod whose UID another pod holds removes
// its own objects alone, never the other pod's containers and sandbox nor
// the UID's pod directory (which the other pod uses), and says whose the
// UID is.
func TestTeardownLeavesAnotherPodWithTheUIDAlone(t *testing.T) {
	for _, ownSandbox := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownSandbox=%v", ownSandbox), func(t *testing.T) {
			fake := newFake(t)
			root := t.TempDir()
			h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
			victim := newPod("u1", "victim-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{victim}}
			h.waitStatus("u1", "running", allRunning)
			h.stop()
			ctx := context.Background()
			before, _, err := fake.ListPodObjects(ctx, "u1")
			if err != nil {
				t.Fatal(err)
			}
			innocent := newPod("u1", "innocent-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			ownID := ""
			if ownSandbox {
				// Objects of both pods under one UID: only a runtime
				// shared by two podruns that each ran one of them can
				// hold them, but each pod's are its own.
				ownID, err = fake.RunSandbox(ctx, &engine.SandboxConfig{Image: "pause:1",
					Pod: engine.PodRef{UID: "u1", Name: innocent.Name, Namespace: innocent.Namespace}})
				if err != nil {
					t.Fatal(err)
				}
			}
			fake.ResetCalls()

			r := runner.New(runner.Config{Runtime: fake, RuntimeName: "fake", NodeName: fake.NodeName(), RootDir: root,
				Clock: clockOf(t, fake), Log: slog.New(slog.NewTextHandler(testLogOut(), nil)), PodCgroups: runner.NewPodCgroups(fake.NodeName(), "", 0)})
			var got error
			r.TeardownPods(ctx, []runner.TeardownTarget{{UID: "u1", Name: "default/innocent-node1", Pod: innocent}}, -1,
				func(_ runner.TeardownTarget, err error) { got = err })

			if got == nil || !strings.Contains(got.Error(), "default/victim-node1") {
				t.Errorf("teardown error %v, want one naming default/victim-node1", got)
			}
			sbs, cs, err := fake.ListPodObjects(ctx, "u1")
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) != len(before) || sbs[0].ID != before[0].ID || sbs[0].State != engine.StateRunning {
				t.Errorf("sandboxes after: %v, want the victim's %v alone, running", sbs, before)
			}
			if len(cs) != len(victim.Spec.Containers) || cs[0].State != engine.StateRunning || cs[0].Pod.Name != victim.Name {
				t.Errorf("containers after: %v, want the victim's, running", cs)
			}
			if n := fake.Calls("StopContainer") + fake.Calls("RemoveContainer"); n != 0 {
				t.Errorf("%d container stops and removals, want none", n)
			}
			if removed, own := fake.Calls("RemoveSandbox"), len(ownID) > 0; removed > 1 || own != (removed == 1) {
				t.Errorf("%d sandbox removals, want the innocent pod's own alone (has one: %v)", removed, own)
			}
			if _, err := os.Stat(filepath.Join(root, "pods", "u1")); err != nil {
				t.Errorf("the victim's pod directory: %v", err)
			}
		})
	}
}
