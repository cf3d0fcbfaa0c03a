package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/manifest"
)

// ReasonNameConflict is the status reason of a pod refused because
// another pod of its namespace/name, of another UID, is on the node.
const ReasonNameConflict = "NameConflict"

// A node has one pod of a namespace/name, as a cluster has. Within the
// sources the first definition wins (manifest.Claim); this is the rule
// for a pod already on the node: one an earlier `once` started from
// another manifest path (a pod's UID comes from its path), or one left by
// a source watch no longer reads. A new pod - one with no sandbox yet -
// whose namespace/name another UID's objects carry is refused
// (NameConflict) while that pod is kept, and starts only once it is gone:
// a running pod is never replaced by a namesake from elsewhere, and never
// are two pods of one name on the node at once.
//
// Whether the other pod is kept is decided as for the orphans of a UID
// (orphansOfUID): once keeps it; watch removes it once every source has
// delivered, unless a source kept while it fails may define it. A pod of
// the same source as the new one, whatever the command, is the one an
// edit of its manifest's metadata.uid replaced: removed, as an edit that
// changes a pod's sandbox replaces the pod.

// namesakes returns the states of states, but uid's, with an object
// labelled as pod namespace/name. They are states' own, not copies.
func namesakes(states map[string]*podState, uid, namespace, name string) map[string]*podState {
	var out map[string]*podState
	for id, st := range states {
		if id != uid && namedAs(st, namespace, name) {
			if out == nil {
				out = map[string]*podState{}
			}
			out[id] = st
		}
	}
	return out
}

// namedAs reports whether an object of st is labelled as pod
// namespace/name.
func namedAs(st *podState, namespace, name string) bool {
	if st == nil {
		return false
	}
	is := func(ref engine.PodRef) bool { return ref.Namespace == namespace && ref.Name == name }
	return slices.ContainsFunc(st.Sandboxes, func(sb *engine.Sandbox) bool { return is(sb.Pod) }) ||
		slices.ContainsFunc(st.Containers, func(c *engine.Container) bool { return is(c.Pod) })
}

// sourceOf is the source the newest sandbox of st recorded ("" when
// none did).
func sourceOf(st *podState) string {
	if sb := st.latestSandbox(); sb != nil {
		return sb.Source
	}
	return ""
}

// sameSource reports whether st, a pod of pod's name, is of pod's own
// source: the pod before an edit of its manifest's metadata.uid.
func sameSource(pod *v1.Pod, st *podState) bool {
	src := sourceOf(st)
	return src != "" && src == pod.Annotations[annotationSource]
}

// nameConflict is why pod is refused: holder, the pod of uid, has its
// namespace/name on the node. It says where holder came from and how to
// remove it, so that the refused pod can start.
func nameConflict(pod *v1.Pod, uid string, holder *podState) *rejection {
	from, remedy := "its source is not recorded", "podrun down --all removes it, with every other pod of the node"
	if src := manifest.RedactedSource(sourceOf(holder)); src != "" {
		from, remedy = "from "+src, "podrun down "+src+" removes it"
	}
	this := ""
	if src := pod.Annotations[annotationSource]; src != "" {
		this = " from " + manifest.RedactedSource(src)
	}
	return &rejection{reason: ReasonNameConflict, message: fmt.Sprintf(
		"pod %s is already on this node, uid %s (%s): a node runs one pod of a name, so this one (uid %s%s) does not start until that one is gone; %s",
		podKey(pod), uid, from, pod.UID, this, remedy)}
}

// namesakeVerdict decides what becomes of holder, the objects of the pod
// uid, which has pod's namespace/name.
func (r *Runner) namesakeVerdict(pod *v1.Pod, uid string, holder *podState) orphansVerdict {
	r.mu.Lock()
	w, removing := r.workers[uid], r.removing[uid]
	r.mu.Unlock()
	switch {
	case w != nil:
		if _, removed := w.desired(); removed {
			return orphansUndecided // being torn down: wait for it
		}
		// A pod this runner runs: sources never give two of one name
		// (manifest.Claim), and the one there keeps it.
		return orphansKept
	case removing:
		return orphansUndecided // housekeeping is removing it
	case sameSource(pod, holder):
		return orphansRemoved
	}
	return r.orphansOfUID(holder)
}

// errNamesakeBusy says that a namesake is being removed by someone else.
var errNamesakeBusy = errors.New("being removed")

