package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Confinement of the pod directories (DESIGN.md, "Safety of the host").
//
// podrun runs as root from manifests others write. Every path it makes,
// writes or removes for a pod lies under <root-dir>/pods/<uid>, and is
// reached through an os.Root of the root dir: a name from a manifest is
// checked to be a safe name or a clean relative path first, and os.Root
// refuses '..' and symlinks that leave the root, so a symlink planted in a
// pod's directory (a container writes its emptyDir) cannot send podrun
// elsewhere. The paths podrun hands to the runtime as bind sources are the
// real paths (symlinks resolved) of what it opened, checked to be under the
// root dir (or, for a hostPath volume's subPath, under the hostPath).

// podDirs is one pod's directory, <root-dir>/pods/<uid>, opened within the
// root dir.
type podDirs struct {
	root *os.Root // the root dir
	real string   // its real path
	uid  string   // a safe name
}

// openPodDirs opens the root dir (making it when missing: it is podrun's
// own, from its configuration) for the pod uid, which must be a safe name.
// Of what is under the root dir, only <root-dir>/pods is made (closed to
// others: closePodsDir).
func openPodDirs(rootDir, uid string) (*podDirs, error) {
	if err := checkName("pod uid", uid); err != nil {
		return nil, err
	}
	root, real, err := openRootDir(rootDir)
	if err != nil {
		return nil, err
	}
	if err := closePodsDir(root); err != nil {
		root.Close()
		return nil, fmt.Errorf("pods directory: %w", err)
	}
	return &podDirs{root: root, real: real, uid: uid}, nil
}

// podsDirPerm is the mode of <root-dir>/pods, the kubelet's: its users
// reach nothing below. What podrun keeps there is for the containers, who
// reach it through their mounts and not this path: a Secret's files (0644
// by default), and world-writable emptyDirs, where a container may leave a
// setuid binary or a device node that a user of the host must not run or
// open (Docker's own data directory is closed so for that reason,
// CVE-2021-41091). The root dir's mode (0755 when podrun makes it) does
// not matter then.
const podsDirPerm = 0o750

// closePodsDir makes <root-dir>/pods, of podsDirPerm, in root, and takes
// others' access away from one that allows it (made by an older podrun,
// or under a umask of 0).
func closePodsDir(root *os.Root) error {
	// Every pod-directory operation passes here (disk usage, records,
	// volumes): one Lstat when, as nearly always, it is there and closed.
	fi, err := root.Lstat("pods")
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir("pods", podsDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = root.Lstat("pods")
	}
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o007 == 0 {
		return err // not a directory: refused where it is used
	}
	f, err := root.OpenFile("pods", os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(fi.Mode().Perm() &^ 0o007)
}

// openRootDir opens the root dir (making it when missing) and returns it
// with its real path.
func openRootDir(rootDir string) (*os.Root, string, error) {
	if rootDir == "" {
		rootDir = "."
	}
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, "", err
	}
	real, err := rootRealPath(root)
	if err != nil {
		root.Close()
		return nil, "", err
	}
	return root, real, nil
}

func (d *podDirs) Close() error { return d.root.Close() }

// rel is the path, relative to the root dir, of parts (each a checked safe
// name) in the pod's directory.
func (d *podDirs) rel(parts ...string) string {
	return filepath.Join(append([]string{"pods", d.uid}, parts...)...)
}

// realPath is the real path of f, opened through d.root as rel: it must be
// <root dir>/rel exactly. podrun makes no symlinks in a pod directory, and
// os.Root follows only those that stay in the root dir, so one that leads
// elsewhere in it (another pod's directory) is refused here.
func (d *podDirs) realPath(f *os.File, rel string) (string, error) {
	p, err := fileRealPath(f)
	if err != nil {
		return "", err
	}
	if want := filepath.Join(d.real, rel); p != want {
		return "", fmt.Errorf("%s is %s (a symlink in the pod directory): refused", want, p)
	}
	return p, nil
}

// checkName checks that s, a name from a manifest, is one safe path
// component: not empty, not "." or "..", no '/' and no NUL. A name that is
// not is the manifest's fault: a configError.
func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return configErrorf("%s %q is not a safe file name: refused", what, s)
	}
	return nil
}

// cleanRelPath checks that p, a path from a manifest, is relative and
// without '..' elements, and returns it cleaned. "." (the directory itself)
// is allowed only when dot is.
func cleanRelPath(what, p string, dot bool) (string, error) {
	bad := func(why string) (string, error) {
		return "", configErrorf("%s %q %s: refused", what, p, why)
	}
	switch {
	case p == "":
		return bad("is empty")
	case strings.ContainsRune(p, 0):
		return bad("holds a NUL")
	case filepath.IsAbs(p):
		return bad("is not a relative path")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return bad("has a '..' element")
	}
	clean := filepath.Clean(p)
	if clean == "." && !dot {
		return bad("names no file")
	}
	return clean, nil
}

