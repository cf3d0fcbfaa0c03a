package source

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/podrun/podrun/manifest"
)

// fileSource is a FileSource reacting to fsnotify at once (a short
// debounce) and never rescanning on its own: tests of events stay tests of
// events.
func fileSource(t *testing.T, path string) *FileSource {
	logger, _ := testLogger(t)
	return &FileSource{Path: path, Options: testOptions(), Debounce: 10 * time.Millisecond, Rescan: time.Hour, Logger: logger}
}

func noErr(u Update) bool { return u.Err == nil }

func errContains(parts ...string) func(Update) bool {
	return func(u Update) bool {
		if u.Err == nil {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(u.Err.Error(), p) {
				return false
			}
		}
		return true
	}
}

func and(preds ...func(Update) bool) func(Update) bool {
	return func(u Update) bool {
		for _, p := range preds {
			if !p(u) {
				return false
			}
		}
		return true
	}
}

func pods(names ...string) func(Update) bool {
	return func(u Update) bool { return hasPods(u, names...) }
}

func TestFileSourceDirectoryKeepsLastGoodPerFile(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	writeFile(t, filepath.Join(dir, "b.yaml"), podNamed("b"), 0o644)
	out := startSource(t, fileSource(t, dir).Run)

	first := waitFor(t, out, "the first scan", func(Update) bool { return true })
	if !hasPods(first, "b") || first.Err != nil || first.Snapshot.Source != dir {
		t.Fatalf("first update:\n%s", describeUpdate(first))
	}

	atomicWrite(t, a, podImage("a", "nginx:1"))
	u := waitFor(t, out, "pod a added", and(pods("a", "b"), noErr))
	v1Hash, uid := podHashes(u)["a-node1"], podUIDs(u)["a-node1"]
	absA, _ := filepath.Abs(a)
	if src := u.Snapshot.Pods[0].Annotations[manifest.AnnotationSource]; src != absA {
		t.Errorf("podrun.io/source = %q, want %q", src, absA)
	}

	atomicWrite(t, a, podImage("a", "nginx:2"))
	u = waitFor(t, out, "pod a edited", func(u Update) bool { h := podHashes(u)["a-node1"]; return h != "" && h != v1Hash })
	if u.Err != nil || podUIDs(u)["a-node1"] != uid {
		t.Errorf("an edit must keep the UID and report no error:\n%s", describeUpdate(u))
	}
	goodHash := podHashes(u)["a-node1"]

	// From here on, nothing may remove pod a or change it until it is fixed.
	kept := func(t *testing.T, u Update) {
		t.Helper()
		if h := podHashes(u)["a-node1"]; h != goodHash {
			t.Errorf("pod a changed or vanished while its file is broken:\n%s", describeUpdate(u))
		}
	}

	// An invalid edit: reported with file, line and field; the pod stays.
	atomicWrite(t, a, strings.Replace(podImage("a", "nginx:3"), "image: nginx:3", "image: nginx:3\n    imagePullPolicy: Sometimes", 1))
	u = waitFor(t, out, "the invalid edit reported", errContains(a+":9: spec.containers[0].imagePullPolicy"), kept)
	if !hasPods(u, "a", "b") || len(u.Failing) != 0 {
		t.Errorf("the last good pods must be kept, and a file good once is not Failing:\n%s", describeUpdate(u))
	}

	// Fixed: the error clears.
	atomicWrite(t, a, podImage("a", "nginx:2"))
	waitFor(t, out, "the error cleared", and(noErr, pods("a", "b")), kept)

	// Truncated (a tool about to rewrite it, a full disk): the pod stays.
	if err := os.Truncate(a, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "the empty file reported", errContains(a, "file is empty"), kept)

	// A bad file does not hide what the others say.
	atomicWrite(t, filepath.Join(dir, "b.yaml"), podImage("b", "busybox"))
	u = waitFor(t, out, "b updated", func(u Update) bool {
		return u.Err != nil && podHashes(u)["b-node1"] != podHashes(first)["b-node1"]
	}, kept)

	// Deleted: a clean removal.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "pod a removed", and(pods("b"), noErr))
}

