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
// use the UID's pod directory, which that pod's volumes live in. own and
// others are st split by pod (splitByPod).
func uidConflict(pod *v1.Pod, st *podState) (own, others *podState, why *rejection) {
	own, others = splitByPod(pod, st)
	if others == nil {
		return own, nil, nil
	}
	return own, others, &rejection{reason: ReasonUIDConflict, message: fmt.Sprintf(
		"metadata.uid %s is pod %s's: refusing to adopt its sandbox, containers and pod directory (a manifest's uid must be its own)",
		pod.UID, strings.Join(podNames(others), ", "))}
}

// What becomes of the objects of a pod's UID that are other pods'.
type orphansVerdict int

const (
	// orphansKept: they are another pod's, and the pod is refused.
	orphansKept orphansVerdict = iota
	// orphansUndecided: not every source has delivered yet, so they may
	// be of a pod a source still defines, or of this one before a rename.
	orphansUndecided
	// orphansRemoved: they are of a pod no source defines, removed.
	orphansRemoved
)

// orphansOfUID decides what becomes of others, the objects of a pod's UID
// that are other pods'. In watch, once every source has spoken, no source
// defines the pods they are of (a UID names one pod among the sources'
// pods), so they are what housekeeping removes, kept only by the UID a
// pod now has - most often that pod itself, renamed in a manifest that
// sets metadata.uid. once removes only what it is asked to, and the pods
// of a source kept while it fails are kept.
func (r *Runner) orphansOfUID(others *podState) orphansVerdict {
	if r.cfg.SourcesReady == nil {
		return orphansKept
	}
	if !r.cfg.SourcesReady() {
		return orphansUndecided
	}
	for _, sb := range others.Sandboxes {
		if r.cfg.KeepSource != nil && r.cfg.KeepSource(sb.Source) {
			return orphansKept
		}
	}
	return orphansRemoved
}

// removeOrphansOfUID removes others, the orphans of pod's UID
// (orphansOfUID), as housekeeping removes a pod no source defines:
// with the UID's pod directory and cgroup, so that pod starts afresh and
// never sees their volumes.
func (r *Runner) removeOrphansOfUID(ctx context.Context, pod *v1.Pod, others *podState) error {
	ref := podRefOf(others)
	r.log.Info("removing pod no source defines: its uid is now another pod's",
		"pod", ref.Namespace+"/"+ref.Name, "uid", pod.UID, "now", podKey(pod))
	defer r.cache.invalidate()
	if err := r.removeUnsourced(ctx, others); err != nil {
		return fmt.Errorf("remove %s/%s, whose uid %s is now %s's: %w", ref.Namespace, ref.Name, pod.UID, podKey(pod), err)
	}
	return nil
}

// syncConflict is the sync of a pod refused its UID or its name (another
// pod's, kept): Failed, with the reason and message, as a pod refused
// admission, and a warning the first time. Its own objects, if any, are
// stopped (a refused pod runs nothing); the other pod's are not touched,
// nor is the pod directory. It is asked again at every sync: once the
// other pod's objects are gone, the pod starts.
func (w *podWorker) syncConflict(ctx context.Context, pod *v1.Pod, own *podState, why *rejection) (*podActions, bool, error) {
	r := w.r
	if prev := r.previousStatus(w.uid); prev == nil || prev.Reason != why.reason || prev.Message != why.message {
		r.log.Warn("pod rejected", "pod", podKey(pod), "reason", why.reason, "message", why.message)
		r.event(pod, "", v1.EventTypeWarning, why.reason, "%s", why.message)
	}
	return w.syncRefused(ctx, pod, own, why)
}

// teardownOwn is the teardown of a removed pod: own are its objects, and
// others the pods the rest of its UID's objects are labelled as
// (splitByPod). With others, its own objects alone are removed; the rest
// keep the UID's pod directory and cgroup, which they use (a pod refused
// its UID, then removed, must not take the UID's owner with it).
func (r *Runner) teardownOwn(ctx context.Context, pod *v1.Pod, own, others *podState, grace time.Duration) error {
	if others == nil {
		return r.teardown(ctx, pod, own, grace)
	}
	r.probes.RemovePod(string(pod.UID))
	r.log.Info("removing the pod's own objects alone: its uid's others and pod directory are another pod's",
		"pod", podKey(pod), "uid", pod.UID, "owners", podNames(others))
	return r.removePodObjects(ctx, pod, own, grace)
}

// startAnew forgets what the worker knew of its UID's pod before: after
// the orphans of the UID were removed, or the pod itself was removed and
// then defined again, the pod now there is a new one, whose start time,
// deadline and eviction count from now.
func (w *podWorker) startAnew() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evicted, w.renewed, w.deadlineSpec = nil, true, ""
}
