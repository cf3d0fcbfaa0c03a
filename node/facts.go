// Package node describes the machine podrun runs on: its facts (cores,
// memory, identity, kernel, the filesystems podrun writes to), as a node's
// status reports them, and whether it has the disk space to start pods.
package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	cadvisorfs "github.com/google/cadvisor/lib/fs"
	"github.com/google/cadvisor/lib/machine"
	"github.com/google/cadvisor/lib/utils/sysfs"
	"golang.org/x/sys/unix"
)

// Facts are what a node's status says of the machine (NodeSystemInfo and
// capacity), gathered with cAdvisor's machine package, as the kubelet does.
type Facts struct {
	Hostname      string       `json:"hostname"`
	MachineID     string       `json:"machineID"`
	SystemUUID    string       `json:"systemUUID"`
	BootID        string       `json:"bootID"`
	KernelVersion string       `json:"kernelVersion"`
	OSImage       string       `json:"osImage"`
	Architecture  string       `json:"architecture"`
	CPUs          int          `json:"cpus"`
	MemoryBytes   uint64       `json:"memoryBytes"`
	Filesystems   []Filesystem `json:"filesystems"`
	// OOMScoreAdj says whether podrun may lower oom_score_adj (set by
	// `podrun info`, which probes it; Gather does not).
	OOMScoreAdj *OOMProtection `json:"oomScoreAdj,omitempty"`
}

// Filesystem is one filesystem podrun writes to, measured where it is used.
type Filesystem struct {
	// Use says what podrun keeps there ("root-dir", "images").
	Use            string `json:"use"`
	Path           string `json:"path"`
	Device         string `json:"device,omitempty"`
	CapacityBytes  uint64 `json:"capacityBytes"`
	AvailableBytes uint64 `json:"availableBytes"`
}

// UsedPercent is the share not available, as the kubelet counts it.
func (f Filesystem) UsedPercent() int {
	if f.CapacityBytes == 0 {
		return 0
	}
	return int((f.CapacityBytes - min(f.AvailableBytes, f.CapacityBytes)) * 100 / f.CapacityBytes)
}

// Gather reads the machine's facts, and measures the filesystem of each
// path in paths (use -> path). A path that does not exist yet is measured
// where it would be made. What cannot be read is left empty; the error says
// what, but the rest is returned.
func Gather(paths map[string]string) (*Facts, error) {
	var errs []error
	f := &Facts{Architecture: runtime.GOARCH}
	f.Hostname, _ = os.Hostname()
	// Cores and memory as LocalHost tells pods of them.
	var err error
	f.CPUs, f.MemoryBytes, err = capacity()
	if err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	fsInfo, err := cadvisorfs.NewFsInfo(cadvisorfs.Context{})
	if err != nil {
		errs = append(errs, fmt.Errorf("filesystems: %w", err))
	}
	if fsInfo != nil {
		info, err := machine.Info(sysfs.NewRealSysFs(), fsInfo, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("machine info: %w", err))
		} else {
			f.MachineID, f.SystemUUID, f.BootID = info.MachineID, info.SystemUUID, info.BootID
		}
	}
	f.KernelVersion = machine.KernelVersion()
	f.OSImage = machine.ContainerOsVersion()
	for _, use := range sortedKeys(paths) {
		fs, err := Measure(paths[use])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs.Use = use
		if fsInfo != nil {
			if dev, err := fsInfo.GetDirFsDevice(existing(fs.Path)); err == nil {
				fs.Device = dev.Device
			}
		}
		f.Filesystems = append(f.Filesystems, fs)
	}
	return f, errors.Join(errs...)
}

// Measure statfs-es the filesystem holding path (or, for a path not made
// yet, its nearest existing parent).
func Measure(path string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(existing(path), &st); err != nil {
		return Filesystem{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return Filesystem{Path: path, CapacityBytes: st.Blocks * bs, AvailableBytes: st.Bavail * bs}, nil
}

// existing is path or its nearest existing parent.
func existing(path string) string {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
