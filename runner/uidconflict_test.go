package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// A manifest may set any metadata.uid: a pod whose UID's objects in the
// runtime are another pod's is refused (Failed, UIDConflict, naming that
// pod) whether its spec matches theirs (it would adopt them) or not (it
// would replace them), and neither they nor the UID's pod directory are
// touched. Once they are gone, the pod starts.
func TestPodRefusedTheUIDOfAnotherPod(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmds map[string][]string
	}{
		{"same spec", map[string][]string{"a": {"run"}}},
		{"other spec", map[string][]string{"a": {"run", "other"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, root := ranOwner(t)
			rootDir := func(c *runner.Config) { c.RootDir = root }
			ctx := context.Background()
			ownerSbs, ownerCs, err := fake.ListPodObjects(ctx, "u1")
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "pods", "u1")
			if err := os.WriteFile(filepath.Join(dir, "owner-data"), []byte("owner's"), 0o600); err != nil {
				t.Fatal(err)
			}
			dirBefore := treeOf(t, dir)
			fake.ResetCalls()

			events := &eventLog{}
			h2 := start(t, fake, func(c *runner.Config) { rootDir(c); c.Events = events })
			borrower := newPod("u1", "borrower-node1", v1.RestartPolicyAlways, tc.cmds)
			h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{borrower}}
			p := h2.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != runner.ReasonUIDConflict || !strings.Contains(p.Status.Message, "default/owner-node1") {
				t.Errorf("status %s: %q, want %s naming default/owner-node1", p.Status.Reason, p.Status.Message, runner.ReasonUIDConflict)
			}
			if len(p.Status.ContainerStatuses) != 0 {
				t.Errorf("container statuses %+v of the owner's containers, want none", p.Status.ContainerStatuses)
			}
			if _, converged, _ := h2.r.SyncedPod("u1"); !converged {
				t.Error("a refused pod is not converged: once would wait on it")
			}
			if !events.has("Warning UIDConflict") {
				t.Errorf("events %q, want a UIDConflict warning", events.events)
			}
			for _, m := range []string{"RunSandbox", "StopSandbox", "RemoveSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer"} {
				if n := fake.Calls(m); n != 0 {
					t.Errorf("%s called %d times on the owner's objects", m, n)
				}
			}
			sbs, cs, err := fake.ListPodObjects(ctx, "u1")
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) != len(ownerSbs) || sbs[0].ID != ownerSbs[0].ID || len(cs) != len(ownerCs) || cs[0].ID != ownerCs[0].ID {
				t.Errorf("objects after: %v %v, want the owner's %v %v", sbs, cs, ownerSbs, ownerCs)
			}
			if after := treeOf(t, dir); !maps.Equal(after, dirBefore) {
				t.Errorf("pod directory changed: %v, was %v", after, dirBefore)
			}

			// The owner goes: the next sync starts the pod.
			removeObjects(t, fake, "u1")
			h2.stepUntilStatus("u1", "running once the owner is gone", relistPeriod, allRunning)
		})
	}
}

// ranOwner runs default/owner-node1, uid u1, on a new fake and a new
// root dir, which it returns, and stops the runner once the pod runs: the
// pod runs on, as one an earlier podrun started.
func ranOwner(t *testing.T) (*enginetest.Fake, string) {
	t.Helper()
	fake := newFake(t)
	root := t.TempDir()
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	owner := newPod("u1", "owner-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{owner}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()
	return fake, root
}

// treeOf is the files and directories under dir, with their sizes and
// modification times.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprint(info.Mode(), info.ModTime(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A pod refused the UID of another pod and then removed (its manifest
// deleted) removes nothing of that pod: not its objects, not the UID's pod
// directory.
func TestRemovedPodLeavesTheOwnerOfItsUIDAlone(t *testing.T) {
	fake, root := ranOwner(t)
	dir := filepath.Join(root, "pods", "u1")
	dirBefore := treeOf(t, dir)
	fake.ResetCalls()

	h2 := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	borrower := newPod("u1", "borrower-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{borrower}}
	h2.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Reason == runner.ReasonUIDConflict })
	h2.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{borrower}}
	h2.waitGone("u1")

	for _, m := range []string{"StopSandbox", "RemoveSandbox", "StopContainer", "RemoveContainer"} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times on the owner's objects", m, n)
		}
	}
	if after := treeOf(t, dir); !maps.Equal(after, dirBefore) {
		t.Errorf("pod directory changed: %v, was %v", after, dirBefore)
	}
}