// admitName applies the rule above to pod, which has no sandbox: a
// rejection while another pod of its name is kept, an error (retried)
// while that pod is being removed or its fate is undecided. A namesake to
// remove is removed first, as housekeeping would remove it.
func (w *podWorker) admitName(ctx context.Context, pod *v1.Pod) (*rejection, error) {
	r := w.r
	found, err := r.cache.namesakes(ctx, w.uid, pod.Namespace, pod.Name)
	if err != nil {
		return nil, err
	}
	for _, uid := range slices.Sorted(maps.Keys(found)) {
		// As it is now: the relist may be older than its removal.
		holder, err := r.cache.refresh(ctx, uid)
		if err != nil {
			return nil, err
		}
		if !namedAs(holder, pod.Namespace, pod.Name) {
			continue
		}
		why := nameConflict(pod, uid, holder)
		switch r.namesakeVerdict(pod, uid, holder) {
		case orphansKept:
			return why, nil
		case orphansUndecided:
			w.noteWait("name "+uid, "pod waits: another pod of its name is on the node, and its fate is not decided yet",
				"pod", podKey(pod), "uid", pod.UID, "other", uid)
			r.waitForNamesake(w.uid, uid)
			return nil, fmt.Errorf("%s (deciding once every source has delivered and it is removed)", why.message)
		}
		if err := r.removeNamesake(ctx, pod, uid, holder); err != nil {
			return nil, fmt.Errorf("%s: removing it: %w", why.message, err)
		}
	}
	return nil, nil
}

// removeNamesake removes holder, the objects of uid, a pod of pod's
// name that no source defines, as housekeeping removes such a pod (pod
// directory and all), unless housekeeping already does.
func (r *Runner) removeNamesake(ctx context.Context, pod *v1.Pod, uid string, holder *podState) error {
	r.mu.Lock()
	if r.removing[uid] || r.workers[uid] != nil {
		r.mu.Unlock()
		return errNamesakeBusy
	}
	r.removing[uid] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.removing, uid)
		r.mu.Unlock()
	}()
	r.log.Info("removing pod no source defines before its namesake starts",
		"pod", podKey(pod), "uid", uid, "source", manifest.RedactedSource(sourceOf(holder)), "new", pod.UID)
	err := r.removeUnsourced(ctx, holder)
	// Housekeeping must not see it as an orphan to remove again.
	if _, rerr := r.cache.refresh(ctx, uid); rerr != nil && err == nil {
		err = fmt.Errorf("look at it after its removal: %w", rerr)
	}
	return err
}

// namesakes returns copies of the states of the pods, but uid's, with
// an object labelled as pod namespace/name: from the last relist, or
// before there was one (a podrun just started), from one list of the
// node made for every pod that asks until then.
func (c *podCache) namesakes(ctx context.Context, uid, namespace, name string) (map[string]*podState, error) {
	c.mu.Lock()
	pods := c.pods
	if c.listedAt.IsZero() {
		c.mu.Unlock()
		var err error
		if pods, err = c.startView.get(ctx, c); err != nil {
			return nil, err
		}
		c.mu.Lock()
	} else {
		c.startView.forget()
	}
	defer c.mu.Unlock()
	out := namesakes(pods, uid, namespace, name)
	for id, st := range out {
		out[id] = st.clone()
	}
	return out, nil
}

// startView is the node's pods as one list saw them, made when first
// asked for (again when that failed) and then kept: the pods' name checks
// of a podrun just started, whose first relist is up to a period away,
// cost one list of the node, not one each, and do not move the relists.
type startView struct {
	mu     sync.Mutex
	pods   map[string]*podState
	listed bool
}

func (v *startView) get(ctx context.Context, c *podCache) (map[string]*podState, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.listed {
		pods, err := c.listAll(ctx)
		if err != nil {
			return nil, err
		}
		v.pods, v.listed = pods, true
	}
	return v.pods, nil
}

// forget drops the view once relists have taken over.
func (v *startView) forget() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pods = nil
	v.listed = true
}

// wakeNameConflictsLocked wakes the workers of the pods refused their
// name (r.mu held): a pod that held it may be gone.
func (r *Runner) wakeNameConflictsLocked() {
	for uid, p := range r.status {
		if w := r.workers[uid]; w != nil && p.Status.Reason == ReasonNameConflict {
			w.wake(0)
		}
	}
}

// waitForNamesake records that the pod waiter waits for the removal of
// holder, a pod of its name: the waiter's worker, backing off after the
// refusal (up to 10 s), is woken the moment the holder's own worker has
// removed it (a renamed manifest's pod starts once the old one is gone,
// not up to a back-off later).
func (r *Runner) waitForNamesake(waiter, holder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.namesakeWaiters[waiter] = holder
}

// wakeNamesakeWaitersLocked wakes, at once, the pods that wait for the
// removal of holder, which is over (r.mu held).
func (r *Runner) wakeNamesakeWaitersLocked(holder string) {
	for waiter, h := range r.namesakeWaiters {
		if h != holder {
			continue
		}
		delete(r.namesakeWaiters, waiter)
		if w := r.workers[waiter]; w != nil {
			w.wakeNow()
		}
	}
}
