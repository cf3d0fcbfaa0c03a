package runner

import (
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// spec.activeDeadlineSeconds, as the kubelet's activeDeadlineHandler: a pod
// active on the node (since its status.startTime) for longer than its
// deadline has all its containers killed and is Failed, with this reason and
// message, until its manifest is edited (then it is a new pod, as an
// evicted one).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
	reasonDeadlineKill      = "pod was active longer than its activeDeadlineSeconds"
)

// podStartTime is the pod's status.startTime: the one already reported,
// else (podrun restarted) its oldest sandbox's creation, else now (the pod
// is being brought up by this sync).
func podStartTime(prev *v1.PodStatus, state *podState, now time.Time) time.Time {
	switch {
	case prev != nil && prev.StartTime != nil:
		return prev.StartTime.Time
	case len(state.Sandboxes) > 0:
		return state.Sandboxes[len(state.Sandboxes)-1].CreatedAt
	default:
		return now
	}
}

// activeDeadline reports whether the pod is past its activeDeadlineSeconds
// at now, having started at start, and, when it is not, how long until it
// is (0: it has no deadline). prev is the status last reported: a pod that
// was reported past its deadline stays so (the kubelet never syncs a
// terminal pod again), and one that finished on its own (Succeeded, or
// Failed for another reason) before its deadline is left as it is.
func activeDeadline(pod *v1.Pod, prev *v1.PodStatus, start, now time.Time) (exceeded bool, left time.Duration) {
	if prev != nil && prev.Phase == v1.PodFailed && prev.Reason == ReasonDeadlineExceeded {
		return true, 0
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || start.IsZero() {
		return false, 0
	}
	if prev != nil && (prev.Phase == v1.PodSucceeded || prev.Phase == v1.PodFailed) {
		return false, 0
	}
	allowed := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	active := now.Sub(start)
	if active >= allowed {
		return true, 0
	}
	return false, allowed - active
}

// deadlineKey identifies the pod as its deadline judges it: what it runs
// (specKey) and the deadline itself, so that an edit of the deadline alone
// (more time) is an edit too.
func deadlineKey(pod *v1.Pod) string {
	d := "none"
	if pod.Spec.ActiveDeadlineSeconds != nil {
		d = strconv.FormatInt(*pod.Spec.ActiveDeadlineSeconds, 10)
	}
	return specKey(pod) + ",deadline=" + d
}

// passedDeadline records that pod, as it is now, passed its deadline: it
// stays Failed until it is edited (renewedBy). It reports whether that is
// news: the Failed status waits for the pod's containers to stop
// (holdTerminalPhase), and the syncs meanwhile see it past its deadline
// again.
func (w *podWorker) passedDeadline(pod *v1.Pod) bool {
	key := deadlineKey(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	news := w.deadlineSpec != key
	w.deadlineSpec = key
	return news
}

// renewedBy reports whether pod is an edit of the pod the node stopped
// for good, prev being its last status: evicted (evictedMessage saw the
// edit), or past its deadline with another spec or deadline than the
// one that passed it. As an evicted pod, one past its deadline runs again only when its
// manifest is edited; a re-sent manifest (a rescan) changes nothing.
func (w *podWorker) renewedBy(pod *v1.Pod, prev *v1.PodStatus) bool {
	key := deadlineKey(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	renewed := w.renewed
	if prev != nil && prev.Phase == v1.PodFailed && prev.Reason == ReasonDeadlineExceeded &&
		w.deadlineSpec != "" && w.deadlineSpec != key {
		renewed = true
	}
	if renewed {
		w.renewed, w.deadlineSpec = false, ""
	}
	return renewed
}

// deadlinePassed reports whether the pod, known by its runtime state
// alone (no status reported: `podrun plan`), is past its deadline at now,
// counted from its oldest sandbox.
func deadlinePassed(pod *v1.Pod, st *podState, now time.Time) bool {
	exceeded, _ := activeDeadline(pod, nil, podStartTime(nil, st, now), now)
	return exceeded
}

// deadlineActions is what a sync does for a pod past its deadline: stop
// everything of it that runs (as killPod does: app containers, then
// sidecars, then sandboxes), remove containers that were made but never
// started (a start a killed podrun sent must not run them later), and
// start nothing. Once nothing runs, it is empty: the pod stays as it is.
func deadlineActions(state *podState) *podActions {
	a := &podActions{DeadlineExceeded: true, KillReason: reasonDeadlineKill}
	for _, c := range state.Containers {
		switch c.State {
		case engine.StateRunning:
			a.KillPod = true
		case engine.StateCreated:
			a.Remove = append(a.Remove, c)
		}
	}
	for _, sb := range state.Sandboxes {
		if sb.State == engine.StateRunning || sb.State == engine.StateUnknown {
			a.KillPod = true
		}
	}
	return a
}
