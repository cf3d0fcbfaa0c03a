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
