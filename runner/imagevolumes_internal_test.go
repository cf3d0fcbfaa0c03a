package runner

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
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

// TestMovedTagKeepsBothCopies: a volume whose tag moved to another image
// names both copies (a container started before mounts the first), so a
// reclaim removes neither while the pod has the volume.
func TestMovedTagKeepsBothCopies(t *testing.T) {
	root := t.TempDir()
	r := &Runner{cfg: Config{RootDir: root}, log: slog.New(slog.DiscardHandler)}
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	pod.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "x:latest"}}}}
	first, second := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	for _, id := range []string{first, second, first} {
		if err := r.nameImageCopy(pod, "img", id); err != nil {
			t.Fatal(err)
		}
		name, _ := imageCopyName(id)
		if err := os.MkdirAll(filepath.Join(root, "images", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.reclaimImageCopies()
	for _, id := range []string{first, second} {
		name, _ := imageCopyName(id)
		if _, err := os.Stat(filepath.Join(root, "images", name)); err != nil {
			t.Errorf("copy of %s: %v, want it kept", id[:15], err)
		}
	}
	if got := r.ImageVolumeImages(); !got[first] || !got[second] {
		t.Errorf("images in use %v, want both", got)
	}
}

// TestImageCopyNamesStayInTheirPodDirectory: a pod's directory of image
// copy names replaced by a symlink to another pod's (inside the root dir)
// leads podrun nowhere: the other pod's names are neither forgotten (its
// copy would be reclaimed under its containers) nor added to.
func TestImageCopyNamesStayInTheirPodDirectory(t *testing.T) {
	root := t.TempDir()
	r := &Runner{cfg: Config{RootDir: root}, log: slog.New(slog.DiscardHandler)}
	owner := &v1.Pod{}
	owner.UID = "u2"
	owner.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "x:latest"}}}}
	id := "sha256:" + strings.Repeat("a", 64)
	if err := r.nameImageCopy(owner, "img", id); err != nil {
		t.Fatal(err)
	}
	names := filepath.Join(root, "pods", "u2", "volumes", imageVolumePlugin)
	before, err := os.ReadFile(filepath.Join(names, "img"))
	if err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(root, "pods", "u1", "volumes")
	if err := os.MkdirAll(vols, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "u2", "volumes", imageVolumePlugin), filepath.Join(vols, imageVolumePlugin)); err != nil {
		t.Fatal(err)
	}
	borrower := &v1.Pod{}
	borrower.UID = "u1"
	r.forgetImageCopyNames(borrower) // it has no image volume: it forgets its names
	borrower.Spec.Volumes = []v1.Volume{{Name: "other", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "y:latest"}}}}
	if err := r.nameImageCopy(borrower, "other", "sha256:"+strings.Repeat("b", 64)); err == nil {
		t.Error("a copy was named through the symlinked directory")
	}
	if got, err := os.ReadFile(filepath.Join(names, "img")); err != nil || string(got) != string(before) {
		t.Errorf("the other pod's copy name: %q, %v; want %q", got, err, before)
	}
	if _, err := os.Lstat(filepath.Join(names, "other")); err == nil {
		t.Error("a name was written into the other pod's directory")
	}
}
