package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// nestDirs makes a chain of depth directories "d" under vol, as a
// container does with mkdir d && cd d in a loop (each made relative to the
// last, so that no path is ever longer than one name), and writes size
// bytes to a file at its bottom.
func nestDirs(t *testing.T, vol string, depth, size int) {
	t.Helper()
	fd, err := unix.Open(vol, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "data", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
}

// TestWalksOfADeepTreeEndPromptly: a container can nest its emptyDir's
// directories thousands deep in seconds. podrun's walks of the volume
// (the disk usage eviction measures every period, fsGroup's re-owning)
// resolved every entry's path from the volume's top, in time growing with
// the square of the depth: a chain 4000 deep held the eviction manager,
// which looks at every pod in turn, for a minute and a half, and one
// 30000 deep for an hour. They now stop at maxWalkDepth: the usage of a
// tree deeper than that is unmeasuredUsage (over any sizeLimit, so that
// nothing can be hidden below the levels walked), and fsGroup's walk an
// error naming the reason.
func TestWalksOfADeepTreeEndPromptly(t *testing.T) {
	vol := t.TempDir()
	nestDirs(t, vol, 3000, 1<<20)
	vr, err := os.OpenRoot(vol)
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()

	if got := diskUsage(vr); got != unmeasuredUsage {
		t.Errorf("disk usage of a tree 3000 deep: %d, want unmeasuredUsage", got)
	}
	err = applyFSGroup(vr, os.Getgid(), v1.FSGroupChangeAlways, false)
	if !errors.Is(err, errWalkTooDeep) {
		t.Errorf("fsGroup on a tree 3000 deep: %v, want errWalkTooDeep", err)
	}
}

// TestWalkAtMaxDepthMeasuresAll: a tree just as deep as podrun walks is
// measured whole, the file at its bottom included.
func TestWalkAtMaxDepthMeasuresAll(t *testing.T) {
	vol := t.TempDir()
	nestDirs(t, vol, maxWalkDepth-1, 1<<20)
	vr, err := os.OpenRoot(vol)
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()
	got := diskUsage(vr)
	if got == unmeasuredUsage || got < 1<<20 {
		t.Errorf("disk usage of a tree %d deep holding 1 MiB: %d", maxWalkDepth-1, got)
	}
	if err := applyFSGroup(vr, os.Getgid(), v1.FSGroupChangeAlways, false); err != nil {
		t.Errorf("fsGroup on a tree %d deep: %v", maxWalkDepth-1, err)
	}
}

// TestRemoveADeeperTreeThanOpenFiles: a pod directory whose emptyDir a
// container nested deeper than podrun may open files is removed whole.
// os.Root's RemoveAll holds one open directory per level and failed with
// EMFILE, leaving the pod directory behind for good (and, nearly that
// deep, took every descriptor podrun had while it ran).
func TestRemoveADeeperTreeThanOpenFiles(t *testing.T) {
	rootDir := t.TempDir() // removed after the limit is restored
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Deeper than the test process may open files, at a limit lowered for
	// the test so that the tree stays small.
	low := lim
	low.Cur = 1024
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) })

	uid := "deep-uid"
	vol := filepath.Join(rootDir, "pods", uid, "volumes", emptyDirPlugin, "scratch")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	nestDirs(t, vol, 3000, 10)
	if err := removePodDir(rootDir, uid); err != nil {
		t.Fatalf("removePodDir: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(rootDir, "pods", uid)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod directory still there: %v", err)
	}
}
