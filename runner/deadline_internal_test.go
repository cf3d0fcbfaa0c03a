package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
)

func TestActiveDeadline(t *testing.T) {
	sixty := int64(60)
	withDeadline := &v1.Pod{Spec: v1.PodSpec{ActiveDeadlineSeconds: &sixty}}
	none := &v1.Pod{}
	status := func(phase v1.PodPhase, reason string) *v1.PodStatus {
		return &v1.PodStatus{Phase: phase, Reason: reason}
	}
	cases := []struct {
		name     string
		pod      *v1.Pod
		prev     *v1.PodStatus
		active   time.Duration
		exceeded bool
		left     time.Duration
	}{
		{name: "no deadline", pod: none, active: time.Hour},
		{name: "before", pod: withDeadline, active: 45 * time.Second, left: 15 * time.Second},
		{name: "at", pod: withDeadline, active: time.Minute, exceeded: true},
		{name: "after", pod: withDeadline, active: time.Hour, exceeded: true},
		{name: "running", pod: withDeadline, prev: status(v1.PodRunning, ""), active: time.Hour, exceeded: true},
		{name: "succeeded before", pod: withDeadline, prev: status(v1.PodSucceeded, ""), active: time.Hour},
		{name: "failed otherwise before", pod: withDeadline, prev: status(v1.PodFailed, ""), active: time.Hour},
		{name: "exceeded stays, deadline raised", pod: withDeadline, prev: status(v1.PodFailed, ReasonDeadlineExceeded),
			active: time.Second, exceeded: true},
		{name: "exceeded stays, deadline dropped", pod: none, prev: status(v1.PodFailed, ReasonDeadlineExceeded),
			active: time.Second, exceeded: true},
	}
	for _, c := range cases {
		exceeded, left := activeDeadline(c.pod, c.prev, t0, t0.Add(c.active))
		if exceeded != c.exceeded || left != c.left {
			t.Errorf("%s: exceeded %v, left %s; want %v, %s", c.name, exceeded, left, c.exceeded, c.left)
		}
	}
}

// TestPodStartTime: the start a deadline counts from is the status's
// startTime, else (podrun restarted) the oldest sandbox's creation, else
// now; the status reports the same.
func TestPodStartTime(t *testing.T) {
	st := &podState{Sandboxes: []*engine.Sandbox{
		{ID: "new", CreatedAt: t0.Add(time.Hour)}, {ID: "old", CreatedAt: t0},
	}}
	now := t0.Add(2 * time.Hour)
	reported := metav1.NewTime(t0.Add(-time.Minute))
	if got := podStartTime(&v1.PodStatus{StartTime: &reported}, st, now); !got.Equal(reported.Time) {
		t.Errorf("with a reported startTime: %v", got)
	}
	if got := podStartTime(nil, st, now); !got.Equal(t0) {
		t.Errorf("from the sandboxes: %v, want the oldest's %v", got, t0)
	}
	if got := podStartTime(nil, &podState{}, now); !got.Equal(now) {
		t.Errorf("nothing yet: %v, want now", got)
	}
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	s := computePodStatus(statusInput{Pod: pod, State: st, Now: now})
	if s.StartTime == nil || !s.StartTime.Time.Equal(t0) {
		t.Errorf("status startTime %v, want %v", s.StartTime, t0)
	}
}
