package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// webUIDs are the UIDs of the node's sandboxes of pod web, running or
// not.
func webUIDs(e *env) map[string]bool {
	out := map[string]bool{}
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.type"] == "sandbox" && c.Labels["io.podrun.pod.name"] == "web-"+e.node {
			out[c.Labels["io.podrun.pod.uid"]] = true
		}
	}
	return out
}

// A pod of one name from two manifest paths (two UIDs), on real Docker:
// with web from a/web.yaml running (once), plan and once of b/web.yaml
// refuse it, naming the running pod and the down that removes it, and
// leave that pod alone; down of b/web.yaml removes nothing and says so.
// watch of b's directory removes once's pod before it starts its own:
// the node never holds two sandboxes of the name.
func TestNamesakeFromAnotherPath(t *testing.T) {
	e := newEnv(t)
	var paths []string
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(e.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, e.write(filepath.Join(d, "web.yaml"), sleepPod("web", 1)))
	}
	a, b := paths[0], paths[1]
	if r := e.podrun(2*time.Minute, "once", "--timeout", "1m", a); r.code != 0 {
		t.Fatalf("once a: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	before := runningIDs(e, "web-"+e.node)
	uids := webUIDs(e)
	if len(uids) != 1 || len(before) != 2 {
		t.Fatalf("after once a: sandboxes of %v, running %v; want one pod, its sandbox and container", uids, before)
	}
	var uidA string
	for u := range uids {
		uidA = u
	}

	r := e.podrun(time.Minute, "plan", b)
	if r.code != 1 {
		t.Fatalf("plan b: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "plan b", r.stdout, "): refuse: ", "uid "+uidA+" (from "+a+")", "podrun down "+a+" removes it")

	r = e.podrun(2*time.Minute, "once", "--timeout", "1m", b)
	if r.code != 1 {
		t.Fatalf("once b: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "once b", r.stdout, "NameConflict", "uid "+uidA+" (from "+a+")", "podrun down "+a+" removes it")

	r = e.podrun(time.Minute, "down", b)
	if r.code != 0 {
		t.Fatalf("down b: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "down b", r.stdout, "pod default/web-"+e.node+" not on this node: nothing to remove", "from "+a+", uid "+uidA)
	if after := runningIDs(e, "web-"+e.node); !maps.Equal(after, before) {
		t.Fatalf("once's pod changed: %v, was %v", after, before)
	}

	stop := e.watch("--path", filepath.Dir(b))
	defer stop(syscall.SIGTERM)
	most := 0
	waitFor(t, "watch's pod to replace once's", 2*time.Minute, func() bool {
		now := webUIDs(e)
		most = max(most, len(now))
		running := runningIDs(e, "web-"+e.node)
		return len(now) == 1 && !now[uidA] && len(running) == 2
	})
	if most > 1 {
		t.Errorf("the node held sandboxes of %d pods named web at once", most)
	}
}
