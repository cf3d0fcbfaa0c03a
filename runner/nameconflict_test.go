package runner_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// webFrom is default/web-node1 of uid defined in the manifest source.
func webFrom(uid, source string) *v1.Pod {
	p := newPod(uid, "web-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	p.Annotations = map[string]string{"podrun.io/source": source}
	return p
}

// ranWeb runs webFrom("u1", "/a/web.yaml") on a new fake and stops the
// runner once it runs: the pod runs on, as one an earlier `once` started.
func ranWeb(t *testing.T) *enginetest.Fake {
	t.Helper()
	fake := newFake(t)
	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{webFrom("u1", "/a/web.yaml")}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()
	return fake
}

// sandboxWatch is the fake that records, at each sandbox made, the UIDs
// whose objects of pod default/web-node1 the runtime holds then.
type sandboxWatch struct {
	*enginetest.Fake
	mu   sync.Mutex
	seen [][]string
}

func (s *sandboxWatch) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	sbs, err := s.ListSandboxes(ctx)
	if err != nil {
		return "", err
	}
	uids := map[string]bool{cfg.Pod.UID: true}
	for _, sb := range sbs {
		if sb.Pod.Name == "web-node1" {
			uids[sb.Pod.UID] = true
		}
	}
	var list []string
	for u := range uids {
		list = append(list, u)
	}
	s.mu.Lock()
	s.seen = append(s.seen, list)
	s.mu.Unlock()
	return s.Fake.RunSandbox(ctx, cfg)
}

// A pod whose namespace/name a pod of another UID (another manifest
// path) has on the node is refused by once (no source is ready to say
// the other is gone): Failed, NameConflict, naming the other pod's UID
// and source and how to remove it, and the other pod is not touched.
// Once it is gone, the pod starts.
func TestOnceRefusesANamesakeOfARunningPod(t *testing.T) {
	fake := ranWeb(t)
	fake.ResetCalls()
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{webFrom("u2", "/b/web.yaml")}}
	p := h.waitStatus("u2", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != runner.ReasonNameConflict {
		t.Errorf("reason %q, want %s", p.Status.Reason, runner.ReasonNameConflict)
	}
	for _, want := range []string{"default/web-node1", "uid u1", "from /a/web.yaml", "podrun down /a/web.yaml", "uid u2 from /b/web.yaml"} {
		if !strings.Contains(p.Status.Message, want) {
			t.Errorf("message %q does not say %q", p.Status.Message, want)
		}
	}
	if _, converged, _ := h.r.SyncedPod("u2"); !converged {
		t.Error("a refused pod is not converged: once would wait on it")
	}
	if !events.has("Warning NameConflict") {
		t.Errorf("events %q, want a NameConflict warning", events.events)
	}
	for _, m := range []string{"RunSandbox", "StopSandbox", "RemoveSandbox", "CreateContainer", "StopContainer", "RemoveContainer"} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times", m, n)
		}
	}

	// The other pod goes (podrun down): the next sync starts this one.
	removeObjects(t, fake, "u1")
	h.stepUntilStatus("u2", "running once the other is gone", relistPeriod, allRunning)
}

// In watch, once every source has delivered, a namesake of another UID
// is a pod no source defines (sources give one pod a name): it is removed
// before the pod starts, never both on the node at once. A namesake of a
// source kept while it fails may still be defined: it stays, and the pod
// is refused. A namesake from the pod's own source is the pod before an
// edit of its metadata.uid: replaced, by once too.
func TestNamesakeReplacedOrKept(t *testing.T) {
	for _, tc := range []struct {
		name     string
		watch    bool // sources ready, none kept
		keep     bool
		source   string
		replaced bool
	}{
		{name: "watch", watch: true, source: "/b/web.yaml", replaced: true},
		{name: "watch, kept source", watch: true, keep: true, source: "/b/web.yaml"},
		{name: "once, same source", source: "/a/web.yaml", replaced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := ranWeb(t)
			rec := &sandboxWatch{Fake: fake}
			h := start(t, fake, func(c *runner.Config) {
				c.Runtime = rec
				if tc.watch {
					c.SourcesReady = func() bool { return true }
					c.KeepSource = func(string) bool { return tc.keep }
				}
			})
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{webFrom("u2", tc.source)}}
			if !tc.replaced {
				p := h.waitStatus("u2", "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
				if p.Status.Reason != runner.ReasonNameConflict {
					t.Errorf("status %s %q, want %s", p.Status.Reason, p.Status.Message, runner.ReasonNameConflict)
				}
				if sbs, _, _ := fake.ListPodObjects(context.Background(), "u1"); len(sbs) != 1 {
					t.Errorf("the kept pod's sandboxes: %v, want its one", sbs)
				}
				return
			}
			h.stepUntilStatus("u2", "running", relistPeriod, allRunning)
			if sbs, cs, _ := fake.ListPodObjects(context.Background(), "u1"); len(sbs)+len(cs) != 0 {
				t.Errorf("the namesake's objects left: %v %v", sbs, cs)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, uids := range rec.seen {
				if len(uids) != 1 {
					t.Errorf("a sandbox was made while pods %v of the name were on the node", uids)
				}
			}
		})
	}
}

