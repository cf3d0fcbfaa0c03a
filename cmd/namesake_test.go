package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/podrun/podrun/engine"
)

// twoWebs writes pod web to a/web.yaml and b/web.yaml (one name, two
// manifest paths, so two UIDs) and runs `once a/web.yaml`. It returns
// both paths and the UID of a's pod.
func twoWebs(t *testing.T, e *cmdEnv) (a, b, uidA string) {
	t.Helper()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(e.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, b = e.write("a/web.yaml", webPod("web")), e.write("b/web.yaml", webPod("web"))
	if err := e.once(a, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	c := e.running("web-node1")
	if c == nil {
		t.Fatal("a's web does not run")
	}
	e.reset()
	return a, b, c.Pod.UID
}

// The pod of one name from another manifest path, given to once after
// the first runs: once refuses it (exit 1, NameConflict, naming the
// running pod's uid and source and `podrun down` of it), and the running
// pod is not touched; plan says so first.
func TestOnceAndPlanRefuseANamesake(t *testing.T) {
	e := newCmdEnv(t)
	a, b, uidA := twoWebs(t, e)
	before := e.running("web-node1")

	wantExit(t, "plan b", e.plan(b), exitChanges)
	for _, want := range []string{"pod default/web-node1 (" + b + "): refuse", "uid " + uidA + " (from " + a + ")", "podrun down " + a} {
		if !strings.Contains(e.out.String(), want) {
			t.Errorf("plan b says:\n%s\nwant %q", e.out, want)
		}
	}
	e.reset()
	wantExit(t, "once b", e.once(b, "--timeout", "10s"), exitPodFailed, "default/web-node1")
	for _, want := range []string{"NameConflict", "uid " + uidA + " (from " + a + ")", "podrun down " + a + " removes it"} {
		if !strings.Contains(e.out.String(), want) {
			t.Errorf("once b reports:\n%s\nwant %q", e.out, want)
		}
	}
	if c := e.running("web-node1"); c == nil || c.ID != before.ID || len(e.containers("web-node1")) != 1 || e.sandboxes() != 1 {
		t.Errorf("after once b: running %v, %d containers, %d sandboxes; want a's %s alone",
			c, len(e.containers("web-node1")), e.sandboxes(), before.ID)
	}
}

// watch of another path that defines the name of a pod left by once:
// that pod is of no source of watch, removed (before the new one starts:
// runner's TestNamesakeReplacedOrKept), and the pod of watch's source
// runs.
func TestWatchReplacesANamesakeLeftByOnce(t *testing.T) {
	e := newCmdEnv(t)
	_, b, uidA := twoWebs(t, e)
	replaced := func() bool {
		c := e.running("web-node1")
		return c != nil && c.Pod.UID != uidA
	}
	wantExit(t, "watch b", e.watch([]string{"--path", filepath.Dir(b)}, replaced), exitOK)
	for _, c := range e.containers("web-node1") {
		if c.Pod.UID == uidA {
			t.Errorf("a container of once's pod %s left: %+v", uidA, c)
		}
	}
	if n := e.sandboxes(); n != 1 {
		t.Errorf("%d sandboxes, want watch's pod's alone", n)
	}
}

// logs of a name that two pods have (an older podrun let them run
// together) does not mix their logs: it fails, naming both UIDs and
// where each came from.
func TestLogsOfTwoPodsOfOneName(t *testing.T) {
	e := newCmdEnv(t)
	a, _, uidA := twoWebs(t, e)
	ctx := context.Background()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: "other", Name: "web-node1", Namespace: "default"},
		Image: "pause:1", Source: "/b/web.yaml"}
	e.fake.AddImage("pause:1")
	id, err := e.fake.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := e.fake.CreateContainer(ctx, id, sb, &engine.ContainerConfig{Name: "app", Type: engine.ContainerTypeApp, Image: "img:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fake.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	var opts *logsOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newLogsCmd(g, func(_ context.Context, o *logsOptions) error { opts = o; return nil })
	}, "logs", "web")
	opts.Engine = engineOf[logEngine](e)
	wantExit(t, "logs web", logsRun(ctx, opts), exitBadInput, "default/web-node1 is 2 pods on this node",
		"uid "+uidA+" ("+a+")", "uid other (/b/web.yaml)")
	if e.out.Len() != 0 {
		t.Errorf("logs printed %q", e.out)
	}
}

// down of a manifest whose pod is not on the node removes nothing and
// says so (exit 0, as kubectl delete --ignore-not-found: what down wants
// is the case), naming a pod of that name from another manifest, which
// it leaves running, and how to remove it.
func TestDownSaysWhatWasNotThere(t *testing.T) {
	e := newCmdEnv(t)
	a, b, uidA := twoWebs(t, e)
	wantExit(t, "down b", e.runDown(b), exitOK)
	want := "pod default/web-node1 not on this node: nothing to remove; a pod of that name from " + a +
		", uid " + uidA + ", is (podrun down " + a + " removes it)\n"
	if e.out.String() != want {
		t.Errorf("down b says:\n%s\nwant:\n%s", e.out, want)
	}
	if e.running("web-node1") == nil {
		t.Error("down b removed a's pod")
	}
	e.reset()
	wantExit(t, "down a", e.runDown(a), exitOK)
	if e.out.String() != "pod default/web-node1 removed\n" {
		t.Errorf("down a says %q", e.out)
	}
	e.reset()
	wantExit(t, "down a again", e.runDown(a), exitOK)
	if e.out.String() != "pod default/web-node1 not on this node: nothing to remove\n" {
		t.Errorf("down a again says %q", e.out)
	}
}
