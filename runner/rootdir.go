package runner

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A root dir belongs to one node name, as a kubelet's root dir belongs to
// one kubelet. What podrun keeps there is keyed by pod UID alone (pod
// directories, CRI log directories, image copies and the files that name
// them), and housekeeping removes every pod directory its own node does not
// know: a second node name on the root dir would have its live pods'
// directories, emptyDirs included, removed under them. So the first podrun
// that runs pods in a root dir records its node name there, and every podrun
// of the root dir checks it.

// NodeNameFile is the file, in the root dir, that names the node it
// belongs to.
const NodeNameFile = "node-name"

// RootDirOwnerError is a root dir that belongs to another node name.
type RootDirOwnerError struct {
	RootDir  string
	Owner    string // the node name the root dir records
	NodeName string // the node name that was refused
}

func (e *RootDirOwnerError) Error() string {
	return fmt.Sprintf("root dir %s belongs to node %q, not %q: give node %q a --root-dir of its own, or run as --node-name %s "+
		"(to hand the root dir to another node name, run `podrun down --all --node-name %s --root-dir %s`, then delete %s)",
		e.RootDir, e.Owner, e.NodeName, e.NodeName, e.Owner, e.Owner, e.RootDir, filepath.Join(e.RootDir, NodeNameFile))
}

// ClaimRootDir makes rootDir (made when missing) node nodeName's: on first
// use it records nodeName there, and it refuses a root dir another node
// name recorded (a *RootDirOwnerError). A root dir that has pods but no
// record yet (made by a podrun before the record) is adopted by the first
// node name that claims it. Two podruns that claim a new root dir at once,
// for two node names, cannot both win: the record is linked into place,
// which fails when it exists, and the loser reads the winner's.
func ClaimRootDir(rootDir, nodeName string) error {
	root, real, err := openRootDir(rootDir)
	if err != nil {
		return fmt.Errorf("root dir %s: %w", rootDir, err)
	}
	defer root.Close()
	if err := checkRootDirSafe(root, rootDir, real); err != nil {
		return err
	}
	owner, err := readOwner(root, rootDir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := recordOwner(root, nodeName); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("root dir %s: record node name: %w", rootDir, err)
		}
		owner, err = readOwner(root, rootDir)
	}
	if err != nil {
		return err
	}
	return checkOwner(rootDir, owner, nodeName)
}

// CheckRootDir refuses a root dir that another node name recorded (a
// *RootDirOwnerError), recording nothing: for the commands that make no
// pods. A root dir without a record, or none at all, passes.
func CheckRootDir(rootDir, nodeName string) error {
	root, err := os.OpenRoot(rootDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("root dir %s: %w", rootDir, err)
	}
	defer root.Close()
	real, err := rootRealPath(root)
	if err != nil {
		return fmt.Errorf("root dir %s: %w", rootDir, err)
	}
	if err := checkRootDirSafe(root, rootDir, real); err != nil {
		return err
	}
	owner, err := readOwner(root, rootDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return checkOwner(rootDir, owner, nodeName)
}

// RootDirUnsafeError is a root dir that a user other than root, or the
// one podrun runs as, could change. podrun runs pods as root from what it
// keeps there (pod directories, node name, records, its socket), so such a
// user could plant files that podrun then trusts, or move the root dir
// away and put one of their own in its place.
type RootDirUnsafeError struct {
	RootDir string
	Dir     string // the directory at fault: the root dir or a parent of it
	Problem string
	Fix     string
}

func (e *RootDirUnsafeError) Error() string {
	what := "root dir " + e.RootDir
	if e.Dir != "" {
		what += ": its parent " + e.Dir
	}
	return fmt.Sprintf("%s %s, so another user could change what podrun runs pods from; %s", what, e.Problem, e.Fix)
}

// checkRootDirSafe refuses a root dir (root, whose real path is real) that
// is not owned by root or podrun's user, or that group or others may
// write, and one with a parent that group or others may write without the
// sticky bit (they could rename the root dir). As sshd's StrictModes, but
// a parent's owner is trusted: it is who chose the path.
func checkRootDirSafe(root *os.Root, rootDir, real string) error {
	fi, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("root dir %s: %w", rootDir, err)
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if euid := uint32(os.Geteuid()); uid != 0 && uid != euid {
		return &RootDirUnsafeError{RootDir: rootDir, Problem: fmt.Sprintf("is owned by uid %d", uid),
			Fix: fmt.Sprintf("chown %d %s", euid, real)}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return &RootDirUnsafeError{RootDir: rootDir, Problem: fmt.Sprintf("is writable by group or others (mode %#o)", perm),
			Fix: "chmod go-w " + real}
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("root dir %s: %w", rootDir, err)
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return &RootDirUnsafeError{RootDir: rootDir, Dir: dir,
				Problem: fmt.Sprintf("is writable by group or others (mode %#o) without the sticky bit", perm),
				Fix:     fmt.Sprintf("chmod go-w %s (or chmod +t %s)", dir, dir)}
		}
		if dir == "/" {
			return nil
		}
	}
}