// isEscape reports whether err is os.Root's refusal of a path that leaves
// the root ('..' above it, or a symlink pointing out of it or absolute).
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), errPathEscapes.Error())
}

// errPathEscapes is openPathBeneath's refusal, worded as os.Root's.
var errPathEscapes = errors.New("path escapes from parent")

// maxWalkDepth is how many levels below a volume's top podrun's walks of
// it (disk usage, fsGroup, pruning) descend. A walk holds one open
// directory per level, and a container nests the directories of its
// emptyDir as deep as it likes: a walk that followed it would take a
// descriptor per level (podrun's limit of open files is the container's to
// exhaust) and, resolving each entry's path from the top, time growing with
// the square of the depth (a chain 4000 deep took a minute and a half).
// 256 levels is a path of 512 bytes at least, far beyond what
// applications nest; the kernel's own PATH_MAX is 4096.
const maxWalkDepth = 256

// errWalkTooDeep ends a walk that meets a directory maxWalkDepth levels
// down which holds more.
var errWalkTooDeep = errors.New("directories nested deeper than podrun walks")

// walkEntry is one entry of a walk of a volume: its path in the volume,
// what Lstat said of it, and the directory holding it with its name there
// (for the volume's top, the top itself and "."), so that an operation on
// it resolves one name in an open directory, not its path from the top.
type walkEntry struct {
	p    string
	fi   fs.FileInfo
	dir  *os.File
	name string
}

// walkVolume calls fn for every entry of the tree of vr, vr's top (".")
// first, with what Lstat said of it, in lexical order. It follows no
// symlink: each directory is opened by its name in its parent's open
// handle, with O_NOFOLLOW, O_DIRECTORY and O_NONBLOCK, so that a directory
// a container swapped for a symlink, a FIFO or a device node meanwhile is
// not opened (ELOOP, ENOTDIR) but skipped, as is an entry gone meanwhile.
// fn's error ends the walk, as does a directory below maxWalkDepth
// (errWalkTooDeep).
func walkVolume(vr *os.Root, fn func(walkEntry) error) error {
	top, err := vr.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer top.Close()
	fi, err := top.Stat()
	if err != nil {
		return err
	}
	if err := fn(walkEntry{p: ".", fi: fi, dir: top, name: "."}); err != nil {
		return err
	}
	return walkDir(top, ".", 0, fn)
}

// walkVolumeFrom calls fn for the entry name of the open directory parent
// (at p in the volume, depth levels below its top), and walks it when it
// is a directory still the one fi describes.
func walkVolumeFrom(parent *os.File, name, p string, fi fs.FileInfo, depth int, fn func(walkEntry) error) error {
	if err := fn(walkEntry{p: p, fi: fi, dir: parent, name: name}); err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	if depth >= maxWalkDepth {
		return fmt.Errorf("%s: %w (%d levels)", p, errWalkTooDeep, maxWalkDepth)
	}
	d, err := openAt(parent, name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_NOFOLLOW)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	// Swapped meanwhile for another directory (renamed in from elsewhere
	// in the volume): not the one fn was told of, not walked here.
	if cur, err := d.Stat(); err != nil || !os.SameFile(fi, cur) {
		return nil
	}
	return walkDir(d, p, depth, fn)
}

// walkDir walks the entries of the open directory d, at p in the volume,
// depth levels below its top.
func walkDir(d *os.File, p string, depth int, fn func(walkEntry) error) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		cfi, err := lstatAt(d, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := walkVolumeFrom(d, name, filepath.Join(p, name), cfi, depth+1, fn); err != nil {
			return err
		}
	}
	return nil
}