func TestFileSourceIgnoresEditorAndBackupFiles(t *testing.T) {
	dir := t.TempDir()
	ignored := []string{"x.yaml~", ".x.yaml.swp", ".x.swp", "4913", "y.bak", "y.yaml.bak", "README.md"}
	// Some present at the start...
	for _, name := range ignored[:3] {
		writeFile(t, filepath.Join(dir, name), podNamed("ignored"), 0o644)
	}
	out := startSource(t, fileSource(t, dir).Run)
	never := func(t *testing.T, u Update) {
		t.Helper()
		if u.Err != nil || podHashes(u)["ignored-node1"] != "" {
			t.Errorf("an editor or backup file was read:\n%s", describeUpdate(u))
		}
	}
	waitFor(t, out, "the first scan", pods(), never)
	// ... and some made while it runs; z.yaml last, so that when its pod
	// shows up every earlier file has been seen.
	for _, name := range ignored {
		writeFile(t, filepath.Join(dir, name), podNamed("ignored"), 0o644)
	}
	writeFile(t, filepath.Join(dir, "z.yaml"), podNamed("z"), 0o644)
	waitFor(t, out, "only pod z", and(pods("z"), noErr), never)
}

// TestFileSourceDebouncesAnEditorSave: vim's save is one rescan, not a
// removal (x.yaml renamed away) followed by an add. The debounce timer is
// driven by the test: it fires once, after every event of the burst has
// arrived, so the test knows rather than hopes that the burst fell within
// the window.
func TestFileSourceDebouncesAnEditorSave(t *testing.T) {
	dir, x, p, out, first := startWithTestTimer(t)
	if got := p.waitScans(t, 1); !slices.Equal(got, []bool{true}) {
		t.Fatalf("scans = %v", got)
	}

	// vim :w with writebackup: probe the directory with 4913, move the
	// original away, write the new file, restore its mode, drop the backup.
	probeFile := filepath.Join(dir, "4913")
	writeFile(t, probeFile, "", 0o644)
	os.Remove(probeFile)
	if err := os.Rename(x, x+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, x, podImage("x", "nginx:2"), 0o644)
	if err := os.Chmod(x, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(x + "~")
	// inotify delivers in order: when this event is in, all the others are.
	// (mkdir is a single event, so no later one re-arms the timer.)
	if err := os.Mkdir(filepath.Join(dir, ".sentinel"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, ".sentinel")
	if p.armedCount() == 0 {
		t.Fatal("the burst did not arm the debounce timer")
	}

	p.fire(t)
	u := waitFor(t, out, "the new content", func(u Update) bool { return podHashes(u)["x-node1"] != podHashes(first)["x-node1"] })
	if !hasPods(u, "x") || u.Err != nil {
		t.Errorf("update:\n%s", describeUpdate(u))
	}
	// Two scans in all (the first, and the debounced one), each sent once.
	if got := p.waitScans(t, 1); !slices.Equal(got, []bool{true}) {
		t.Errorf("the burst gave scans %v, want one", got)
	}
	select {
	case c := <-p.scans:
		t.Errorf("an extra scan (changed=%v)", c)
	default:
	}
	noUpdate(t, out)
}

func TestFileSourceDirectoryAppearsAndIsRecreated(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "podrun", "manifests")
	out := startSource(t, fileSource(t, dir).Run)

	u := waitFor(t, out, "the first scan", func(Update) bool { return true })
	if u.Snapshot == nil || !u.Snapshot.Empty() || u.Err != nil {
		t.Fatalf("a missing path must be an empty good snapshot:\n%s", describeUpdate(u))
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, filepath.Join(dir, "web.yaml"), podNamed("web"))
	u = waitFor(t, out, "the pod of the new directory", and(pods("web"), noErr))
	uid := podUIDs(u)["web-node1"]

	// Deleted with its parents: a clean removal, not an error.
	if err := os.RemoveAll(filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "the pods gone", and(pods(), noErr))

	// Recreated: back, as the same pod.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, filepath.Join(dir, "web.yaml"), podNamed("web"))
	u = waitFor(t, out, "the pod back", and(pods("web"), noErr))
	if podUIDs(u)["web-node1"] != uid {
		t.Errorf("UID changed across the directory's recreation")
	}
}

func TestFileSourceSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.yaml")
	out := startSource(t, fileSource(t, path).Run)
	notOther := func(t *testing.T, u Update) {
		t.Helper()
		if podHashes(u)["other-node1"] != "" {
			t.Errorf("a sibling of the watched file was read:\n%s", describeUpdate(u))
		}
	}
	waitFor(t, out, "the first scan", and(pods(), noErr))

	writeFile(t, filepath.Join(dir, "other.yaml"), podNamed("other"), 0o644)
	atomicWrite(t, path, podImage("etcd", "etcd:1"))
	u := waitFor(t, out, "the file's pod", and(pods("etcd"), noErr), notOther)

	// An editor's save replaces the file by rename.
	if err := os.Rename(path, path+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, podImage("etcd", "etcd:2"), 0o600)
	u = waitFor(t, out, "the saved content", func(v Update) bool {
		h := podHashes(v)["etcd-node1"]
		return h != "" && h != podHashes(u)["etcd-node1"]
	}, notOther)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "the pod gone", and(pods(), noErr), notOther)
}

