package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// portAdmission is the sync core's host-port admission, the kubelet's
// (its admission runs the scheduler's NodePorts predicate against the pods
// it admitted before): a pod that asks for a host port an admitted pod
// holds is refused. Refused, it is Failed with ReasonNodePorts and never
// started, and it holds nothing. It is asked again when its manifest
// changes (the kubelet asks a static pod again then, as a new pod), when
// podrun starts again, and - a static pod, unlike with the kubelet - when
// the pod that held the port is removed or no longer asks for it: so that
// what runs depends on what the sources say, not on the order their
// updates came in (a manifest moved from one --path to another, the new
// one read first). A pod from the apiserver stays refused, as the
// kubelet's: its controller makes another.
//
// Who holds a port:
//   - a pod that already runs as its spec says (its latest sandbox runs,
//     with the spec's sandbox hash, so with these ports) is admitted
//     whatever else asks: a restarted podrun adopts it, never a pod that
//     comes first in the sources but does not run;
//   - then the pods in the order the runner was given them (the sources'
//     priority order at start, and the order of later additions).
//
// The same admission counts extended resources (extended.go): a pod that
// asks for more of one than the pods admitted before it leave is refused
// (Failed, OutOf<name>), by the same order, and asked again likewise
// (when any admitted pod goes or changes: resources, unlike a port, are
// not held by one pod).
//
// Pods without host ports or extended resources are not tracked. A pod's
// claim goes when the pod is removed (not when its teardown ends: a pod
// that moves to another manifest must not be refused its own ports by its
// former self).
type portAdmission struct {
	mu     sync.Mutex
	seq    uint64
	claims map[string]*portClaim // by pod UID
}

type claimState int

const (
	claimUndecided claimState = iota
	claimAdmitted
	claimRefused
)

type portClaim struct {
	seq   uint64 // the order the runner was given the pod in
	pod   *v1.Pod
	ports []HostPort
	// resources are the pod's ExtendedRequests.
	resources map[v1.ResourceName]int64
	state     claimState
	// Why it is refused: a port, or a resource.
	conflict *PortConflict
	shortage *ResourceShortage
}

func newPortAdmission() *portAdmission {
	return &portAdmission{claims: map[string]*portClaim{}}
}

// set records the desired spec of a pod the runner was given. A new pod is
// undecided until its worker asks; so is one refused before (its manifest
// changed), and one admitted whose host ports changed (its new sandbox
// needs them free). It returns the refused pods to ask again (their
// workers are to be woken): those the pod held ports from, when it holds
// them no more.
func (a *portAdmission) set(pod *v1.Pod) []string {
	ports := HostPorts(pod)
	res := ExtendedRequests(pod)
	uid := string(pod.UID)
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.claims[uid]
	switch {
	case len(ports) == 0 && len(res) == 0:
		if c == nil {
			return nil // held nothing
		}
		delete(a.claims, uid)
		return a.released(uid)
	case c == nil:
		a.seq++
		a.claims[uid] = &portClaim{seq: a.seq, pod: pod, ports: ports, resources: res}
		return nil
	case c.state == claimRefused, !samePorts(c.ports, ports), !maps.Equal(c.resources, res):
		c.state, c.conflict, c.shortage = claimUndecided, nil, nil
	}
	c.pod, c.ports, c.resources = pod, ports, res
	if c.state == claimUndecided {
		return a.released(uid)
	}
	return nil
}

// remove forgets a pod that is removed: its ports are free for new pods.
// It returns the refused pods to ask again, as set does.
func (a *portAdmission) remove(uid string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.claims[uid] == nil {
		return nil // held nothing
	}
	delete(a.claims, uid)
	return a.released(uid)
}

// released makes the refused static pods that uid held a port from, and
// those refused a resource (which uid may have held some of), undecided,
// and returns them.
func (a *portAdmission) released(uid string) []string {
	var again []string
	for id, c := range a.claims {
		if c.state != claimRefused || c.pod.Annotations[annotationConfigSource] == configSourceAPI {
			continue
		}
		if c.shortage != nil || string(c.conflict.Holder.UID) == uid {
			c.state, c.conflict, c.shortage = claimUndecided, nil, nil
			again = append(again, id)
		}
	}
	return again
}

// The kind of source a pod came from (kubernetes.io/config.source, as the
// manifest package sets it): a pod of the apiserver is not asked again
// when a port it was refused is freed.
const (
	annotationConfigSource = "kubernetes.io/config.source"
	configSourceAPI        = "api"
)

