package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ReasonOutOfDisk is the waiting reason of the containers of a pod refused
// for want of disk space, as the kubelet's admission called it.
const ReasonOutOfDisk = "OutOfDisk"

// DiskAdmitter refuses to start new pods while a filesystem podrun writes to
// (its root dir, Docker's data root) has less than MinFreeBytes available,
// as the kubelet's --low-disk-space-threshold-mb did. Running pods are not
// its concern: it is asked only before a pod's sandbox is made.
type DiskAdmitter struct {
	// Paths are the directories whose filesystems must have room.
	Paths        []string
	MinFreeBytes uint64
	// Measure measures a path's filesystem; nil is Measure (a statfs,
	// cheap enough to make at every sandbox creation).
	Measure func(path string) (Filesystem, error)
}

// AdmitError is why a pod may not start now: its Reason (OutOfDisk) is what
// the sync core shows as the waiting reason of the pod's containers
// (runner.AdmitReason finds it by its AdmitReason method).
type AdmitError struct {
	Reason  string
	Message string
}

func (e *AdmitError) Error() string       { return e.Reason + ": " + e.Message }
func (e *AdmitError) AdmitReason() string { return e.Reason }

// Admit returns an *AdmitError with reason OutOfDisk when a
// filesystem is short of space; nil otherwise (and when it cannot be
// measured: a failing statfs does not stop pods).
func (d *DiskAdmitter) Admit(pod *v1.Pod) error {
	if d.MinFreeBytes == 0 {
		return nil
	}
	measure := d.Measure
	if measure == nil {
		measure = Measure
	}
	for _, p := range d.Paths {
		fs, err := measure(p)
		if err != nil {
			continue
		}
		if fs.AvailableBytes < d.MinFreeBytes {
			return &AdmitError{Reason: ReasonOutOfDisk, Message: fmt.Sprintf(
				"the filesystem of %s has %d MiB available, under the %d MiB needed to start pods (--low-disk-space-threshold-mb)",
				p, fs.AvailableBytes>>20, d.MinFreeBytes>>20)}
		}
	}
	return nil
}
