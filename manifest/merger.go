package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

// Merger keeps the last snapshot of each source and turns SourceUpdates
// into the changes of the desired pods (the kubelet's config mux and
// merger, with podrun's identity: a pod is its UID, and its content is its
// config.hash).
//
// The desired pods are the union of the sources' snapshots in source
// priority order; when two sources define the same namespace/name (or
// UID), the source that comes first wins and the other is reported in
// Errors. The outcome depends only on the sources' current snapshots, never
// on the order updates arrived in, so nothing flaps.
//
// A Merger is not safe for concurrent use: one goroutine (the sync loop)
// owns it.
type Merger struct {
	sources    []string // priority order
	configured int      // sources[:configured] were given to NewMerger
	states     map[string]*mergeSource

	pods      []*v1.Pod // desired, in priority order
	byUID     map[types.UID]*v1.Pod
	conflicts map[string]ErrorList // source -> names it lost
	cms       []*v1.ConfigMap
	secrets   []*v1.Secret
}

type mergeSource struct {
	snap    *Snapshot // last usable; nil until the first
	err     error
	failing []string
}

// NewMerger returns a merger of the configured sources, in priority order,
// each named as its SourceUpdates name it (the path or URL as configured).
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
func (m *Merger) Update(u SourceUpdate) []PodChange {
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
	type name struct{ kind, namespace, name string }
	type claim struct {
		source string
		at     string // "file:line" of the winning definition
	}
	names := map[name]claim{}
	uids := map[types.UID]claim{}
	conflicts := map[string]ErrorList{}

	// lost records a definition that lost to first.
	lost := func(src string, snap *Snapshot, obj any, what string, first claim) {
		o, ok := snap.origins[obj]
		if !ok {
			o = origin{source: snap.Source}
		}
		conflicts[src] = append(conflicts[src], &Error{Source: o.source, Line: o.line, Field: o.field, Message: fmt.Sprintf(
			"%s conflicts with the one defined at %s (source %s comes first); the first one is kept", what, first.at, first.source)})
	}
	at := func(snap *Snapshot, obj any) string {
		if o := snap.Origin(obj); o != "" {
			return o
		}
		return snap.Source
	}

	var pods []*v1.Pod
	var cms []*v1.ConfigMap
	var secrets []*v1.Secret
	for _, src := range m.sources {
		snap := m.states[src].snap
		if snap == nil {
			continue
		}
		for _, pod := range snap.Pods {
			k := name{"pod", pod.Namespace, pod.Name}
			if first, taken := names[k]; taken {
				lost(src, snap, pod, fmt.Sprintf("pod %s/%s", pod.Namespace, strings.TrimSuffix(pod.Name, "-"+pod.Spec.NodeName)), first)
				continue
			}
			if first, taken := uids[pod.UID]; taken {
				lost(src, snap, pod, fmt.Sprintf("pod UID %s", pod.UID), first)
				continue
			}
			c := claim{source: src, at: at(snap, pod)}
			names[k], uids[pod.UID] = c, c
			pods = append(pods, pod)
		}
		for _, cm := range snap.ConfigMaps {
			k := name{"ConfigMap", cm.Namespace, cm.Name}
			if first, taken := names[k]; taken {
				lost(src, snap, cm, fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name), first)
				continue
			}
			names[k] = claim{source: src, at: at(snap, cm)}
			cms = append(cms, cm)
		}
		for _, sec := range snap.Secrets {
			k := name{"Secret", sec.Namespace, sec.Name}
			if first, taken := names[k]; taken {
				lost(src, snap, sec, fmt.Sprintf("Secret %s/%s", sec.Namespace, sec.Name), first)
				continue
			}
			names[k] = claim{source: src, at: at(snap, sec)}
			secrets = append(secrets, sec)
		}
	}

	var removed, changed []PodChange
	byUID := make(map[types.UID]*v1.Pod, len(pods))
	for i, pod := range pods {
		old, ok := m.byUID[pod.UID]
		switch {
		case !ok:
			changed = append(changed, PodChange{Op: OpAdd, Pod: pod.DeepCopy()})
		case old.Annotations[AnnotationConfigHash] != pod.Annotations[AnnotationConfigHash]:
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

// Errors returns the current problem of each source that has one: its
// own (SourceUpdate.Err) joined with the definitions it loses to sources
// that come first.
func (m *Merger) Errors() map[string]error {
	errs := map[string]error{}
	for _, src := range m.sources {
		st := m.states[src]
		var conflict error
		if c := m.conflicts[src]; len(c) > 0 {
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
