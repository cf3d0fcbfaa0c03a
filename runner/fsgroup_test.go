package runner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func statOf(t *testing.T, p string) (os.FileMode, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode(), int(fi.Sys().(*syscall.Stat_t).Gid)
}

// TestApplyFSGroup: every file and directory of a volume gets the group and
// its bits (setgid on directories), a symlink is re-owned but what it
// points to is not touched, and OnRootMismatch skips a volume whose top
// already matches.
func TestApplyFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes file groups: run it as root, as podrun runs")
	}
	const gid = 2345
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"file", 0o644}, {"sub/deep", 0o600}} {
		p := filepath.Join(dir, f.name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	vr, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()

	if err := applyFSGroup(vr, gid, v1.FSGroupChangeAlways, false); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		".": os.ModeDir | os.ModeSetgid | 0o775, "sub": os.ModeDir | os.ModeSetgid | 0o775,
		"file": 0o664, "sub/deep": 0o660,
	} {
		mode, g := statOf(t, filepath.Join(dir, name))
		if mode != want || g != gid {
			t.Errorf("%s: mode %v gid %d, want %v gid %d", name, mode, g, want, gid)
		}
	}
	if _, g := statOf(t, filepath.Join(dir, "link")); g != gid {
		t.Errorf("symlink gid %d, want %d", g, gid)
	}
	if mode, g := statOf(t, outside); mode != 0o600 || g != 0 {
		t.Errorf("the symlink's target was changed: mode %v gid %d", mode, g)
	}

	// OnRootMismatch: the top matches, so a file changed since is left.
	os.Chown(filepath.Join(dir, "file"), -1, 0)
	if err := applyFSGroup(vr, gid, v1.FSGroupChangeOnRootMismatch, false); err != nil {
		t.Fatal(err)
	}
	if _, g := statOf(t, filepath.Join(dir, "file")); g != 0 {
		t.Errorf("OnRootMismatch with a matching top walked the volume (file gid %d)", g)
	}
	if err := applyFSGroup(vr, gid, v1.FSGroupChangeAlways, false); err != nil {
		t.Fatal(err)
	}
	if _, g := statOf(t, filepath.Join(dir, "file")); g != gid {
		t.Errorf("Always left file with gid %d", g)
	}

	// Read-only volumes get the group's read bit only.
	ro := t.TempDir()
	os.WriteFile(filepath.Join(ro, "key"), []byte("v"), 0o400)
	rr, err := os.OpenRoot(ro)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	if err := applyFSGroup(rr, gid, v1.FSGroupChangeAlways, true); err != nil {
		t.Fatal(err)
	}
	if mode, g := statOf(t, filepath.Join(ro, "key")); mode != 0o440 || g != gid {
		t.Errorf("read-only key: mode %v gid %d, want 0440 gid %d", mode, g, gid)
	}
}