func TestFileSourceConflictFirstFileWinsWithoutFlapping(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), podImage("web", "nginx:a"), 0o644)
	writeFile(t, filepath.Join(dir, "b.yaml"), podImage("web", "nginx:b"), 0o644)

	p := newProbe()
	s := fileSource(t, dir)
	s.Rescan = 5 * time.Millisecond
	s.hooks = p.hooks(false)
	out := startSource(t, s.Run)
	u := waitFor(t, out, "the first scan", func(Update) bool { return true })
	if !hasPods(u, "web") || u.Snapshot.Pods[0].Spec.Containers[0].Image != "nginx:a" {
		t.Errorf("the pod of a.yaml (first by name) must win:\n%s", describeUpdate(u))
	}
	if !errContains(filepath.Join(dir, "b.yaml") + ":4: metadata.name: pod default/web conflicts with the pod defined at " + filepath.Join(dir, "a.yaml") + ":4")(u) {
		t.Errorf("the conflict must be reported at b.yaml:\n%s", describeUpdate(u))
	}
	// Many rescans later, still the same: nothing sent again.
	if got := p.waitScans(t, 6); !slices.Equal(got, []bool{true, false, false, false, false, false}) {
		t.Errorf("scans changed = %v, want only the first", got)
	}
	noUpdate(t, out)
}

func TestFileSourceFailingSinceStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, filepath.Join(dir, "good.yaml"), podNamed("good"), 0o644)
	writeFile(t, bad, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec: {}\n", 0o644)
	out := startSource(t, fileSource(t, dir).Run)

	u := waitFor(t, out, "the first scan", func(Update) bool { return true })
	absBad, _ := filepath.Abs(bad)
	if !hasPods(u, "good") || !errContains(bad+":5")(u) || !slices.Equal(u.Failing, []string{absBad}) {
		t.Fatalf("a file invalid since the start must be Failing, the others run:\n%s", describeUpdate(u))
	}

	atomicWrite(t, bad, podNamed("bad"))
	u = waitFor(t, out, "bad fixed", and(pods("good", "bad"), noErr))
	if len(u.Failing) != 0 {
		t.Errorf("Failing = %v after the fix", u.Failing)
	}

	// Broken again: it has been good, so its last good pod is kept and it
	// is not Failing.
	atomicWrite(t, bad, "kind: [\n")
	u = waitFor(t, out, "bad broken again", errContains(bad+":1: invalid YAML"))
	if !hasPods(u, "good", "bad") || len(u.Failing) != 0 {
		t.Errorf("update:\n%s", describeUpdate(u))
	}
}

// TestFileSourceRescanCatchesMissedEvents: with a debounce of an hour,
// fsnotify events cannot cause a scan during the test; only the periodic
// rescan can see the new file.
func TestFileSourceRescanCatchesMissedEvents(t *testing.T) {
	dir := t.TempDir()
	s := fileSource(t, dir)
	s.Debounce = time.Hour
	s.Rescan = 20 * time.Millisecond
	out := startSource(t, s.Run)
	waitFor(t, out, "the first scan", pods())
	atomicWrite(t, filepath.Join(dir, "late.yaml"), podNamed("late"))
	waitFor(t, out, "the rescan to find the pod", and(pods("late"), noErr))
}

func TestFileSourceLogsAProblemOnceAndItsClearing(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "kind: [\n", 0o644)
	p := newProbe()
	logger, logs := testLogger(t)
	s := &FileSource{Path: dir, Options: testOptions(), Rescan: 5 * time.Millisecond, Debounce: time.Hour, Logger: logger, hooks: p.hooks(false)}
	out := startSource(t, s.Run)
	waitFor(t, out, "the first scan", errContains("invalid YAML"))
	if got := p.waitScans(t, 5); !slices.Equal(got, []bool{true, false, false, false, false}) {
		t.Errorf("scans changed = %v: an unchanged error must not be sent again", got)
	}
	atomicWrite(t, bad, podNamed("bad"))
	waitFor(t, out, "the fix", and(noErr, pods("bad")))
	log := logs.String()
	if n := countLines(log, `level=WARN msg="manifest problem"`, "at="+bad); n != 1 {
		t.Errorf("the problem was logged %d times, want once:\n%s", n, log)
	}
	if n := countLines(log, `level=INFO msg="manifest problem cleared"`, "at="+bad); n != 1 {
		t.Errorf("the clearing was logged %d times, want once:\n%s", n, log)
	}
}