// Plan says what a sync would do with a new pod whose name a pod of
// another UID has on the node: refuse it, naming that pod, unless the
// plan covers that pod's source (a watch of it removes the pod first:
// Plan lists it removed, and this one created).
func TestPlanOfANamesake(t *testing.T) {
	fake := ranWeb(t)
	pod := webFrom("u2", "/b/web.yaml")
	plans, err := runner.Plan(context.Background(), fake, t.TempDir(), []*v1.Pod{pod},
		func(source string) bool { return source == "/b/web.yaml" }, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Action != runner.PlanRefuse ||
		!strings.Contains(plans[0].Reason, "uid u1 (from /a/web.yaml)") {
		t.Errorf("plan: %+v, want refuse naming uid u1 from /a/web.yaml", plans)
	}

	plans, err = runner.Plan(context.Background(), fake, t.TempDir(), []*v1.Pod{pod},
		func(string) bool { return true }, runner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range plans {
		got[p.UID] = p.Action
	}
	if len(plans) != 2 || got["u2"] != runner.PlanCreate || got["u1"] != runner.PlanRemove {
		t.Errorf("plan with both sources covered: %+v, want create u2 and remove u1", plans)
	}
}

// removeObjects removes the containers and sandboxes of the pod uid, as
// someone else's teardown would.
func removeObjects(t *testing.T, fake *enginetest.Fake, uid string) {
	t.Helper()
	ctx := context.Background()
	sbs, cs, err := fake.ListPodObjects(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if err := fake.RemoveContainer(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, sb := range sbs {
		if err := fake.RemoveSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// namesakeLooks is the fake that counts the looks at the pod u1 alone
// (a sync of its namesake looks at it each time).
type namesakeLooks struct {
	*enginetest.Fake
	looks atomic.Int32
}

func (n *namesakeLooks) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	if uid == "u1" {
		n.looks.Add(1)
	}
	return n.Fake.ListPodObjects(ctx, uid)
}

// TestNamesakeWaitLoggedOnce: a pod that waits to learn the fate of a
// namesake (a source has not delivered: a URL down for hours) is retried
// every back-off, and says that it waits once, not at every retry; once
// the namesake is decided (removed) it starts.
func TestNamesakeWaitLoggedOnce(t *testing.T) {
	fake := ranWeb(t)
	rt := &namesakeLooks{Fake: fake}
	log := &runner.LockedBuffer{}
	var ready atomic.Bool
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = rt
		c.Log = slog.New(slog.NewTextHandler(log, nil))
		c.SourcesReady = ready.Load
		c.KeepSource = func(string) bool { return false }
	})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{webFrom("u2", "/b/web.yaml")}}
	waitUntil(t, "the first look at the namesake", func() bool { return rt.looks.Load() > 0 })
	retries := rt.looks.Load() + 4
	deadline := time.Now().Add(10 * time.Second)
	for rt.looks.Load() < retries {
		if time.Now().After(deadline) {
			t.Fatalf("the pod was synced %d times in 10 s of stepping its back-off", rt.looks.Load())
		}
		h.step(10 * time.Second) // the longest back-off
		time.Sleep(time.Millisecond)
	}
	if n := strings.Count(log.String(), "pod waits: another pod of its name"); n != 1 {
		t.Errorf("the wait logged %d times over %d syncs, want once:\n%s", n, rt.looks.Load(), log.String())
	}
	ready.Store(true)
	h.stepUntilStatus("u2", "running once the sources have delivered", 10*time.Second, allRunning)
}