// openAt opens name, one path component, in the open directory dir, with
// flags (O_CLOEXEC added). Its errors are *os.PathError of the errno.
func openAt(dir *os.File, name string, flags int) (*os.File, error) {
	conn, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, openErr := -1, error(nil)
	if err := conn.Control(func(dirfd uintptr) {
		for {
			fd, openErr = unix.Openat(int(dirfd), name, flags|unix.O_CLOEXEC, 0)
			if !errors.Is(openErr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if openErr != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: openErr}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// lstatAt is Lstat of name in the open directory dir, through an O_PATH
// handle: a FIFO or a device node is not opened.
func lstatAt(dir *os.File, name string) (fs.FileInfo, error) {
	f, err := openAt(dir, name, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// lchownAt gives name of the open directory dir (a symlink itself, not
// what it points to) to group gid.
func lchownAt(dir *os.File, name string, gid int) error {
	conn, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var chownErr error
	if err := conn.Control(func(dirfd uintptr) {
		chownErr = unix.Fchownat(int(dirfd), name, -1, gid, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return err
	}
	if chownErr != nil {
		return &os.PathError{Op: "fchownat", Path: name, Err: chownErr}
	}
	return nil
}

// chmodSameAt sets the mode of name, in the open directory dir, only if it
// is still the file fi (not a symlink, or another file, swapped in by a
// container since fi was read): Chmod follows symlinks, so a swap would
// otherwise reach whatever the symlink points to.
func chmodSameAt(dir *os.File, name string, fi fs.FileInfo, mode fs.FileMode) error {
	f, err := openAt(dir, name, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer f.Close()
	cur, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, cur) || cur.Mode()&fs.ModeSymlink != 0 {
		return nil // swapped meanwhile: what is there now is not fi
	}
	// The handle's /proc link is the file itself, not a path to resolve.
	return os.Chmod(fdPath(f), mode)
}

// openPathBeneath returns an O_PATH handle of rel within vr: a handle
// that says where the file is without opening it (no FIFO waited on, no
// device driver's open run). Symlinks are followed, the last one too, as
// long as they stay beneath vr (RESOLVE_BENEATH: an absolute one, or '..'
// out of it, is errPathEscapes). os.Root cannot do this: its O_PATH open
// of a symlink is a handle of the symlink itself. Without openat2 it is
// os.Root's non-blocking open for reading.
func openPathBeneath(vr *os.Root, rel string) (*os.File, error) {
	dir, err := vr.Open(".")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	conn, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var openErr error
	for range 10 {
		if err := conn.Control(func(dirfd uintptr) {
			fd, openErr = unix.Openat2(int(dirfd), rel, &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
			})
		}); err != nil {
			return nil, err
		}
		// EAGAIN: a rename in the tree meanwhile (a container's); the
		// kernel asks for another try.
		if !errors.Is(openErr, unix.EAGAIN) {
			break
		}
	}
	switch {
	case errors.Is(openErr, unix.ENOSYS), errors.Is(openErr, unix.EPERM):
		// No openat2 (before Linux 5.6), or a seccomp filter that
		// refuses it (podrun in a container of an older profile).
		return vr.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	case errors.Is(openErr, unix.EXDEV):
		openErr = errPathEscapes
	}
	if openErr != nil {
		return nil, &os.PathError{Op: "openat2", Path: rel, Err: openErr}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), rel)), nil
}

// refused turns os.Root's refusal of a path leaving the root into a
// configError (a name from the manifest, or a symlink the pod's containers
// planted, points out); other errors are wrapped with what.
func refused(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case isEscape(err):
		return configErrorf("%s leads out of its directory (%v): refused", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// within reports whether p is base or under it.
func within(base, p string) bool {
	return p == base || base == "/" && strings.HasPrefix(p, "/") || strings.HasPrefix(p, base+"/")
}

// fdPath is the /proc path of an open file: the file itself, whatever its
// path names meanwhile.
func fdPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// fileRealPath is the real path of the open file f: its path with every
// symlink resolved, checked to name f still.
func fileRealPath(f *os.File) (string, error) {
	p, err := os.Readlink(fdPath(f))
	if err != nil {
		return "", err
	}
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s has no path", f.Name())
	}
	if pfi, err := os.Lstat(p); err != nil || !os.SameFile(fi, pfi) {
		return "", fmt.Errorf("%s moved while it was opened: refused", p)
	}
	return p, nil
}

// rootRealPath is the real path of the directory r is.
func rootRealPath(r *os.Root) (string, error) {
	f, err := r.Open(".")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return fileRealPath(f)
}

// removePodDir unmounts what is mounted under the pod directory of uid
// (tmpfs emptyDirs) and removes it. It refuses a uid that is not a safe
// name, and a pod directory that is a symlink; the removal does not follow
// symlinks, so one planted in the pod directory takes nothing outside with
// it.
func removePodDir(rootDir, uid string) error {
	if err := checkName("pod uid", uid); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	return removeUnmounted(rootDir, filepath.Join("pods", uid), "pod directory")
}

// removeEmptyDirs unmounts and removes the emptyDir volumes of the pod
// uid (<pod dir>/volumes/kubernetes.io~empty-dir), as removePodDir does
// the whole pod directory, and the subPath binds of its stopped
// containers, which would keep a file of them, and its disk, in use.
func removeEmptyDirs(rootDir, uid string) error {
	if err := checkName("pod uid", uid); err != nil {
		return fmt.Errorf("remove emptyDirs: %w", err)
	}
	if err := removeUnmounted(rootDir, filepath.Join("pods", uid, subPathDir), "subPath binds"); err != nil {
		return err
	}
	return removeUnmounted(rootDir, filepath.Join("pods", uid, "volumes", emptyDirPlugin), "emptyDir directory")
}

// removeUnmounted unmounts what is mounted under rel, a directory of the
// root dir, and removes it: refused when rel is, or passes through, a
// symlink.
func removeUnmounted(rootDir, rel, what string) error {
	if rootDir == "" {
		rootDir = "."
	}
	root, err := os.OpenRoot(rootDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	rootReal, err := rootRealPath(root)
	if err != nil {
		return err
	}
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove %s %s: %w", what, rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %s is a symlink: refused", what, filepath.Join(rootReal, rel))
	}
	if fi.IsDir() {
		f, err := root.Open(rel)
		if err != nil {
			return fmt.Errorf("remove %s %s: %w", what, rel, err)
		}
		real, err := fileRealPath(f)
		f.Close()
		if err != nil {
			return err
		}
		if want := filepath.Join(rootReal, rel); real != want {
			return fmt.Errorf("%s %s is %s (a symlink in the root dir): refused", what, want, real)
		}
		mounts, err := mountsUnder(real)
		if err != nil {
			return err
		}
		for _, m := range mounts {
			if err := unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("unmount %s: %w", m, err)
			}
		}
	}
	if fi.IsDir() {
		if err := flattenDeep(root, rel); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(rootReal, rel), err)
		}
	}
	if err := root.RemoveAll(rel); err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Join(rootReal, rel), err)
	}
	return nil
}

