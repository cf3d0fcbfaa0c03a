package runner

import (
	"errors"
	"math"
	"os"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// EmptyDirUsage measures the disk the pod's emptyDir volumes on disk (not
// medium: Memory) use, by volume name, as du counts it: allocated blocks,
// a hard-linked file once, symlinks not followed. A volume not made yet
// is absent. The walk stays inside each volume (os.Root): a container
// cannot make it measure, or wander, elsewhere.
func (r *Runner) EmptyDirUsage(pod *v1.Pod) map[string]uint64 {
	out := map[string]uint64{}
	d, err := openPodDirs(r.cfg.RootDir, string(pod.UID))
	if err != nil {
		return out
	}
	defer d.Close()
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir == nil || vol.EmptyDir.Medium == v1.StorageMediumMemory || checkName("volume name", vol.Name) != nil {
			continue
		}
		vr, err := d.openDir(false, "volumes", emptyDirPlugin, vol.Name)
		if err != nil {
			continue
		}
		out[vol.Name] = diskUsage(vr)
		vr.Close()
	}
	return out
}

// unmeasuredUsage is what diskUsage says of a tree nested deeper than
// podrun walks (maxWalkDepth): more than any disk holds, so that a volume
// with a sizeLimit is over it. Counting only the levels walked would let a
// container hide what it writes below them from its sizeLimit.
const unmeasuredUsage = math.MaxUint64

// diskUsage is the disk the tree of vr takes, in bytes of allocated
// blocks. Entries that go away or change kind during the walk (a
// container writing) are skipped (walkVolume); a tree too deep to walk is
// unmeasuredUsage.
func diskUsage(vr *os.Root) uint64 {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total uint64
	err := walkVolume(vr, func(e walkEntry) error {
		st, ok := e.fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !e.fi.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += uint64(st.Blocks) * 512
		return nil
	})
	if errors.Is(err, errWalkTooDeep) {
		return unmeasuredUsage
	}
	return total
}
