package node

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// fakeOOMFile is a process's oom_score_adj; without privilege it may not
// go below min (the kernel's oom_score_adj_min).
type fakeOOMFile struct {
	score, min int
	privileged bool
	readErr    error
	writes     []int
}

func (f *fakeOOMFile) Read() (int, error) { return f.score, f.readErr }

func (f *fakeOOMFile) Write(score int) error {
	f.writes = append(f.writes, score)
	if score < f.min && !f.privileged {
		return fmt.Errorf("write /proc/self/oom_score_adj: %w", fs.ErrPermission)
	}
	f.score = score
	return nil
}

func TestProbeOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		name   string
		file   fakeOOMFile
		keep   bool
		want   OOMProtection
		floor  *int
		after  int
		reason bool
	}{
		{name: "privileged, keep", file: fakeOOMFile{privileged: true}, keep: true,
			want: OOMProtection{CanLower: true, Own: -999}, after: -999},
		{name: "privileged, put back", file: fakeOOMFile{score: 10, privileged: true},
			want: OOMProtection{CanLower: true, Own: 10}, after: 10},
		{name: "unprivileged", file: fakeOOMFile{score: 0}, keep: true,
			want: OOMProtection{Own: 0}, floor: ptr(0), after: 0, reason: true},
		{name: "unprivileged, started high", file: fakeOOMFile{score: 300, min: 300}, keep: true,
			want: OOMProtection{Own: 300}, floor: ptr(300), after: 300, reason: true},
		{name: "already protected", file: fakeOOMFile{score: -1000, min: -1000}, keep: true,
			want: OOMProtection{CanLower: true, Own: -1000}, after: -1000},
		{name: "unreadable", file: fakeOOMFile{readErr: errors.New("no /proc")}, keep: true,
			want: OOMProtection{}, floor: ptr(0), reason: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.file
			got := ProbeOOMScoreAdj(&f, -999, tc.keep)
			if (got.Reason != "") != tc.reason {
				t.Errorf("reason %q", got.Reason)
			}
			got.Reason = ""
			if got != tc.want {
				t.Errorf("probe = %+v, want %+v", got, tc.want)
			}
			if f.score != tc.after {
				t.Errorf("score after the probe %d, want %d (writes %v)", f.score, tc.after, f.writes)
			}
			floor := got.Floor()
			if (floor == nil) != (tc.floor == nil) || (floor != nil && *floor != *tc.floor) {
				t.Errorf("floor %v, want %v", deref(floor), deref(tc.floor))
			}
		})
	}
}

// TestProbeOOMScoreAdjSelf probes this process, putting its score back:
// whatever the machine allows, the score is unchanged, and a probe that
// says it may lower is right.
func TestProbeOOMScoreAdjSelf(t *testing.T) {
	self := SelfOOMScoreFile()
	before, err := self.Read()
	if err != nil {
		t.Fatal(err)
	}
	p := ProbeOOMScoreAdj(self, -999, false)
	after, err := self.Read()
	if err != nil {
		t.Fatal(err)
	}
	if after != before || p.Own != before {
		t.Errorf("score %d before, %d after, probe says own %d", before, after, p.Own)
	}
	t.Logf("probe: %+v", p)
	if !p.CanLower && p.Reason == "" {
		t.Error("no reason given")
	}
}

func ptr(i int) *int { return &i }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
