package cmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

func TestPodUpdatesTranslatesOps(t *testing.T) {
	privileged := true
	pod := func(name string, priv bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		if priv {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &privileged}
		}
		return p
	}
	got, refused := podUpdates([]source.PodChange{
		{Op: source.OpRemove, Pod: pod("gone", true)},
		{Op: source.OpAdd, Pod: pod("new", false)},
		{Op: source.OpUpdate, Pod: pod("edited", false)},
		{Op: source.OpAdd, Pod: pod("priv", true)},
		{Pod: pod("zero", false)}, // the zero Op is no operation
	}, false)
	want := []struct {
		op   runner.Op
		name string
	}{{runner.OpRemove, "gone"}, {runner.OpAdd, "new"}, {runner.OpUpdate, "edited"}}
	if len(got) != len(want) {
		t.Fatalf("updates = %+v", got)
	}
	for i, w := range want {
		if got[i].Op != w.op || len(got[i].Pods) != 1 || got[i].Pods[0].Name != w.name {
			t.Errorf("update %d = %+v, want %v %s", i, got[i], w.op, w.name)
		}
	}
	if len(refused) != 2 || !strings.Contains(refused[0].Error(), "pod /priv: container c is privileged; pass --allow-privileged") ||
		!strings.Contains(refused[1].Error(), "zero: change ignored: unknown operation") {
		t.Errorf("refused %q", refused)
	}
	// Allowed: the privileged pod is an update like any other.
	if got, refused := podUpdates([]source.PodChange{{Op: source.OpAdd, Pod: pod("priv", true)}}, true); len(got) != 1 || len(refused) != 0 {
		t.Errorf("with --allow-privileged: %+v, %v", got, refused)
	}
	// A refusal names a URL source without its credentials.
	fromURL := pod("priv", true)
	fromURL.Annotations = map[string]string{manifest.AnnotationSource: "https://deploy:S3CRET@config.example/pods.yaml?sig=x"}
	_, refused = podUpdates([]source.PodChange{{Op: source.OpAdd, Pod: fromURL}}, false)
	if len(refused) != 1 || !strings.HasPrefix(refused[0].Error(), "https://config.example/pods.yaml: pod /priv: container c is privileged") {
		t.Errorf("refused %q, want it to name the URL without its credentials", refused)
	}
}

