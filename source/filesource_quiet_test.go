package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileSourceReadsAQuietAtomicSaveAtOnce: a manifest file that an
// atomic save replaces (a new file renamed over it) while no event named
// it is read at the rename's event, without waiting for the debounce: the
// timer is the test's and never fires. A rewrite in place still waits
// for it, since a file being written may read as a valid prefix of itself.
func TestFileSourceReadsAQuietAtomicSaveAtOnce(t *testing.T) {
	dir, x, p, out, first := startWithTestTimer(t)

	tmp := filepath.Join(dir, ".x.yaml.tmp")
	writeFile(t, tmp, podImage("x", "nginx:2"), 0o644)
	if err := os.Rename(tmp, x); err != nil {
		t.Fatal(err)
	}
	u := waitFor(t, out, "the saved content, before the debounce", func(u Update) bool {
		return podHashes(u)["x-node1"] != podHashes(first)["x-node1"]
	})
	if !hasPods(u, "x") || u.Err != nil {
		t.Errorf("update:\n%s", describeUpdate(u))
	}

	// In place: the write events wait for the end of the burst. (The
	// scans so far: the first, and the one at the rename.)
	p.waitScans(t, 2)
	writeFile(t, x, podImage("x", "nginx:3"), 0o644)
	if err := os.Mkdir(filepath.Join(dir, ".sentinel"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, ".sentinel")
	if n := len(p.scans); n != 0 {
		t.Fatalf("%d scans at a write in place, before the debounce", n)
	}
	p.fire(t)
	waitFor(t, out, "the content written in place, after the debounce", func(u Update) bool {
		return u.Snapshot != nil && len(u.Snapshot.Pods) == 1 && u.Snapshot.Pods[0].Spec.Containers[0].Image == "nginx:3"
	})
}

// startWithTestTimer runs a file source on a directory holding x.yaml,
// whose debounce timer fires only when the test says (probe.fire), and
// returns the first update.
func startWithTestTimer(t *testing.T) (dir, x string, p *probe, out <-chan Update, first Update) {
	t.Helper()
	dir = t.TempDir()
	x = filepath.Join(dir, "x.yaml")
	writeFile(t, x, podImage("x", "nginx:1"), 0o644)
	p = newProbe()
	s := fileSource(t, dir)
	s.Debounce = time.Hour
	s.hooks = p.hooks(true)
	out = startSource(t, s.Run)
	return dir, x, p, out, waitFor(t, out, "the first scan", pods("x"))
}

// TestFileSourceWaitsForAFileRemovedAndMadeAgain: x.yaml (pods x1 and x2)
// is removed and, while the burst of events goes on (the debounce timer
// is the test's and never fires here), made again and written in two
// steps, its Create coming more than Debounce after its removal. That
// Create is not an atomic save of a known file (a new file renamed over
// it): a Remove named the file since the last scan, so the file is new and
// may be half-written. Read at once, its first half would remove pod x2
// until the end of the burst (a restart), though the file never held x1
// alone as a finished state. No scan may run before the burst ends.
func TestFileSourceWaitsForAFileRemovedAndMadeAgain(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.yaml")
	doc1, doc2 := podNamed("x1"), "---\n"+podNamed("x2")
	writeFile(t, x, doc1+doc2, 0o644)
	p := newProbe()
	s := fileSource(t, dir)
	s.Debounce = 50 * time.Millisecond
	s.hooks = p.hooks(true) // the debounced rescan runs only at p.fire
	out := startSource(t, s.Run)
	waitFor(t, out, "the first scan", pods("x1", "x2"))
	p.waitScans(t, 1)

	if err := os.Remove(x); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "x.yaml")
	time.Sleep(100 * time.Millisecond) // longer than Debounce: x.yaml is quiet again

	f, err := os.OpenFile(x, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(doc1); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "x.yaml") // the Create
	select {
	case changed := <-p.scans:
		u := waitFor(t, out, "the scan's update", func(Update) bool { return true })
		t.Errorf("a scan (changed=%v) read the half-written file before the burst ended:\n%s", changed, describeUpdate(u))
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := f.WriteString(doc2); err != nil {
		t.Fatal(err)
	}
}

// TestFileSourceQuietSaveKeepsAFileMidSave: vim is saving x.yaml (it
// renamed x.yaml to x.yaml~ and has not written the new x.yaml yet: the
// burst goes on, the debounce timer is the test's) when a tool saves
// y.yaml atomically. The quiet Create of y.yaml is read at once, but x.yaml,
// missing, is not taken for deleted then: its pod would be removed and
// made again at the end of vim's burst, a restart. Removals wait for the
// scan at the end of the burst.
func TestFileSourceQuietSaveKeepsAFileMidSave(t *testing.T) {
	dir := t.TempDir()
	x, y := filepath.Join(dir, "x.yaml"), filepath.Join(dir, "y.yaml")
	writeFile(t, x, podNamed("alpha"), 0o644)
	writeFile(t, y, podImage("beta", "nginx:1"), 0o644)
	p := newProbe()
	s := fileSource(t, dir)
	s.Debounce = time.Hour
	s.hooks = p.hooks(true)
	out := startSource(t, s.Run)
	waitFor(t, out, "the first scan", pods("alpha", "beta"))
	p.waitScans(t, 1)

	// vim, step 1: x.yaml becomes the backup.
	if err := os.Rename(x, x+"~"); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "x.yaml")
	// Meanwhile y.yaml is saved atomically, and read at once.
	atomicWrite(t, y, podImage("beta", "nginx:2"))
	betaImage := func(u Update) string {
		if u.Snapshot == nil {
			return ""
		}
		for _, pod := range u.Snapshot.Pods {
			if pod.Name == "beta-node1" {
				return pod.Spec.Containers[0].Image
			}
		}
		return ""
	}
	u := waitFor(t, out, "y's new content", func(u Update) bool { return betaImage(u) == "nginx:2" })
	if !hasPods(u, "alpha", "beta") {
		t.Fatalf("pod alpha, whose file is mid-save, was removed:\n%s", describeUpdate(u))
	}

	// vim never writes x.yaml again: at the end of the burst it is gone.
	p.fire(t)
	waitFor(t, out, "x.yaml removed at the end of the burst", pods("beta"))
}