// TestFileSourceWarnsOfATypoThatChangesNothing: an edit whose only change
// is a misspelt field (dropped, as the kubelet drops it) leaves the pod as
// it was, and is the edit whose warning matters most: the change meant
// did not happen. It is logged, once, though the pods are unchanged.
func TestFileSourceWarnsOfATypoThatChangesNothing(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "web.yaml")
	writeFile(t, f, minimalPod, 0o644)
	p := newProbe()
	logger, logs := testLogger(t)
	s := &FileSource{Path: dir, Options: testOptions(), Rescan: 5 * time.Millisecond, Debounce: time.Hour, Logger: logger, hooks: p.hooks(false)}
	out := startSource(t, s.Run)
	waitFor(t, out, "the first scan", and(noErr, pods("web")))
	atomicWrite(t, f, minimalPod+"  restartPolicyy: Never\n")
	p.waitScans(t, 5)
	log := logs.String()
	if n := countLines(log, `level=WARN msg="manifest warning"`, "restartPolicyy"); n != 1 {
		t.Errorf("the misspelt field was warned of %d times, want once:\n%s", n, log)
	}
}

// TestFileSourceHandsOnWarningsThatAloneChanged: an edit whose one effect
// is to remove a misspelt (dropped) field changes no pod, but it changes
// the pod's warnings, which /pods and `ps` show from the Mux
// (AnnotateWarnings): the source must send an update with the new
// warnings. The pod itself stays as first seen (config.seen included):
// nothing in it changed.
func TestFileSourceHandsOnWarningsThatAloneChanged(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.yaml")
	const bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: img:1\n    colour: blue\n"
	writeFile(t, x, bad, 0o644)
	p := newProbe()
	s := fileSource(t, dir)
	s.Debounce = time.Hour
	s.hooks = p.hooks(true)
	out := startSource(t, s.Run)
	mux := NewMux([]Named{{Name: dir, Source: newFakeSource()}}, nil)
	mux.update(waitFor(t, out, "the first scan", pods("x")))
	p.waitScans(t, 1)
	first := mux.AnnotateWarnings(mux.Pods())[0]
	if w := first.Annotations[AnnotationManifestWarnings]; !strings.Contains(w, "colour") {
		t.Fatalf("first: warnings %q, want the colour one", w)
	}

	// The misspelt line goes: no pod changes.
	if err := os.WriteFile(x, []byte(strings.Replace(bad, "    colour: blue\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "x.yaml")
	p.fire(t)
	p.waitScans(t, 1)
	select {
	case u := <-out:
		mux.update(u)
	case <-time.After(time.Second):
		t.Fatal("no update was sent for the warnings' change")
	}
	after := mux.AnnotateWarnings(mux.Pods())[0]
	if w := after.Annotations[AnnotationManifestWarnings]; w != "" {
		t.Errorf("after the fix, the pod still carries the warning %q", w)
	}
	if seen := manifest.AnnotationConfigSeen; after.Annotations[seen] != first.Annotations[seen] {
		t.Errorf("config.seen changed from %q to %q, though the pod did not", first.Annotations[seen], after.Annotations[seen])
	}
}

// TestFileSourceUnlistablePath: a path that exists but cannot be read (here
// a symlink loop, which fails for root too) is an error that keeps the last
// good pods; at the start it means the source is not ready (no Snapshot).
func TestFileSourceUnlistablePath(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	writeFile(t, filepath.Join(real, "web.yaml"), podNamed("web"), 0o644)
	link := filepath.Join(root, "manifests")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	out := startSource(t, fileSource(t, link).Run)
	waitFor(t, out, "the first scan", and(pods("web"), noErr))

	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(link, link); err != nil { // a loop: ELOOP
		t.Fatal(err)
	}
	u := waitFor(t, out, "the error", errContains("too many levels of symbolic links"))
	if !hasPods(u, "web") {
		t.Errorf("an unlistable directory must keep its pods:\n%s", describeUpdate(u))
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "the error cleared", and(pods("web"), noErr))

	loop := filepath.Join(root, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	u = waitFor(t, startSource(t, fileSource(t, loop).Run), "the first scan", func(Update) bool { return true })
	if u.Snapshot != nil || u.Err == nil {
		t.Errorf("a path unreadable from the start must give no snapshot and an error:\n%s", describeUpdate(u))
	}
}

func TestFileSourceBadOptions(t *testing.T) {
	logger, _ := testLogger(t)
	s := &FileSource{Path: t.TempDir(), Logger: logger} // no node name
	u := waitFor(t, startSource(t, s.Run), "an update", func(Update) bool { return true })
	if u.Snapshot != nil || u.Err == nil || !strings.Contains(u.Err.Error(), "node name") {
		t.Errorf("update:\n%s", describeUpdate(u))
	}
}

func TestFileSourceRelevantEvents(t *testing.T) {
	sc := &fileScanner{abs: "/etc/podrun/manifests"}
	for name, want := range map[string]bool{
		"/etc/podrun/manifests":           true,  // the directory itself
		"/etc/podrun/manifests/x.yaml":    true,  // an entry
		"/etc/podrun/manifests/.x.swp":    true,  // rescans are cheap; dotfiles may be symlink swaps
		"/etc/podrun":                     true,  // an ancestor (watched while the path is missing)
		"/etc":                            true,  //
		"/":                               true,  //
		"/etc/podrun/manifests2":          false, // a sibling
		"/etc/podrun/other.yaml":          false, //
		"/etc/podrun/manifests/sub/a.yml": false, // not recursive
	} {
		if got := sc.relevant(name); got != want {
			t.Errorf("relevant(%s) = %v, want %v", name, got, want)
		}
	}
	file := &fileScanner{abs: "/etc/kubernetes/manifests/etcd.yaml"}
	for name, want := range map[string]bool{
		"/etc/kubernetes/manifests/etcd.yaml":  true,
		"/etc/kubernetes/manifests/etcd.yaml~": false,
		"/etc/kubernetes/manifests/4913":       false,
		"/etc/kubernetes/manifests":            true,
	} {
		if got := file.relevant(name); got != want {
			t.Errorf("relevant(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestFileSourceSeesTheTargetOfASymlinkEdited: the path is a file that is
// a symlink to a manifest kept elsewhere. The kubelet (file_linux.go,
// doWatch: w.Add(s.path)) watches the path itself, which inotify resolves
// to the target, so an edit of the target is seen at once; so must it be
// here, not only at the periodic rescan (an hour away in this test).
func TestFileSourceSeesTheTargetOfASymlinkEdited(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "store", "web.yaml")
	writeFile(t, real, podImage("web", "nginx:1"), 0o644)
	link := filepath.Join(root, "manifests", "web.yaml")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	out := startSource(t, fileSource(t, link).Run)
	waitFor(t, out, "the first scan", pods("web"))

	// Rewritten in place (the kubelet: IN_MODIFY on the watched target).
	if err := os.WriteFile(real, []byte(podImage("web", "nginx:2")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitImageSoon(t, out, "nginx:2")
}

// TestFileSourceSeesASymlinkSwappedAsAConfigMapVolume: the path is a file
// that is a symlink through ..data, swapped as the kubelet's AtomicWriter
// updates a ConfigMap volume (a new ..timestamp directory, ..data_tmp
// renamed over ..data, the old directory removed). No event names the
// file itself: the swap is an event on its sibling ..data.
func TestFileSourceSeesASymlinkSwappedAsAConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "..v1", "web.yaml"), podImage("web", "nginx:1"), 0o644)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink("..data/web.yaml", filepath.Join(dir, "web.yaml")))
	out := startSource(t, fileSource(t, filepath.Join(dir, "web.yaml")).Run)
	waitFor(t, out, "the first scan", pods("web"))

	writeFile(t, filepath.Join(dir, "..v2", "web.yaml"), podImage("web", "nginx:2"), 0o644)
	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..v1")))
	waitImageSoon(t, out, "nginx:2")
}

// waitImageSoon waits 5 s for an update whose one pod runs image: only
// fsnotify can bring it, the source's rescan is an hour away.
func waitImageSoon(t *testing.T, ch <-chan Update, image string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case u := <-ch:
			if u.Snapshot != nil && len(u.Snapshot.Pods) == 1 && u.Snapshot.Pods[0].Spec.Containers[0].Image == image {
				return
			}
		case <-deadline:
			t.Fatalf("no update with %s within 5s (the rescan is an hour away)", image)
		}
	}
}