// samePorts reports whether two pods' host ports are the same ports (not
// necessarily asked for by the same containers).
func samePorts(a, b []HostPort) bool {
	key := func(ps []HostPort) string {
		keys := make([]string, len(ps))
		for i, p := range ps {
			keys[i] = p.String()
		}
		sort.Strings(keys)
		return strings.Join(keys, ",")
	}
	return key(a) == key(b)
}

// admitPod returns why pod (its runtime state st, as its worker just saw
// it) is refused its host ports or an extended resource, or nil when it
// is admitted (or asks for neither). An undecided pod is decided with
// every other undecided one, so that the order of the decisions is the
// rule's, not that of the workers' first syncs; that asks the runtime
// whether each runs. An error (the runtime cannot say) decides nothing: a
// pod that runs must never be refused for want of knowing it.
//
// The runtime is asked with the admission's lock released: a slow answer
// (Docker's runtime list, for GPUs) must hold up neither the pods already
// decided nor the runner's updates, which take the lock too.
func (r *Runner) admitPod(ctx context.Context, pod *v1.Pod, st *podState) (*rejection, error) {
	a := r.ports
	uid := string(pod.UID)
	for {
		a.mu.Lock()
		c := a.claims[uid]
		if c == nil || c.state != claimUndecided {
			var why *rejection
			if c != nil {
				why = c.rejection()
			}
			a.mu.Unlock()
			return why, nil
		}
		undecided := a.undecidedLocked()
		a.mu.Unlock()

		facts, err := r.admissionFacts(ctx, uid, st, undecided)
		if err != nil {
			return nil, err
		}
		a.mu.Lock()
		r.decideLocked(undecided, facts)
		a.mu.Unlock()
		// Decided now, unless its claim was made anew meanwhile (its spec
		// changed): then that one is decided at the next round.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// undecidedLocked returns the undecided claims, in the rule's order.
func (a *portAdmission) undecidedLocked() []*portClaim {
	var out []*portClaim
	for _, c := range a.claims {
		if c.state == claimUndecided {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// admissionFacts is what deciding claims needs of the runtime and the
// runner: the node's extended resources, which claims' pods run already,
// and which pods have finished.
type admissionFacts struct {
	capacity ExtendedCapacity
	running  map[*portClaim]bool
	finished map[string]bool
}

// admissionFacts asks for the facts about the undecided claims; the pod
// uid's own state is st.
func (r *Runner) admissionFacts(ctx context.Context, uid string, st *podState, undecided []*portClaim) (admissionFacts, error) {
	gpus := false
	for _, u := range undecided {
		gpus = gpus || u.resources[ResourceNvidiaGPU] > 0
	}
	capacity, err := r.extendedCapacity(ctx, gpus)
	if err != nil {
		return admissionFacts{}, err
	}
	f := admissionFacts{capacity: capacity, running: make(map[*portClaim]bool, len(undecided))}
	for _, u := range undecided {
		ust := st
		if string(u.pod.UID) != uid {
			if ust, err = r.cache.refresh(ctx, string(u.pod.UID)); err != nil {
				return admissionFacts{}, err
			}
		}
		f.running[u] = runsAsSpecified(u.pod, ust)
	}
	f.finished = r.finishedPods()
	return f, nil
}

// runsAsSpecified reports whether pod, st being its runtime state (nil:
// none), runs as its spec says: its latest sandbox runs, with the spec's
// sandbox hash (so with its host ports). Such a pod keeps what it holds
// (its ports, admitted first) and is not asked admission again
// (nodeRejection).
func runsAsSpecified(pod *v1.Pod, st *podState) bool {
	if st == nil {
		return false
	}
	sb := st.latestSandbox()
	return sb != nil && sb.State == engine.StateRunning && sb.Hash == SandboxHash(pod)
}

// decideLocked decides the claims of undecided, in their order, that are
// still undecided and still their pods' claims: one decided meanwhile
// (by another pod's admission) or made anew (a changed spec) is left as
// it is (decide), and logs and records an event for each it refuses.
func (r *Runner) decideLocked(undecided []*portClaim, f admissionFacts) {
	for _, u := range r.ports.decide(undecided, f) {
		why := u.rejection()
		r.log.Warn("pod rejected", "pod", podKey(u.pod), "reason", why.reason, "message", why.message)
		r.event(u.pod, "", v1.EventTypeWarning, why.reason, "%s", strings.TrimPrefix(why.message, "Pod was rejected: "))
	}
}

// decide decides the claims of undecided that are still undecided and
// still their pods' claims, in their order, and returns those it refuses:
// a claim whose pod runs is admitted first; the others are admitted
// unless a port or resource they ask for is held. The caller holds a.mu
// (or a is its own, as Plan's). This is the whole of the decision, the
// runner's and Plan's.
func (a *portAdmission) decide(undecided []*portClaim, f admissionFacts) (refused []*portClaim) {
	var holders []*v1.Pod
	for id, c := range a.claims {
		if c.state == claimAdmitted && !f.finished[id] {
			holders = append(holders, c.pod)
		}
	}
	var todo []*portClaim
	for _, u := range undecided {
		if a.claims[string(u.pod.UID)] == u && u.state == claimUndecided {
			todo = append(todo, u)
		}
	}
	for _, u := range todo {
		if f.running[u] {
			u.state = claimAdmitted
			holders = append(holders, u.pod)
		}
	}
	for _, u := range todo {
		if f.running[u] {
			continue
		}
		u.conflict = FindPortConflict(u.pod, u.ports, holders)
		if u.conflict == nil {
			u.shortage = FindShortage(u.pod, u.resources, holders, f.capacity)
		}
		if u.rejection() != nil {
			u.state = claimRefused
			refused = append(refused, u)
			continue
		}
		u.state = claimAdmitted
		holders = append(holders, u.pod)
	}
	return refused
}

// rejection is why admission refuses a pod: its status reason and message.
type rejection struct {
	reason, message string
}

// IsRefusal reports whether reason is one a sync gives a pod it refuses
// before anything of it runs (Failed): admission's (host ports, extended
// resources, sysctls, OS, AppArmor) or a uid or name another pod holds.
// Such a pod never starts; what else runs is not its concern.
func IsRefusal(reason string) bool {
	switch reason {
	case ReasonNodePorts, ReasonSysctlForbidden, ReasonPodOSNotSupported, ReasonPodOSSelectorNodeLabelDoesNotMatch,
		ReasonAppArmor, ReasonNameConflict, ReasonUIDConflict:
		return true
	}
	return IsOutOfResource(reason)
}

// rejection is why the claim is refused, or nil.
func (c *portClaim) rejection() *rejection {
	switch {
	case c.conflict != nil:
		return &rejection{reason: ReasonNodePorts, message: c.conflict.statusMessage()}
	case c.shortage != nil:
		return &rejection{reason: c.shortage.Reason(), message: c.shortage.statusMessage()}
	}
	return nil
}

// extendedCapacity is what the node has of extended resources: the
// declared ones, and GPUs when the engine has the NVIDIA runtime (an
// engine that cannot say has none). The engine is asked only when gpus
// (a pod to decide asks for GPUs).
func (r *Runner) extendedCapacity(ctx context.Context, gpus bool) (ExtendedCapacity, error) {
	return extendedCapacity(ctx, r.raw, r.cfg.ExtendedResources, gpus)
}

// extendedCapacity is what a node with the runtime rt and the declared
// extended resources has (Runner.extendedCapacity).
func extendedCapacity(ctx context.Context, rt engine.Runtime, declared map[v1.ResourceName]int64, gpus bool) (ExtendedCapacity, error) {
	c := ExtendedCapacity{Declared: declared}
	lister, ok := rt.(engine.RuntimeHandlerLister)
	if !ok || !gpus {
		return c, nil
	}
	have, err := lister.RuntimeHandlers(ctx)
	if err != nil {
		return c, fmt.Errorf("list the engine's runtimes: %w", err)
	}
	c.NvidiaRuntime = slices.Contains(have, NvidiaRuntime)
	return c, nil
}

// finishedPods are the pods whose last status is Succeeded or Failed:
// their sandboxes are stopped, and they hold no port (as the kubelet's
// admission counts only active pods).
func (r *Runner) finishedPods() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for uid, p := range r.status {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			out[uid] = true
		}
	}
	return out
}

// syncRefused is the sync of a pod refused admission: nothing of it may
// run (what runs of it is of a spec that no longer asks for what it was
// refused), and its status is the kubelet's for a rejected pod: Failed,
// with the reason and message.
func (w *podWorker) syncRefused(ctx context.Context, pod *v1.Pod, st *podState, why *rejection) (*podActions, bool, error) {
	return w.stopAsFailed(ctx, pod, st, GracePeriod(pod), "pod refused: "+why.reason,
		v1.PodStatus{Phase: v1.PodFailed, Reason: why.reason, Message: why.message})
}
