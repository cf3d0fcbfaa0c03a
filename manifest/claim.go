package manifest

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Claimed is what Claim decided: the definitions that won, and those that
// lost.
type Claimed struct {
	// Pods, ConfigMaps and Secrets are the winning definitions, in the
	// order of the snapshots given, then of each snapshot's lists. They are
	// the snapshots' own objects, not copies.
	Pods           []*v1.Pod
	ConfigMaps     []*v1.ConfigMap
	Secrets        []*v1.Secret
	RuntimeClasses []*nodev1.RuntimeClass
	// Conflicts are the definitions that lost, in the order met.
	Conflicts []Conflict
}

// Conflict is a definition that lost to one that comes first.
type Conflict struct {
	// Loser and Winner are indexes in the snapshots given to Claim: the
	// snapshot of the losing definition and the one that holds the winner.
	Loser, Winner int
	// Obj is the losing definition: a *v1.Pod, *v1.ConfigMap or
	// *v1.Secret of snapshot Loser.
	Obj any
	// Kind is "pod", "ConfigMap", "Secret" or "RuntimeClass".
	Kind string
	// UID is set when a pod lost over its UID (metadata.uid) rather than
	// over its namespace/name.
	UID bool
	// What names what both claim, as a message says it: "pod default/web"
	// (the name as the manifests give it, without the node suffix),
	// "pod UID <uid>", "ConfigMap default/conf".
	What string
	// At is where the losing definition is, as a problem without a
	// message: Source, Line and Field.
	At Error
	// WinnerAt is "file:line" of the winning definition (its snapshot's
	// Source when that is unknown).
	WinnerAt string
}

// Problem is the conflict reported at the losing definition, with msg.
func (c Conflict) Problem(msg string) *Error {
	e := c.At
	e.Message = msg
	return &e
}

// Claim is podrun's one rule for two definitions of the same thing
// (DESIGN.md, "Identity"): snaps are in priority order (sources in the
// order configured; a directory's files by name) and the first definition
// wins. A pod claims its namespace/name and its UID (metadata.uid, when
// set, may give pods of different names one UID); a ConfigMap or Secret
// claims its kind, namespace and name among the objects of its kind of
// source: the apiserver's and the local sources' are apart (FromAPI), as
// each serves only its own pods. A later definition of a claimed
// name or UID loses, whatever its content, and is reported as a
// Conflict; the outcome depends only on snaps, so nothing flaps. Nil
// snapshots are skipped.
func Claim(snaps []*Snapshot) Claimed {
	type name struct {
		kind, namespace, name string
		api                   bool // an object of the apiserver (FromAPI)
	}
	// A claim is where the winner is found when a conflict names it: only
	// then, as finding its line parses its document again.
	type claim struct {
		snap int
		obj  any
	}
	winnerAt := func(c claim) string {
		if o := snaps[c.snap].Origin(c.obj); o != "" {
			return o
		}
		return snaps[c.snap].Source
	}
	var out Claimed
	names := map[name]claim{}
	uids := map[types.UID]claim{}
	for i, snap := range snaps {
		if snap == nil {
			continue
		}
		lost := func(obj any, kind, what string, uid bool, first claim) {
			at := Error{Source: snap.Source}
			if o, ok := snap.origins[obj]; ok {
				at = o.at()
			}
			out.Conflicts = append(out.Conflicts, Conflict{
				Loser: i, Winner: first.snap, Obj: obj, Kind: kind, UID: uid, What: what,
				At:       at,
				WinnerAt: winnerAt(first),
			})
		}
		for _, pod := range snap.Pods {
			k := name{kind: "pod", namespace: pod.Namespace, name: pod.Name}
			if first, taken := names[k]; taken {
				// Named as the manifests name it, without the node suffix.
				lost(pod, "pod", fmt.Sprintf("pod %s/%s", pod.Namespace, strings.TrimSuffix(pod.Name, "-"+pod.Spec.NodeName)), false, first)
				continue
			}
			if first, taken := uids[pod.UID]; taken {
				lost(pod, "pod", fmt.Sprintf("pod UID %s", pod.UID), true, first)
				continue
			}
			c := claim{snap: i, obj: pod}
			names[k], uids[pod.UID] = c, c
			out.Pods = append(out.Pods, pod)
		}
		for _, cm := range snap.ConfigMaps {
			k := name{"ConfigMap", cm.Namespace, cm.Name, FromAPI(cm)}
			if first, taken := names[k]; taken {
				lost(cm, "ConfigMap", fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name), false, first)
				continue
			}
			names[k] = claim{snap: i, obj: cm}
			out.ConfigMaps = append(out.ConfigMaps, cm)
		}
		for _, sec := range snap.Secrets {
			k := name{"Secret", sec.Namespace, sec.Name, FromAPI(sec)}
			if first, taken := names[k]; taken {
				lost(sec, "Secret", fmt.Sprintf("Secret %s/%s", sec.Namespace, sec.Name), false, first)
				continue
			}
			names[k] = claim{snap: i, obj: sec}
			out.Secrets = append(out.Secrets, sec)
		}
		for _, rc := range snap.RuntimeClasses {
			// Cluster-scoped: a name alone.
			k := name{kind: "RuntimeClass", name: rc.Name}
			if first, taken := names[k]; taken {
				lost(rc, "RuntimeClass", fmt.Sprintf("RuntimeClass %s", rc.Name), false, first)
				continue
			}
			names[k] = claim{snap: i, obj: rc}
			out.RuntimeClasses = append(out.RuntimeClasses, rc)
		}
	}
	return out
}

