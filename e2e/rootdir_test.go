package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRootDirOfAnotherNodeRefused: a root dir belongs to the node name that
// first ran pods in it. `once` for node B on node A's root dir is refused
// as bad input, saying whose root dir it is, and starts nothing; A's pod
// directory (its emptyDir data too) and containers are untouched. Before,
// B ran, and a `watch` of A then removed B's pod directories as orphans
// (and B's watch A's).
func TestRootDirOfAnotherNodeRefused(t *testing.T) {
	a := newEnv(t)
	if r := a.podrun(2*time.Minute, "once", a.write("web.yaml", webPod("web", freePort(t)))); r.code != 0 {
		t.Fatalf("once of node A: exit %d\n%s", r.code, r.stderr)
	}
	pods, err := os.ReadDir(filepath.Join(a.root, "pods"))
	if err != nil || len(pods) != 1 {
		t.Fatalf("node A's pod directories: %v (%v), want one", pods, err)
	}
	page := filepath.Join(a.root, "pods", pods[0].Name(), "volumes", "kubernetes.io~empty-dir", "www", "index.html")
	wantPage, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("node A's emptyDir: %v", err)
	}
	running := func() []string {
		var ids []string
		for _, c := range a.containers() {
			if c.State == "running" {
				ids = append(ids, c.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	before := running()
	if len(before) != 2 {
		t.Fatalf("node A runs %d containers, want the sandbox and httpd", len(before))
	}

	b := newEnv(t)
	b.root = a.root
	r := b.podrun(time.Minute, "once", b.write("sleep.yaml", sleepPod("sleep", 1)))
	if r.code != 2 {
		t.Fatalf("once of node B on node A's root dir: exit %d, want 2 (bad input)\n%s", r.code, r.stderr)
	}
	contains(t, "refusal", r.stderr, "root dir "+a.root+` belongs to node "`+a.node+`", not "`+b.node+`"`,
		"--root-dir of its own", "--node-name "+a.node)
	if cs := b.containers(); len(cs) != 0 {
		t.Errorf("node B started %d containers", len(cs))
	}

	after, err := os.ReadDir(filepath.Join(a.root, "pods"))
	if err != nil || len(after) != 1 || after[0].Name() != pods[0].Name() {
		t.Errorf("node A's pod directories after B: %v (%v), want %s alone", after, err, pods[0].Name())
	}
	if got, err := os.ReadFile(page); err != nil || string(got) != string(wantPage) {
		t.Errorf("node A's emptyDir after B: %q (%v), want %q", got, err, wantPage)
	}
	if now := running(); !slices.Equal(now, before) {
		t.Errorf("node A's running containers after B: %s, want %s", strings.Join(now, ","), strings.Join(before, ","))
	}
}
