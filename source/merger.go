package source

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
)

// Op is what happened to a desired pod.
type Op int

const (
	// OpAdd: a pod (a UID) that was not desired is.
	OpAdd Op = iota + 1
	// OpUpdate: a desired pod's content (its kubernetes.io/config.hash)
	// changed; its UID did not.
	OpUpdate
	// OpRemove: a desired pod is no longer: gone from its source's good
	// snapshot, or now losing a name conflict to a source that comes first.
	OpRemove
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "ADD"
	case OpUpdate:
		return "UPDATE"
	case OpRemove:
		return "REMOVE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// PodChange is one change of the desired pods. Pod is the receiver's own
// copy: for OpAdd and OpUpdate the pod as now desired, for OpRemove the pod
// as it was last desired.
type PodChange struct {
	Op  Op
	Pod *v1.Pod
}

// Merger keeps the last snapshot of each source and turns their Updates
// into the changes of the desired pods (the kubelet's config mux and
// merger, with podrun's identity: a pod is its UID, and its content is its
// config.hash).
//
// The desired pods are the union of the sources' snapshots in source
// priority order; when two sources define the same namespace/name (or
// UID), the source that comes first wins and the other is reported in
// Errors (the rule is manifest.Claim's, as for a directory's files). The
// outcome depends only on the sources' current snapshots, never on the
// order updates arrived in, so nothing flaps.
//
// A Merger is not safe for concurrent use: one goroutine owns it (in
// `podrun watch`, Mux.Run, which guards it for the Mux's readers).
type Merger struct {
	sources    []string // priority order
	configured int      // sources[:configured] were given to NewMerger
	states     map[string]*mergeSource

	pods      []*v1.Pod // desired, in priority order
	byUID     map[types.UID]*v1.Pod
	conflicts []Conflict // in the order met: by losing source, then kind
	cms       []*v1.ConfigMap
	secrets   []*v1.Secret
	rcs       []*nodev1.RuntimeClass
}

// Conflict is a definition a source loses to one of a source that comes
// first: the pod, ConfigMap or Secret of that name (or a pod of that UID)
// is the first source's, and this one is left out.
type Conflict struct {
	// Source is the losing source, as named in Update.Source.
	Source string
	// Kind is "pod", "ConfigMap", "Secret" or "RuntimeClass".
	Kind string
	// Problem is the conflict reported at the losing definition (its file,
	// line and field). Its text is podrun's one report of a conflict
	// between sources: watch logs it, `once` refuses with it, and Errors
	// and the pods' source-error annotation carry it.
	Problem *manifest.Error
}

type mergeSource struct {
	snap    *manifest.Snapshot // last usable; nil until the first
	err     error
	failing []string
}

// NewMerger returns a merger of the configured sources, in priority order,
// each named as its Updates name it in Update.Source (the path or URL as
// configured).
func NewMerger(sources []string) *Merger {
	m := &Merger{states: map[string]*mergeSource{}, byUID: map[types.UID]*v1.Pod{}}
	for _, src := range sources {
		if _, dup := m.states[src]; dup {
			continue // the same source twice is one source
		}
		m.sources = append(m.sources, src)
		m.states[src] = &mergeSource{}
	}
	m.configured = len(m.sources)
	return m
}

// Update records u as its source's current state and returns what changed
// in the desired pods since the last call: removals first (so that a pod
// moving between sources frees its name and host ports before its
// successor starts), then additions and updates in priority order.
//
// An update without a Snapshot (a failed first read) changes no pod; an
// update with Err carries its source's last good snapshot, so a bad read
// removes nothing. A source not given to NewMerger is added after the
// others (last priority) and is not waited for by Ready.
func (m *Merger) Update(u Update) []PodChange {
	st := m.states[u.Source]
	if st == nil {
		st = &mergeSource{}
		m.states[u.Source] = st
		m.sources = append(m.sources, u.Source)
	}
	if u.Snapshot != nil {
		st.snap = u.Snapshot
	}
	st.err = u.Err
	st.failing = slices.Clone(u.Failing)
	return m.recompute()
}

// recompute derives the desired pods and objects from the sources'
// snapshots and returns the pod changes.
func (m *Merger) recompute() []PodChange {
	// Sources in priority order; one with no usable snapshot yet is nil,
	// which Claim skips.
	snaps := make([]*manifest.Snapshot, len(m.sources))
	for i, src := range m.sources {
		snaps[i] = m.states[src].snap
	}
	claimed := manifest.Claim(snaps)
	var conflicts []Conflict
	for _, c := range claimed.Conflicts {
		loser, winner := m.sources[c.Loser], m.sources[c.Winner]
		conflicts = append(conflicts, Conflict{Source: loser, Kind: c.Kind, Problem: c.Problem(fmt.Sprintf(
			"%s conflicts with the one defined at %s (source %s comes first); the first one is kept", c.What, c.WinnerAt, manifest.RedactedSource(winner)))})
	}
	pods, cms, secrets := claimed.Pods, claimed.ConfigMaps, claimed.Secrets

	var removed, changed []PodChange
	byUID := make(map[types.UID]*v1.Pod, len(pods))
	for i, pod := range pods {
		old, ok := m.byUID[pod.UID]
		switch {
		case !ok:
			changed = append(changed, PodChange{Op: OpAdd, Pod: pod.DeepCopy()})
		case old.Annotations[manifest.AnnotationConfigHash] != pod.Annotations[manifest.AnnotationConfigHash]:
			changed = append(changed, PodChange{Op: OpUpdate, Pod: pod.DeepCopy()})
		default:
			// Unchanged: keep the pod as first seen, config.seen included.
			pods[i] = old
		}
		byUID[pod.UID] = pods[i]
	}
	for _, old := range m.pods {
		if _, still := byUID[old.UID]; !still {
			removed = append(removed, PodChange{Op: OpRemove, Pod: old.DeepCopy()})
		}
	}
	m.pods, m.byUID, m.conflicts, m.cms, m.secrets = pods, byUID, conflicts, cms, secrets
	m.rcs = claimed.RuntimeClasses
	return append(removed, changed...)
}

// Ready reports whether every configured source has delivered a usable
// snapshot (a good first scan or fetch; a source whose first read failed
// is not ready). Until then nothing destructive may happen: pods of a
// source that has not spoken may still be wanted.
func (m *Merger) Ready() bool {
	for _, src := range m.sources[:m.configured] {
		if m.states[src].snap == nil {
			return false
		}
	}
	return true
}

// Pods returns the desired pods, in source priority order, as copies.
func (m *Merger) Pods() []*v1.Pod {
	pods := make([]*v1.Pod, len(m.pods))
	for i, p := range m.pods {
		pods[i] = p.DeepCopy()
	}
	return pods
}

// Objects returns the ConfigMaps and Secrets of all sources (the first
// source's on a name conflict), as copies, for the pods' volumes and env.
// The apiserver's are marked as such (manifest.FromAPI): they serve only
// its pods, and the local sources' only theirs.
func (m *Merger) Objects() ([]*v1.ConfigMap, []*v1.Secret) {
	cms := make([]*v1.ConfigMap, len(m.cms))
	for i, cm := range m.cms {
		cms[i] = cm.DeepCopy()
	}
	secrets := make([]*v1.Secret, len(m.secrets))
	for i, s := range m.secrets {
		secrets[i] = s.DeepCopy()
	}
	return cms, secrets
}

// RuntimeClasses returns the RuntimeClasses of all sources (the first
// source's on a name conflict), as copies, for the pods' runtimeClassName.
func (m *Merger) RuntimeClasses() []*nodev1.RuntimeClass {
	rcs := make([]*nodev1.RuntimeClass, len(m.rcs))
	for i, rc := range m.rcs {
		rcs[i] = rc.DeepCopy()
	}
	return rcs
}

// Conflicts returns the definitions that lose to those of a source that
// comes first, now: in source priority order of the losers.
func (m *Merger) Conflicts() []Conflict {
	return slices.Clone(m.conflicts)
}

// Errors returns the current problem of each source that has one: its
// own (Update.Err) joined with the definitions it loses to sources
// that come first (Conflicts, as an ErrorList).
func (m *Merger) Errors() map[string]error {
	lost := map[string]manifest.ErrorList{}
	for _, c := range m.conflicts {
		lost[c.Source] = append(lost[c.Source], c.Problem)
	}
	errs := map[string]error{}
	for _, src := range m.sources {
		st := m.states[src]
		var conflict error
		if c := lost[src]; len(c) > 0 {
			conflict = c
		}
		switch {
		case st.err != nil && conflict != nil:
			errs[src] = errors.Join(st.err, conflict)
		case st.err != nil:
			errs[src] = st.err
		case conflict != nil:
			errs[src] = conflict
		}
	}
	return errs
}

// Failing returns the union of the sources' Failing: identity sources
// (absolute paths, URLs) whose runtime pods must be kept although no
// snapshot defines them.
func (m *Merger) Failing() map[string]bool {
	failing := map[string]bool{}
	for _, st := range m.states {
		for _, f := range st.failing {
			failing[f] = true
		}
	}
	return failing
}
