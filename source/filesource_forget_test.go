package source

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/podrun/podrun/manifest"
)

// TestFileScannerForgetsRemovedFiles: a watch runs for months while a
// config tool writes each version of a manifest under a new name and
// removes the old file (found by a soak of `podrun watch` that renamed
// files). What the scanner remembers of files must not grow with every
// name it ever read: a file removed is forgotten, all of it. So a file
// removed and made again broken is a new file, Failing as one broken
// since the start (the scanner used to keep, for every name, that it had
// been good once), while a file broken in place keeps its last good pods
// and is not Failing.
func TestFileScannerForgetsRemovedFiles(t *testing.T) {
	dir := t.TempDir()
	logger, _ := testLogger(t)
	opts, err := testOptions().Complete()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := manifest.NewFileReader(opts)
	if err != nil {
		t.Fatal(err)
	}
	sc := newFileScanner(dir, dir, opts, reader, logger)

	for i := range 50 {
		f := filepath.Join(dir, fmt.Sprintf("web-v%d.yaml", i))
		writeFile(t, f, podNamed("web"), 0o644)
		if u := sc.scan(); u.Err != nil || len(u.Snapshot.Pods) != 1 {
			t.Fatalf("version %d: %v, %d pods", i, u.Err, len(u.Snapshot.Pods))
		}
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
		if u := sc.scan(); u.Err != nil || len(u.Snapshot.Pods) != 0 {
			t.Fatalf("version %d removed: %v, %d pods", i, u.Err, len(u.Snapshot.Pods))
		}
	}
	if n := len(sc.good); n != 0 {
		t.Errorf("after 50 files written and removed, the scanner remembers %d of them", n)
	}

	// Broken in place: its last good pod is kept, and it is not Failing.
	f := filepath.Join(dir, "web.yaml")
	writeFile(t, f, podNamed("web"), 0o644)
	sc.scan()
	writeFile(t, f, "kind: [\n", 0o644)
	if u := sc.scan(); u.Err == nil || len(u.Snapshot.Pods) != 1 || len(u.Failing) != 0 {
		t.Errorf("broken in place: err %v, %d pods, Failing %v", u.Err, len(u.Snapshot.Pods), u.Failing)
	}
	// Removed, then made again broken: a new file.
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	sc.scan()
	writeFile(t, f, "kind: [\n", 0o644)
	if u := sc.scan(); u.Err == nil || len(u.Snapshot.Pods) != 0 || !slices.Equal(u.Failing, []string{f}) {
		t.Errorf("removed and made again broken: err %v, %d pods, Failing %v", u.Err, len(u.Snapshot.Pods), u.Failing)
	}
}
