package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// subPathDir is the directory of a pod's directory that holds its subPath
// binds, as the kubelet's volume-subpaths: <volume>/<container>/<index>.
const subPathDir = "volume-subpaths"

// bindSubPath binds the subPath that f (an O_PATH handle from
// subPathSource) is a handle of onto a path of podrun's own,
// <pod dir>/volume-subpaths/<volume>/<container>/<index>, and returns
// that path for the engine to bind into the container. The engine is thus
// never handed a path inside the volume: between podrun's check and the
// engine's bind, a container that writes the volume could swap a directory
// of that path for a symlink to anywhere on the host (the kubelet binds
// its subpaths so for that reason). The bind is of the file f holds, not
// of a path. A bind already there of the same file (the container's
// earlier attempt) is kept; one of another file is replaced. Teardown
// (removePodDir) unmounts them all.
//
// The bind receives the mount events of its source (a mount the host
// makes under it shows in it) but sends none back (MS_SLAVE): teardown's
// unmount of it, and of what it received, must not unmount the host's own
// mounts. shared (a Bidirectional mount, which the engine binds rshared)
// makes it a peer group of its own as well, as the engine requires.
func bindSubPath(rootDir, uid, volume, container string, index int, f *os.File, shared bool) (string, error) {
	if err := checkName("volume name", volume); err != nil {
		return "", err
	}
	if err := checkName("container name", container); err != nil {
		return "", err
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return "", err
	}
	defer d.Close()
	src, err := f.Stat()
	if err != nil {
		return "", err
	}
	parent, err := d.openDir(true, subPathDir, volume, container)
	if err != nil {
		return "", err
	}
	defer parent.Close()
	name := strconv.Itoa(index)
	target := filepath.Join(d.real, d.rel(subPathDir, volume, container, name))
	mounted, err := isMountPoint(target)
	if err != nil {
		return "", err
	}
	if mounted {
		if cur, err := os.Stat(target); err == nil && os.SameFile(cur, src) {
			return target, propagate(target, shared)
		}
		if err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return "", fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	// The mount point, of the bound file's kind: made anew.
	if err := parent.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", refused(target, err)
	}
	if src.IsDir() {
		err = parent.Mkdir(name, 0o750)
	} else {
		var m *os.File
		if m, err = parent.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640); err == nil {
			err = m.Close()
		}
	}
	if err != nil {
		return "", refused(target, err)
	}
	if err := unix.Mount(fdPath(f), target, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind subPath onto %s: %w", target, err)
	}
	if err := propagate(target, shared); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return "", err
	}
	return target, nil
}

// propagate sets the propagation of the bind at target: a slave of its
// source, and shared as well when shared (bindSubPath).
func propagate(target string, shared bool) error {
	flags := []uintptr{unix.MS_SLAVE}
	if shared {
		flags = append(flags, unix.MS_SHARED)
	}
	for _, fl := range flags {
		if err := unix.Mount("", target, "", fl, ""); err != nil {
			return fmt.Errorf("propagation of the subPath bind %s: %w", target, err)
		}
	}
	return nil
}
