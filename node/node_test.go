package node

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestGather(t *testing.T) {
	dir := t.TempDir()
	f, err := Gather(map[string]string{"root-dir": filepath.Join(dir, "not", "made", "yet"), "images": dir})
	if err != nil {
		t.Logf("partial facts: %v", err)
	}
	if f.CPUs <= 0 || f.MemoryBytes == 0 || f.KernelVersion == "" || f.Architecture == "" {
		t.Errorf("facts: %+v", f)
	}
	if len(f.Filesystems) != 2 || f.Filesystems[0].Use != "images" || f.Filesystems[1].Use != "root-dir" {
		t.Fatalf("filesystems: %+v", f.Filesystems)
	}
	for _, fs := range f.Filesystems {
		if fs.CapacityBytes == 0 || fs.AvailableBytes > fs.CapacityBytes {
			t.Errorf("filesystem %+v", fs)
		}
	}
}

func TestDiskAdmitter(t *testing.T) {
	free := map[string]uint64{"/root": 500 << 20, "/docker": 50 << 20}
	d := &DiskAdmitter{Paths: []string{"/root", "/docker", "/broken"}, MinFreeBytes: 100 << 20,
		Measure: func(p string) (Filesystem, error) {
			if p == "/broken" {
				return Filesystem{}, errors.New("statfs failed")
			}
			return Filesystem{Path: p, CapacityBytes: 1 << 30, AvailableBytes: free[p]}, nil
		}}
	err := d.Admit(&v1.Pod{})
	var ae *AdmitError
	if !errors.As(err, &ae) || ae.AdmitReason() != ReasonOutOfDisk || !strings.Contains(err.Error(), "/docker has 50 MiB") {
		t.Errorf("short of space: %v", err)
	}
	free["/docker"] = 200 << 20
	if err := d.Admit(&v1.Pod{}); err != nil {
		t.Errorf("with room: %v", err)
	}
	// No threshold: never refused.
	if err := (&DiskAdmitter{Paths: []string{"/"}}).Admit(&v1.Pod{}); err != nil {
		t.Errorf("without a threshold: %v", err)
	}
	// The real filesystem, with an impossible threshold.
	if err := (&DiskAdmitter{Paths: []string{t.TempDir()}, MinFreeBytes: 1 << 62}).Admit(&v1.Pod{}); err == nil {
		t.Error("an impossible threshold admits")
	}
}

// TestLocalHost: the pods' view of the machine is the facts' (one place).
func TestLocalHost(t *testing.T) {
	h := LocalHost()
	f, _ := Gather(nil)
	if h.IP == "" || h.MilliCPU != int64(f.CPUs)*1000 || h.MemoryBytes != int64(f.MemoryBytes) || h.MemoryBytes == 0 {
		t.Errorf("host %+v, facts: %d CPUs, %d bytes", h, f.CPUs, f.MemoryBytes)
	}
}
