package runner

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestVolumeWalksDoNotBlockOnASwappedFIFO: a container that keeps
// swapping a directory of its emptyDir with a FIFO does not make podrun's
// walks of the volume (the disk usage eviction measures, fsGroup's
// re-owning) open the FIFO, which would block them until a writer came.
func TestVolumeWalksDoNotBlockOnASwappedFIFO(t *testing.T) {
	vol := t.TempDir()
	dir, fifo, d := filepath.Join(vol, "dirA"), filepath.Join(vol, "fifoB"), filepath.Join(vol, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Rename(dir, d)
			os.Rename(d, dir)
			os.Rename(fifo, d)
			os.Rename(d, fifo)
		}
	}()
	endSwaps := sync.OnceFunc(func() { close(stop); <-stopped })
	defer endSwaps()
	vr, err := os.OpenRoot(vol)
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20000; i++ {
			diskUsage(vr)
			applyFSGroup(vr, 1234, v1.FSGroupChangeAlways, false)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Be the FIFO's writer, wherever it is now, so that the walk's
		// goroutine ends; then fail.
		endSwaps()
		for _, p := range []string{d, fifo, dir} {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatal("a walk of the volume blocked on a FIFO listed as a directory")
	}
}

// TestChmodSameDoesNotFollowASwappedSymlink: a file the walk saw, swapped
// for a symlink to another file before its chmod, leaves that other file
// alone (a setuid bit meant for the container's own file is not put on a
// root-owned one).
func TestChmodSameDoesNotFollowASwappedSymlink(t *testing.T) {
	vol := t.TempDir()
	own, victim := filepath.Join(vol, "own"), filepath.Join(vol, "victim")
	for _, p := range []string{own, victim} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(vol)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	fi, err := os.Lstat(own)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("victim", own); err != nil {
		t.Fatal(err)
	}
	if err := chmodSameAt(dir, "own", fi, 0o4755); err != nil {
		t.Fatal(err)
	}
	if mode, _ := statOf(t, victim); mode != 0o644 {
		t.Fatalf("victim's mode %v, want it untouched (0644)", mode)
	}

	// Unswapped, the file itself is changed.
	if err := os.WriteFile(filepath.Join(vol, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Lstat(filepath.Join(vol, "plain"))
	if err != nil {
		t.Fatal(err)
	}
	if err := chmodSameAt(dir, "plain", fi, 0o664); err != nil {
		t.Fatal(err)
	}
	if mode, _ := statOf(t, filepath.Join(vol, "plain")); mode != 0o664 {
		t.Fatalf("plain's mode %v, want 0664", mode)
	}
}

// TestWalkVolumeDoesNotFollowASwappedSymlink: a directory the walk saw,
// swapped for a symlink to another directory of the volume before it is
// listed, is not listed (os.Root would follow the symlink).
func TestWalkVolumeDoesNotFollowASwappedSymlink(t *testing.T) {
	vol := t.TempDir()
	for _, d := range []string{"a", "b/child"} {
		if err := os.MkdirAll(filepath.Join(vol, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(vol)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	fi, err := os.Lstat(filepath.Join(vol, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(vol, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", filepath.Join(vol, "a")); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := walkVolumeFrom(dir, "a", "a", fi, 1, func(e walkEntry) error { seen = append(seen, e.p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Errorf("walked %v, want only a itself", seen)
	}
}