// TestMergeArgsFirstArgumentWins: the arguments of a one-shot command
// are merged as watch's sources are; a pod defined twice is a conflict
// in the merger's words, and the first definition is the one desired.
func TestMergeArgsFirstArgumentWins(t *testing.T) {
	opts := manifest.Options{NodeName: "node1"}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: nginx\n"
	a, err := manifest.Parse("/a.yaml", []byte(pod), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := manifest.Parse("/b.yaml", []byte(pod), opts)
	if err != nil {
		t.Fatal(err)
	}
	d := mergeArgs([]source.Update{{Source: "/a.yaml", Snapshot: a}, {Source: "/b.yaml", Snapshot: b}})
	err = conflictError(d.Conflicts)
	if exitCode(err) != exitBadInput || len(d.Conflicts) != 1 || d.Conflicts[0].Kind != "pod" ||
		err.Error() != "/b.yaml:4: metadata.name: pod default/web conflicts with the one defined at /a.yaml:4 (source /a.yaml comes first); the first one is kept" {
		t.Errorf("err = %v", err)
	}
	if pods := d.Pods(); len(pods) != 1 || pods[0].UID != a.Pods[0].UID || d.From(pods[0]) != "/a.yaml" {
		t.Errorf("pods = %+v", pods)
	}
	d = mergeArgs([]source.Update{{Source: "/a.yaml", Snapshot: a}})
	if err := conflictError(d.Conflicts); err != nil || len(d.Changes) != 1 || d.Changes[0].Op != source.OpAdd {
		t.Errorf("one argument: %+v, %v", d.Changes, err)
	}
	// A URL argument is named, in messages, without its credentials.
	const url = "https://deploy:S3CRET@config.example/pods.yaml?sig=x"
	u, err := manifest.Parse(url, []byte(pod), opts)
	if err != nil {
		t.Fatal(err)
	}
	d = mergeArgs([]source.Update{{Source: url, Snapshot: u}})
	if pods := d.Pods(); len(pods) != 1 {
		t.Errorf("pods = %+v", pods)
	} else if from := d.From(pods[0]); from != "https://config.example/pods.yaml" {
		t.Errorf("a URL argument's pod is from %q, want the URL without its credentials", from)
	}
}

// TestUnsafeRootDirIsBadInput: a root dir another user could write is
// refused by the commands that use it, exit 2, before any of them runs a
// pod or removes one.
func TestUnsafeRootDirIsBadInput(t *testing.T) {
	e := newCmdEnv(t)
	if err := os.Chmod(e.g.RootDir, 0o777); err != nil {
		t.Fatal(err)
	}
	e.write("web.yaml", webPod("web"))
	for name, run := range map[string]func() error{
		"once": func() error { return e.once(e.dir) },
		"watch": func() error {
			return e.watchWith(func(context.Context) (watchEngine, error) {
				return nil, errors.New("reached the engine")
			}, []string{"--path", e.dir}, func() bool { return false })
		},
		"down": func() error { return e.runDown("--all") },
	} {
		err := run()
		wantExit(t, name+" on a root dir others may write", err, exitBadInput)
		if err == nil || !strings.Contains(err.Error(), "chmod go-w "+e.g.RootDir) {
			t.Errorf("%s: error %v, want it to name the fix", name, err)
		}
	}
	if c := e.containers("web"); len(c) != 0 {
		t.Errorf("a pod ran on the root dir: %d containers", len(c))
	}
	if _, err := os.Stat(filepath.Join(e.g.RootDir, runner.NodeNameFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root dir was claimed: %v", err)
	}
}

// TestWatchRefusesABusyNodeName: a second watch of a node name on the
// machine, on another root dir, would remove the first one's pods (each
// removes the node's pods its sources do not define): it exits 2 before it
// reaches the engine.
func TestWatchRefusesABusyNodeName(t *testing.T) {
	e := newCmdEnv(t)
	e.g.NodeLockDir = t.TempDir()
	unlock, err := runner.LockNodeName(e.g.NodeLockDir, e.g.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	err = e.watchWith(func(context.Context) (watchEngine, error) {
		return nil, errors.New("watch reached the engine")
	}, []string{"--path", e.dir}, func() bool { return false })
	wantExit(t, "watch of a busy node name", err, exitBadInput)
	if err == nil || !strings.Contains(err.Error(), "another podrun watch runs as it on this machine") {
		t.Errorf("error %v, want it to say another watch runs as the node", err)
	}
	// The root dir's lock was let go with the refusal.
	again, err := runner.LockRootDir(e.g.RootDir)
	if err != nil {
		t.Fatalf("root dir after the refusal: %v", err)
	}
	again()
}

// TestWatchRefusesABusyRootDir: a second watch on a root dir would remove
// the first one's pods (neither defines the other's): it exits 2 before it
// reaches the engine.
func TestWatchRefusesABusyRootDir(t *testing.T) {
	e := newCmdEnv(t)
	unlock, err := runner.LockRootDir(e.g.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	err = e.watchWith(func(context.Context) (watchEngine, error) {
		return nil, errors.New("watch reached the engine")
	}, []string{"--path", e.dir}, func() bool { return false })
	wantExit(t, "watch on a busy root dir", err, exitBadInput)
	if err == nil || !strings.Contains(err.Error(), "another podrun watch runs on it") {
		t.Errorf("error %v, want it to say another watch runs on the root dir", err)
	}
}

func TestWatchGCPercent(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	if got := watchGCPercent(env(nil)); got != 50 {
		t.Errorf("GOGC unset: %d, want 50", got)
	}
	// Set, even to Go's default or off, it is the user's.
	for _, v := range []string{"100", "off", "200", ""} {
		if got := watchGCPercent(env(map[string]string{"GOGC": v})); got != -1 {
			t.Errorf("GOGC=%q: %d, want -1 (keep the user's)", v, got)
		}
	}
}