// definedName is what a definition claims within one Parse: its kind
// ("pod", "ConfigMap", "Secret"), namespace and name (a pod's name with the
// node suffix).
type definedName struct{ kind, namespace, name string }

// definition is an object a document defines without problems.
type definition struct {
	definedName
	// shown is its name as a conflict names it: a pod's as the manifest
	// gives it, without the node suffix.
	shown  string
	obj    any // a *v1.Pod, *v1.ConfigMap or *v1.Secret
	origin origin
}

// assembly adds the documents of one Parse to its snapshot, in document
// order: a definition of a name an earlier one defined is a conflict,
// reported at the later one, which is not kept. Documents are decoded
// apart (in parallel), and the outcome is the same as one by one.
type assembly struct {
	snap *Snapshot
	errs ErrorList
	// names holds what is defined so far: a map rather than a scan of the
	// snapshot's lists, which a generated file of 90k pods made quadratic.
	names map[definedName]any
}

// add adds what the document p decoded.
func (a *assembly) add(p *parser) {
	before := len(a.errs)
	a.errs = append(a.errs, p.errs...)
	a.snap.Warnings = append(a.snap.Warnings, p.warnings...)
	a.snap.documents += p.documents
	conflicts := false
	for _, d := range p.defined {
		if first, taken := a.names[d.definedName]; taken {
			e := d.origin.at()
			what := d.namespace + "/" + d.shown
			if d.namespace == "" {
				what = d.shown // cluster-scoped (a RuntimeClass)
			}
			e.Message = fmt.Sprintf("%s %s conflicts with the %s defined at %s; the first one is kept",
				d.kind, what, d.kind, a.snap.origins[first])
			a.errs, conflicts = append(a.errs, &e), true
			continue
		}
		a.names[d.definedName] = d.obj
		switch obj := d.obj.(type) {
		case *v1.Pod:
			a.snap.Pods = append(a.snap.Pods, obj)
		case *v1.ConfigMap:
			a.snap.ConfigMaps = append(a.snap.ConfigMaps, obj)
		case *v1.Secret:
			a.snap.Secrets = append(a.snap.Secrets, obj)
		case *nodev1.RuntimeClass:
			a.snap.RuntimeClasses = append(a.snap.RuntimeClasses, obj)
		}
		a.snap.origins[d.obj] = d.origin
	}
	if conflicts {
		sortByLine(a.errs[before:]) // among the document's problems, in line order
	}
}
