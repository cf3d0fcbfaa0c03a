package node

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// OOMScoreFile is one process's oom_score_adj (/proc/<pid>/oom_score_adj).
type OOMScoreFile interface {
	Read() (int, error)
	// Write sets the score; lowering it below what the process was given
	// needs CAP_SYS_RESOURCE (in the initial user namespace), else it fails
	// with a permission error.
	Write(score int) error
}

// SelfOOMScoreFile is podrun's own oom_score_adj.
func SelfOOMScoreFile() OOMScoreFile { return procOOMScoreFile("/proc/self/oom_score_adj") }

type procOOMScoreFile string

func (p procOOMScoreFile) Read() (int, error) {
	b, err := os.ReadFile(string(p))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return n, nil
}

func (p procOOMScoreFile) Write(score int) error {
	// O_WRONLY without O_TRUNC or O_CREATE: a proc file.
	f, err := os.OpenFile(string(p), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(score))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// OOMProtection says whether podrun may give processes a lower
// oom_score_adj than its own: the kubelet's -997 for Guaranteed and
// node-critical containers and -998 for sandboxes need it.
type OOMProtection struct {
	// CanLower: podrun may set every score the kubelet gives.
	CanLower bool `json:"canLower"`
	// Own is podrun's own oom_score_adj after the probe.
	Own int `json:"own"`
	// Reason says why podrun may not lower scores ("" when it may).
	Reason string `json:"reason,omitempty"`
}

// Floor is the lowest oom_score_adj podrun may give a container: nil when
// it may give any, else its own score (what runc, started by a Docker of
// the same privileges, may go down to; containerd's restrict_oom_score_adj
// takes the same floor).
func (p OOMProtection) Floor() *int {
	if p.CanLower {
		return nil
	}
	f := p.Own
	return &f
}

// ProbeOOMScoreAdj finds out whether the process of f may lower its
// oom_score_adj, by trying: it writes target (the kubelet's -999 for
// itself) and reads what it got. This answers what the kernel allows (a
// CAP_SYS_RESOURCE that a user namespace grants does not count), which
// the capability bits of /proc/self/status would not. With keep, a score
// that could be lowered stays lowered (podrun protects itself from the
// OOM killer as the kubelet does); without, the old score is put back
// (raising one's score is always allowed). A score already at target or
// below needs no lowering. The probe never fails: what cannot be read or
// written is an OOMProtection that may not lower, with the reason.
func ProbeOOMScoreAdj(f OOMScoreFile, target int, keep bool) OOMProtection {
	cur, err := f.Read()
	if err != nil {
		// Unknown: 0 is what Docker gives a container by default.
		return OOMProtection{Reason: fmt.Sprintf("cannot read oom_score_adj: %v", err)}
	}
	if cur <= target {
		return OOMProtection{CanLower: true, Own: cur}
	}
	if err := f.Write(target); err != nil {
		reason := fmt.Sprintf("cannot lower oom_score_adj from %d to %d: %v", cur, target, err)
		if errors.Is(err, os.ErrPermission) {
			reason = fmt.Sprintf("cannot lower oom_score_adj below its own %d (no CAP_SYS_RESOURCE)", cur)
		}
		return OOMProtection{Own: cur, Reason: reason}
	}
	if got, err := f.Read(); err != nil || got != target {
		if err != nil {
			got = cur
		}
		return OOMProtection{Own: got, Reason: fmt.Sprintf("oom_score_adj is %d after setting %d (%v)", got, target, err)}
	}
	if !keep {
		if err := f.Write(cur); err == nil {
			return OOMProtection{CanLower: true, Own: cur}
		}
	}
	return OOMProtection{CanLower: true, Own: target}
}
