package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ReasonUIDConflict is the status reason of a pod refused because the
// runtime's objects of its UID are another pod's.
const ReasonUIDConflict = "UIDConflict"

// uidConflict is why pod is refused its UID, or nil: a manifest may set
// any metadata.uid, and static pod UIDs are predictable, so the runtime's
// objects of the UID may be labelled as another pod's (another
// namespace/name). A sync must neither adopt, replace nor stop them, nor
// use the UID's pod directory, which that pod's volumes live in. own are
// the pod's own objects of st.
func uidConflict(pod *v1.Pod, st *podState) (own *podState, why *rejection) {
	own, others := splitByPod(pod, st)
	if len(others) == 0 {
		return own, nil
	}
	return own, &rejection{reason: ReasonUIDConflict, message: fmt.Sprintf(
		"metadata.uid %s is pod %s's: refusing to adopt its sandbox, containers and pod directory (a manifest's uid must be its own)",
		pod.UID, strings.Join(others, ", "))}
}

// syncUIDConflict is the sync of a pod refused its UID: Failed, with the
// reason and message, as a pod refused admission. Its own objects, if any,
// are stopped (a refused pod runs nothing); the other pods' are not
// touched, nor is the pod directory. It is asked again at every sync: once
// the other pod's objects are gone, the pod starts.
func (w *podWorker) syncUIDConflict(ctx context.Context, pod *v1.Pod, own *podState, why *rejection) (*podActions, bool, error) {
	r := w.r
	if prev := r.previousStatus(w.uid); prev == nil || prev.Reason != why.reason || prev.Message != why.message {
		r.log.Warn("pod rejected", "pod", podKey(pod), "reason", why.reason, "message", why.message)
		r.event(pod, "", v1.EventTypeWarning, why.reason, "%s", why.message)
	}
	return w.stopAsFailed(ctx, pod, own, gracePeriod(pod), "pod refused: "+why.reason,
		v1.PodStatus{Phase: v1.PodFailed, Reason: why.reason, Message: why.message})
}

// teardownOwn is the teardown of a removed pod: own are its objects, and
// others the pods the rest of its UID's objects are labelled as
// (splitByPod). With others, its own objects alone are removed; the rest
// keep the UID's pod directory and cgroup, which they use (a pod refused
// its UID, then removed, must not take the UID's owner with it).
func (r *Runner) teardownOwn(ctx context.Context, pod *v1.Pod, own *podState, others []string, grace time.Duration) error {
	if len(others) == 0 {
		return r.teardown(ctx, pod, own, grace)
	}
	r.probes.RemovePod(string(pod.UID))
	r.log.Info("removing the pod's own objects alone: its uid's others and pod directory are another pod's",
		"pod", podKey(pod), "uid", pod.UID, "owners", others)
	return r.removePodObjects(ctx, pod, own, grace)
}
