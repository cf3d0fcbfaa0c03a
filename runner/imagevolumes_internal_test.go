package runner

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReclaimWaitsForTheLock: while a pod (of this podrun or another of
// the root dir) holds the copies' lock to name or make a copy, a reclaim
// removes nothing; once it is released, the copy no pod names goes, and
// only podrun's own names are touched.
func TestReclaimWaitsForTheLock(t *testing.T) {
	root := t.TempDir()
	r := &Runner{cfg: Config{RootDir: root}, log: slog.New(slog.DiscardHandler)}
	name := strings.Repeat("ab", 32)
	copyDir := filepath.Join(root, "images", name)
	foreign := filepath.Join(root, "images", "not-a-copy")
	for _, d := range []string{copyDir, foreign} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	images, _, err := r.openImagesDir()
	if err != nil {
		t.Fatal(err)
	}
	defer images.Close()
	unlock, _, err := lockImages(images, false)
	if err != nil {
		t.Fatal(err)
	}
	r.reclaimImageCopies()
	if _, err := os.Stat(copyDir); err != nil {
		t.Fatalf("removed while the lock was held: %v", err)
	}
	unlock()
	r.reclaimImageCopies()
	if _, err := os.Stat(copyDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy no pod names: %v, want it removed", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a name not podrun's was removed: %v", err)
	}
}
