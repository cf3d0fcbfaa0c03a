package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Safety of the host: no string of a manifest takes podrun outside its root
// dir. A pod's directory is <root-dir>/pods/<uid>; the env's root dir is a
// t.TempDir(), so <root-dir>/pods/../../victim is a sibling of the root dir.

// victimDir makes a directory beside the env's root dir with a file in it,
// where a manifest that escaped the root dir would reach, and returns it.
func victimDir(t *testing.T, e *env) string {
	t.Helper()
	victim := filepath.Join(filepath.Dir(e.root), "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return victim
}

// assertVictimIntact fails unless victimDir's directory and file are as made.
func assertVictimIntact(t *testing.T, victim string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(victim, "precious"))
	if err != nil || string(data) != "keep me\n" {
		t.Fatalf("a directory outside the root dir was touched: read %s: %q, %v", victim, data, err)
	}
}

// lineOf returns the 1-based line of the first line of s containing sub.
func lineOf(t *testing.T, s, sub string) int {
	t.Helper()
	for i, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return i + 1
		}
	}
	t.Fatalf("no line contains %q", sub)
	return 0
}

// assertRefused checks that a podrun command refused a manifest as bad input
// (exit 2) naming file:line and field, and started nothing.
func assertRefused(t *testing.T, e *env, r result, cmd, file string, line int, field string) {
	t.Helper()
	if r.code != 2 {
		t.Fatalf("%s: want exit 2, got %d\nstdout:\n%s\nstderr:\n%s", cmd, r.code, r.stdout, r.stderr)
	}
	contains(t, cmd+" stderr", r.stderr, fmt.Sprintf("%s:%d: %s: ", file, line, field))
	if n := len(e.containers()); n != 0 {
		t.Fatalf("%s: a refused manifest started %d containers", cmd, n)
	}
	assertNoPodDirs(t, e)
}

func TestHostileUIDRefused(t *testing.T) {
	e := newEnv(t)
	victim := victimDir(t, e)
	if got := filepath.Join(e.root, "pods", "../../victim"); got != victim {
		t.Fatalf("test setup: the hostile pod directory %s is not the victim %s", got, victim)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: hostile
  uid: ../../victim
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: [sleep, "3600"]
  volumes:
  - name: scratch
    emptyDir: {}
`, testImage)
	p := e.write("hostile.yaml", manifest)
	line := lineOf(t, manifest, "uid:")

	for _, cmd := range [][]string{
		{"validate", p},
		{"once", "--timeout", "30s", p},
		{"down", p},
		{"once", "--timeout", "30s", e.dir},
		{"down", e.dir},
	} {
		r := e.podrun(time.Minute, cmd[0], cmd[1:]...)
		name := strings.Join(cmd, " ")
		assertRefused(t, e, r, name, p, line, "metadata.uid")
		contains(t, name+" stderr", r.stderr, `"../../victim"`, "must be a safe name such as a UUID")
		assertVictimIntact(t, victim)
	}
}

func TestHostileItemPathRefused(t *testing.T) {
	e := newEnv(t)
	victim := victimDir(t, e)
	for i, path := range []string{"../../x", "..data", "/etc/x"} {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: items
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: [sleep, "3600"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
  volumes:
  - name: cfg
    configMap:
      name: cfg
      items:
      - key: a
        path: %s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  a: hello
`, testImage, strconv.Quote(path))
		p := e.write("items"+strconv.Itoa(i)+".yaml", manifest)
		line := lineOf(t, manifest, "path:")
		for _, cmd := range [][]string{{"validate", p}, {"once", "--timeout", "30s", p}} {
			r := e.podrun(time.Minute, cmd[0], cmd[1:]...)
			assertRefused(t, e, r, strings.Join(cmd, " ")+" ("+path+")", p, line, "spec.volumes[0].configMap.items[0].path")
		}
		os.Remove(p)
	}
	assertVictimIntact(t, victim)
}

