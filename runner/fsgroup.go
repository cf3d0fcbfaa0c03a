package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Group permission bits the kubelet's SetVolumeOwnership adds under an
// fsGroup: read and write for the group on a writable volume, read on a
// read-only one, and search plus setgid on directories, so that what the
// containers create inherits the group.
const (
	fsGroupWritable = 0o660
	fsGroupReadOnly = 0o440
	fsGroupDirBits  = 0o110 | os.ModeSetgid
)

// podFSGroup is the pod's fsGroup and change policy, or ok false without
// one.
func podFSGroup(pod *v1.Pod) (gid int, policy v1.PodFSGroupChangePolicy, ok bool) {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return 0, "", false
	}
	policy = v1.FSGroupChangeAlways
	if sc.FSGroupChangePolicy != nil {
		policy = *sc.FSGroupChangePolicy
	}
	return int(*sc.FSGroup), policy, true
}

// applyFSGroup gives everything in the volume vr to group gid with the
// group's permission bits, as the kubelet does for the volumes that manage
// ownership (emptyDir, configMap, secret, downwardAPI, projected). Under
// OnRootMismatch nothing is walked when the volume's top directory already
// has the group, setgid and the bits. The walk (walkVolume) never leaves
// the volume and follows no symlink (a symlink is re-owned itself, not what
// it points to); a tree nested deeper than it walks is an error.
func applyFSGroup(vr *os.Root, gid int, policy v1.PodFSGroupChangePolicy, readOnly bool) error {
	mask := os.FileMode(fsGroupWritable)
	if readOnly {
		mask = fsGroupReadOnly
	}
	if policy == v1.FSGroupChangeOnRootMismatch {
		if fi, err := vr.Lstat("."); err == nil && ownedBy(fi, gid) &&
			fi.Mode()&os.ModeSetgid != 0 && fi.Mode().Perm()&mask.Perm() == mask.Perm() {
			return nil
		}
	}
	return walkVolume(vr, func(e walkEntry) error {
		if err := lchownAt(e.dir, e.name, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fsGroup %d: chown %s: %w", gid, e.p, err)
		}
		if e.fi.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		want := e.fi.Mode() | mask
		if e.fi.IsDir() {
			want |= fsGroupDirBits
		}
		if want == e.fi.Mode() {
			return nil
		}
		if err := chmodSameAt(e.dir, e.name, e.fi, want&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fsGroup %d: chmod %s: %w", gid, e.p, err)
		}
		return nil
	})
}

func ownedBy(fi fs.FileInfo, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Gid) == gid
}