// In watch (every source has spoken), the objects of a pod's UID that are
// another pod's are of a pod no source defines (a UID names one pod among
// the sources'), most often the pod itself before a rename that kept its
// metadata.uid: they are removed as housekeeping removes such a pod, pod
// directory and all, and the pod starts afresh. A pod of a source kept
// while it fails is not removed: the pod stays refused.
func TestWatchReplacesTheOrphansOfAUID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keep     bool
		replaced bool
	}{
		{"orphans", false, true},
		{"kept source", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, root := ranOwner(t)
			dir := filepath.Join(root, "pods", "u1")
			data := filepath.Join(dir, "owner-data")
			if err := os.WriteFile(data, []byte("owner's"), 0o600); err != nil {
				t.Fatal(err)
			}
			ownerSbs, _, err := fake.ListPodObjects(context.Background(), "u1")
			if err != nil {
				t.Fatal(err)
			}

			h := start(t, fake, func(c *runner.Config) {
				c.RootDir = root
				c.SourcesReady = func() bool { return true }
				c.KeepSource = func(string) bool { return tc.keep }
			})
			renamed := newPod("u1", "renamed-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{renamed}}
			if !tc.replaced {
				p := h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
				if p.Status.Reason != runner.ReasonUIDConflict {
					t.Errorf("status %s %q, want %s", p.Status.Reason, p.Status.Message, runner.ReasonUIDConflict)
				}
				if _, err := os.Stat(data); err != nil {
					t.Errorf("the kept pod's data: %v", err)
				}
				return
			}
			h.waitStatus("u1", "running", allRunning)
			sbs, cs, err := fake.ListPodObjects(context.Background(), "u1")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Pod.Name != "renamed-node1" {
					t.Errorf("container %s of %s left under the uid", c.ID, c.Pod.Name)
				}
			}
			if len(sbs) != 1 || sbs[0].ID == ownerSbs[0].ID {
				t.Errorf("sandboxes %v, want a new one of renamed-node1 in place of %s", sbs, ownerSbs[0].ID)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the removed pod's data: %v, want it gone with its pod directory", err)
			}
		})
	}
}