// TestNothingOutsideRootRemovedByDown: once and down of a pod with every kind
// of volume podrun makes (emptyDir, configMap with and without items and with
// a subPath, downwardAPI, projected) create and remove its pod directory under
// the root dir and touch nothing beside it.
func TestNothingOutsideRootRemovedByDown(t *testing.T) {
	e := newEnv(t)
	victim := victimDir(t, e)
	parent := filepath.Dir(e.root)
	listParent := func() []string {
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		return names
	}
	uid := "safety-" + e.node
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: vols
  uid: %[1]s
  labels: {app: vols}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %[2]s
    command: ["sh", "-c", "echo data > /scratch/file && cat /cfg/a /all/b /info/labels /one/a /proj/name && exec sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: cfg, mountPath: /cfg, readOnly: true}
    - {name: all, mountPath: /all, readOnly: true}
    - {name: cfg, mountPath: /one/a, subPath: a, readOnly: true}
    - {name: info, mountPath: /info, readOnly: true}
    - {name: proj, mountPath: /proj, readOnly: true}
  volumes:
  - name: scratch
    emptyDir: {}
  - name: cfg
    configMap:
      name: cfg
      items:
      - {key: a, path: a}
      - {key: b, path: sub/dir/b}
  - name: all
    configMap:
      name: cfg
  - name: info
    downwardAPI:
      items:
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
      - path: meta/uid
        fieldRef: {fieldPath: metadata.uid}
  - name: proj
    projected:
      sources:
      - configMap:
          name: cfg
          items: [{key: a, path: cfg-a}]
      - downwardAPI:
          items:
          - path: name
            fieldRef: {fieldPath: metadata.name}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  a: alpha
  b: beta
`, uid, testImage)
	e.write("vols.yaml", manifest)
	before := listParent()
	if !slices.Contains(before, "victim") {
		t.Fatalf("test setup: victim not beside the root dir: %v", before)
	}

	r := e.podrun(3*time.Minute, "once", "--timeout", "2m", e.dir)
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	podDir := filepath.Join(e.root, "pods", uid)
	if fi, err := os.Stat(podDir); err != nil || !fi.IsDir() {
		t.Fatalf("once did not make the pod directory %s: %v", podDir, err)
	}
	entries, err := os.ReadDir(filepath.Join(e.root, "pods"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one pod directory under %s, got %v (%v)", filepath.Join(e.root, "pods"), entries, err)
	}
	assertVictimIntact(t, victim)

	r = e.podrun(2*time.Minute, "down", e.dir)
	if r.code != 0 {
		t.Fatalf("down: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "down output", r.stdout, "vols-"+e.node)
	if n := len(e.containers()); n != 0 {
		t.Fatalf("down left %d containers", n)
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Fatalf("down left the pod directory %s: %v", podDir, err)
	}
	assertNoPodDirs(t, e)
	assertVictimIntact(t, victim)
	if after := listParent(); !slices.Equal(after, before) {
		t.Fatalf("the root dir's parent changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "vols.yaml")); err != nil {
		t.Fatalf("the manifest is gone: %v", err)
	}
}

// TestDownRemovesADeeplyNestedEmptyDir: a container nests its emptyDir's
// directories deeper than podrun may open files (a chain moved into the
// bottom of a new one, again and again: no path is ever long). podrun
// down removes the pod directory all the same; os.Root's RemoveAll, one
// open directory per level, failed with EMFILE and left it for good. podrun
// runs under a limit of 1024 open files so that the tree stays small.
func TestDownRemovesADeeplyNestedEmptyDir(t *testing.T) {
	e := newEnv(t)
	manifest := e.write("deep.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: deep
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "P=$(printf 'd/%%.0s' $(seq 1000)); cd /scratch && mkdir c && for i in 1 2 3; do mkdir -p t/$P && mv c t/$P/c && mv t c || exit 1; done; echo nested > ok; exec sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: scratch
    emptyDir: {}
`, testImage))
	if r := e.podrun(3*time.Minute, "once", "--timeout", "2m", manifest); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	waitFor(t, "the container to nest its emptyDir", 2*time.Minute, func() bool {
		oks, _ := filepath.Glob(filepath.Join(e.root, "pods", "*", "volumes", "kubernetes.io~empty-dir", "scratch", "ok"))
		return len(oks) == 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// dash's ulimit sets the hard limit too: podrun cannot raise it back.
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -n 1024 && exec "$0" "$@"`, podrunBin}, e.args("down", manifest)...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("down under 1024 open files: %v\n%s", err, out)
	}
	assertNoPodDirs(t, e)
}