// flattenPrefix begins the names flattenDeep gives the directories it
// moves up.
const flattenPrefix = ".podrun-flat-"

// flattenDeep moves every directory it finds maxWalkDepth levels below
// rel, a directory of root about to be removed, up into rel itself, and
// goes on below it from there, until no directory is that deep. os.Root's
// RemoveAll holds one open directory per level: on a tree a container
// nested deeper than podrun's limit of open files it fails (EMFILE),
// leaving the pod directory behind for good, and on one nearly that deep
// it takes every descriptor podrun has while it runs. Renaming within
// the tree (one filesystem) moves a subtree without copying it.
func flattenDeep(root *os.Root, rel string) error {
	top, err := root.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer top.Close()
	f := &flattener{top: top}
	if err := f.hoist(top, 0); err != nil {
		return err
	}
	for len(f.queue) > 0 {
		name := f.queue[0]
		f.queue = f.queue[1:]
		d, err := openAt(top, name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_NOFOLLOW)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.hoist(d, 1)
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// flattener is one flattenDeep: the top directory, the names of the
// directories moved up into it and not walked yet, and how many were.
type flattener struct {
	top   *os.File
	queue []string
	moved int
}

// hoist walks the directory d, depth levels below the top, and moves each
// directory maxWalkDepth levels down up into the top, to be walked later.
func (f *flattener) hoist(d *os.File, depth int) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		dir, err := isDirAt(d, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !dir {
			continue
		}
		if depth+1 >= maxWalkDepth {
			if err := f.moveUp(d, name); err != nil {
				return err
			}
			continue
		}
		c, err := openAt(d, name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_NOFOLLOW)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.hoist(c, depth+1)
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// isDirAt reports whether name, of the open directory dir, is a
// directory (a symlink is not): one fstatat, opening nothing, as the
// flattener asks it of every entry of a tree about to be removed.
func isDirAt(dir *os.File, name string) (bool, error) {
	var st unix.Stat_t
	err := withFd(dir, func(fd int) error {
		return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return false, &os.PathError{Op: "fstatat", Path: name, Err: err}
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// moveUp renames name, of the open directory d, into the top under a
// fresh name (the next one when the container took it).
func (f *flattener) moveUp(d *os.File, name string) error {
	for {
		to := flattenPrefix + strconv.Itoa(f.moved)
		f.moved++
		err := renameAt(d, name, f.top, to)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.ENOTDIR) {
			continue // a name the container took: the next one
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			f.queue = append(f.queue, to)
		}
		return nil
	}
}

// renameAt renames from, of the open directory fromDir, to to in toDir.
// It replaces at most an empty directory there (renameat(2)), which is
// of the tree being removed as well.
func renameAt(fromDir *os.File, from string, toDir *os.File, to string) error {
	var renameErr error
	err := withFd(fromDir, func(fd1 int) error {
		return withFd(toDir, func(fd2 int) error {
			renameErr = unix.Renameat(fd1, from, fd2, to)
			return nil
		})
	})
	if err != nil {
		return err
	}
	if renameErr != nil {
		return &os.LinkError{Op: "renameat", Old: from, New: to, Err: renameErr}
	}
	return nil
}

// withFd calls fn with f's descriptor, kept open meanwhile.
func withFd(f *os.File, fn func(fd int) error) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := conn.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}