// Before every source has delivered (a watch just started, the apiserver
// source later than the files), other-named objects of a pod's UID may be
// of a pod a source still defines, or of this one before a rename: the
// pod is neither refused (Failed is terminal in the API) nor started, and
// nothing is removed. Once the sources are ready, they are orphans, and
// the pod starts.
func TestUIDConflictWaitsForTheSources(t *testing.T) {
	fake, root := ranOwner(t)
	ownerSbs, _, err := fake.ListPodObjects(context.Background(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	events := &eventLog{}
	log := &runner.LockedBuffer{}
	h := start(t, fake, func(c *runner.Config) {
		c.RootDir = root
		c.SourcesReady = ready.Load
		c.Events = events
		c.Log = slog.New(slog.NewTextHandler(log, nil))
	})
	renamed := newPod("u1", "renamed-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{renamed}}
	waitUntil(t, "the pod to wait for the sources", func() bool {
		return strings.Contains(log.String(), "pod waits for every source to deliver")
	})
	if p, ok := h.r.Pod("u1"); ok && p.Status.Phase == v1.PodFailed {
		t.Errorf("before the sources are ready: %s %s %q, want no terminal phase", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if events.has("Warning UIDConflict") {
		t.Errorf("events %q, want no UIDConflict before the sources are ready", events.events)
	}
	if sbs, _, _ := fake.ListPodObjects(context.Background(), "u1"); len(sbs) != 1 || sbs[0].ID != ownerSbs[0].ID {
		t.Errorf("sandboxes %v before the sources are ready, want the owner's %s alone", sbs, ownerSbs[0].ID)
	}

	ready.Store(true)
	h.stepUntilStatus("u1", "running once the sources are ready", relistPeriod, func(p *v1.Pod) bool {
		return p.Name == "renamed-node1" && allRunning(p)
	})
}

// A pod that replaces the orphans of its UID is a new pod: its start
// time, and the activeDeadlineSeconds counted from it, are from now, not
// from when the pod of the old name started.
func TestPodReplacingTheOrphansOfItsUIDStartsNow(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) {
		c.SourcesReady = func() bool { return true }
		c.SyncFrequency = 24 * time.Hour
	})
	old := newPod("u1", "old-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{old}}
	first := h.waitStatus("u1", "running", allRunning)
	h.step(2 * time.Hour)

	renamed := newPod("u1", "renamed-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	renamed.Spec.ActiveDeadlineSeconds = ptr.To(int64(600))
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{renamed}}
	p := h.waitStatus("u1", "the renamed pod synced", func(p *v1.Pod) bool {
		return p.Name == "renamed-node1" && (p.Status.Phase == v1.PodFailed || allRunning(p))
	})
	if p.Status.Phase == v1.PodFailed {
		t.Errorf("the renamed pod (activeDeadlineSeconds 600): %s %s", p.Status.Phase, p.Status.Reason)
	}
	if p.Status.StartTime == nil || !p.Status.StartTime.After(first.Status.StartTime.Time) {
		t.Errorf("start time %v, want later than the old pod's %v", p.Status.StartTime, first.Status.StartTime)
	}
}

// The removal of a pod waits for a look at the runtime: with none (the
// engine's list failing), a teardown would remove the UID's pod directory
// and cgroup under containers it cannot see - here another pod's, whose
// UID a refused pod borrowed.
func TestRemovalWaitsForALookAtTheRuntime(t *testing.T) {
	fake, root := ranOwner(t)
	data := filepath.Join(root, "pods", "u1", "owner-data")
	if err := os.WriteFile(data, []byte("owner's"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })
	borrower := newPod("u1", "borrower-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{borrower}}
	h.waitStatus("u1", "refused", func(p *v1.Pod) bool { return p.Status.Reason == runner.ReasonUIDConflict })
	for range 5 {
		fake.FailNext("ListPodObjects", errors.New("engine restarting"))
	}
	lists := fake.Calls("ListPodObjects")
	// The relist's timer is made again after each relist: a step before
	// would be lost to it.
	waitUntil(t, "the relist's timer", func() bool { return h.clk.Waiters() >= h.tickers })
	h.step(relistPeriod)
	waitUntil(t, "a failed look", func() bool { return fake.Calls("ListPodObjects") > lists })
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{borrower}}
	h.stepUntil("the borrower gone", relistPeriod, func() bool { _, ok := h.r.Pod("u1"); return !ok })
	if _, err := os.Stat(data); err != nil {
		t.Errorf("the owner's pod directory after the borrower's removal: %v", err)
	}
	if sbs, _, err := fake.ListPodObjects(context.Background(), "u1"); err != nil || len(sbs) != 1 {
		t.Errorf("the owner's sandbox after: %v (%v)", sbs, err)
	}
}

// Plan says what a sync would do with a UID whose objects are another
// pod's: refuse (as once), or, when that pod is of a source the plan
// covers and no longer defined (a rename that kept metadata.uid), remove
// it and create this one (as watch).
func TestPlanOfAUIDConflict(t *testing.T) {
	fake, root := ranOwner(t)
	renamed := newPod("u1", "renamed-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	sbs, _, err := fake.ListPodObjects(context.Background(), "u1")
	if err != nil || len(sbs) != 1 {
		t.Fatalf("the owner's sandbox: %v (%v)", sbs, err)
	}
	ownerSource := sbs[0].Source

	plans, err := runner.Plan(context.Background(), fake, root, []*v1.Pod{renamed}, nil, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanRefuse || !strings.Contains(plans[0].Reason, "default/owner-node1") {
		t.Errorf("plan with the owner's source not covered: %+v, want refuse naming default/owner-node1", plans)
	}

	plans, err = runner.Plan(context.Background(), fake, root, []*v1.Pod{renamed},
		func(source string) bool { return source == ownerSource }, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range plans {
		got[p.Name] = p.Action
	}
	if len(plans) != 2 || got["renamed-node1"] != runner.PlanCreate || got["owner-node1"] != runner.PlanRemove {
		t.Errorf("plan with the owner's source covered: %+v, want create renamed-node1 and remove owner-node1", plans)
	}
}