func checkOwner(rootDir, owner, nodeName string) error {
	if owner != nodeName {
		return &RootDirOwnerError{RootDir: rootDir, Owner: owner, NodeName: nodeName}
	}
	return nil
}

// readOwner reads the node name the root dir records; an error that wraps
// fs.ErrNotExist means none.
func readOwner(root *os.Root, rootDir string) (string, error) {
	b, err := root.ReadFile(NodeNameFile)
	if err != nil {
		return "", fmt.Errorf("root dir %s: read its node name: %w", rootDir, err)
	}
	owner := strings.TrimSpace(string(b))
	if owner == "" {
		// Never podrun's: the record is linked into place whole.
		return "", fmt.Errorf("root dir %s: %s names no node: write the node name into it, or delete it to let the next podrun claim the root dir",
			rootDir, filepath.Join(rootDir, NodeNameFile))
	}
	return owner, nil
}

// recordOwner records nodeName in root unless a record exists (then an
// error that wraps fs.ErrExist). The record is written whole to a file of
// its own and linked into place: a reader finds no record or a whole one,
// and of two podruns recording at once exactly one links.
func recordOwner(root *os.Root, nodeName string) error {
	tmp := "." + NodeNameFile + "." + rand.Text() + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(tmp)
	_, err = f.WriteString(nodeName + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := root.Link(tmp, NodeNameFile); err != nil {
		return err
	}
	// The record must outlive a crash, or the next boot could adopt the
	// root dir for another node name.
	dir, err := root.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// WatchLockFile is the file, in the root dir, that a running watch holds
// locked.
const WatchLockFile = "watch.lock"

// RootDirBusyError is a root dir another podrun watch runs on.
type RootDirBusyError struct{ RootDir string }

func (e *RootDirBusyError) Error() string {
	return fmt.Sprintf("root dir %s: another podrun watch runs on it (it holds %s); "+
		"two would remove each other's pods", e.RootDir, filepath.Join(e.RootDir, WatchLockFile))
}

// LockRootDir takes rootDir for one watch until unlock (or the process
// ends: the lock is the kernel's, on an open file, so a killed watch
// leaves none behind). A second watch gets a *RootDirBusyError at once.
func LockRootDir(rootDir string) (unlock func(), err error) {
	fd, err := flockFile(filepath.Join(rootDir, WatchLockFile))
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil, &RootDirBusyError{RootDir: rootDir}
	}
	if err != nil {
		return nil, fmt.Errorf("root dir %s: %w", rootDir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// DefaultNodeLockDir is where a watch locks its node name: on the machine,
// whatever its root dir.
const DefaultNodeLockDir = "/run/podrun"

// NodeBusyError is a node name another podrun watch of this machine runs
// as, on another root dir (the root dir's lock refuses one on the same).
type NodeBusyError struct{ NodeName, Lock string }

func (e *NodeBusyError) Error() string {
	return fmt.Sprintf("node %s: another podrun watch runs as it on this machine (it holds %s): "+
		"two would remove each other's pods (each removes the node's pods its sources do not define); "+
		"give this one a --node-name of its own", e.NodeName, e.Lock)
}

// LockNodeName takes nodeName for one watch of the machine until unlock,
// as LockRootDir takes a root dir: a watch lists and removes every pod
// labelled with its node name, so two watches of one node name fight
// whatever their root dirs (a trial watch with --root-dir /tmp/x and the
// default node name, the hostname, would remove every pod of the box's
// own watch). The lock is lockDir/watch-<node name>.lock; lockDir is made
// (0700) when missing. A second watch gets a *NodeBusyError at once.
func LockNodeName(lockDir, nodeName string) (unlock func(), err error) {
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("node %s: lock dir: %w", nodeName, err)
	}
	// Escaped: a node name is any lower-case string, "/" included.
	path := filepath.Join(lockDir, "watch-"+url.PathEscape(nodeName)+".lock")
	for {
		fd, err := flockFile(path)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &NodeBusyError{NodeName: nodeName, Lock: path}
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", nodeName, err)
		}
		// The watch that held it removes the file as it ends (lockDir is
		// the machine's, not to be littered by every node name that ever
		// ran): a lock taken on the file it removed locks nothing.
		if !isFileAt(fd, path) {
			unix.Close(fd)
			continue
		}
		return func() {
			os.Remove(path) // while locked: no other watch holds it
			unix.Close(fd)
		}, nil
	}
}

// isFileAt reports whether the open file fd is still the file at path.
func isFileAt(fd int, path string) bool {
	var open, named unix.Stat_t
	if unix.Fstat(fd, &open) != nil || unix.Lstat(path, &named) != nil {
		return false
	}
	return open.Dev == named.Dev && open.Ino == named.Ino
}

// flockFile opens path (made when missing) and takes an exclusive flock of
// it, held until the descriptor returned is closed, or fails at once with
// unix.EWOULDBLOCK when another holds it.
func flockFile(path string) (fd int, err error) {
	fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("lock %s: %w", path, err)
	}
	return fd, nil
}
