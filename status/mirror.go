package status

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
)

// Mirror pods: the API's view of the node's static pods (file and URL
// pods), as the kubelet keeps them (pkg/kubelet/pod/mirror_client.go and
// its syncPod). A mirror pod has the static pod's name, namespace, labels,
// annotations and spec, the annotation kubernetes.io/config.mirror set to
// the static pod's kubernetes.io/config.hash, and a controller owner
// reference to the Node. The API may not change it but its status: an
// edited manifest makes the mirror pod again.

// IsStatic reports whether a pod of the runner is a static pod: one from a
// file or a URL, not from the apiserver.
func IsStatic(pod *v1.Pod) bool {
	switch pod.Annotations[manifest.AnnotationConfigSource] {
	case manifest.ConfigSourceFile, manifest.ConfigSourceHTTP:
		return true
	}
	return false
}

// IsMirror reports whether an API pod is a mirror pod.
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[v1.MirrorPodAnnotationKey]
	return ok
}

// staticHash is the content hash of a static pod, which its mirror pod's
// config.mirror must equal.
func staticHash(pod *v1.Pod) string { return pod.Annotations[manifest.AnnotationConfigHash] }

// isMirrorOf reports whether the API pod api is the current mirror pod of
// the static pod st: same name, and made from the same content.
func isMirrorOf(api, st *v1.Pod) bool {
	h, ok := api.Annotations[v1.MirrorPodAnnotationKey]
	return ok && h == staticHash(st) && api.Name == st.Name && api.Namespace == st.Namespace
}

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// mirrorInput is what decides the mirror pods.
type mirrorInput struct {
	// Node is the node's name.
	Node string
	// Static are the static pods that run (the runner's), to mirror.
	Static []*v1.Pod
	// Desired are the namespace/name of the static pods the sources define
	// now; nil when not known (not every source has spoken): then no
	// mirror pod is deleted for want of its static pod.
	Desired map[string]bool
	// API are the API's pods bound to Node.
	API []*v1.Pod
}

// mirrorAction is one request to the API: delete an API pod (with grace
// 0 and its UID as precondition), or create the mirror pod of a static pod.
type mirrorAction struct {
	Delete *v1.Pod // the API pod to delete
	Create *v1.Pod // the static pod to mirror
	Reason string
}

func (a mirrorAction) String() string {
	if a.Delete != nil {
		return fmt.Sprintf("delete %s (%s): %s", podName(a.Delete), a.Delete.UID, a.Reason)
	}
	return fmt.Sprintf("create mirror of %s: %s", podName(a.Create), a.Reason)
}

// planMirrors decides which mirror pods to delete and create, deletions of
// a name before its creation. blocked are the static pods (by UID) that
// cannot have a mirror pod because a pod of the API that is not a mirror
// has their name, with why.
func planMirrors(in mirrorInput) (actions []mirrorAction, blocked map[types.UID]string) {
	static := map[string]*v1.Pod{}
	for _, p := range in.Static {
		if !IsStatic(p) {
			continue
		}
		if in.Desired != nil && !in.Desired[podName(p)] {
			continue // being removed: its mirror pod goes, none is made
		}
		static[podName(p)] = p
	}
	api := map[string]*v1.Pod{}
	for _, p := range in.API {
		if p.Spec.NodeName == in.Node {
			api[podName(p)] = p
		}
	}
	names := slices.Sorted(maps.Keys(static))
	for name := range api {
		if static[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)

	for _, name := range names {
		st, cur := static[name], api[name]
		switch {
		case cur != nil && !IsMirror(cur):
			if st != nil {
				if blocked == nil {
					blocked = map[types.UID]string{}
				}
				blocked[st.UID] = fmt.Sprintf("no mirror pod: the API has a pod %s (UID %s) that is not a mirror pod", name, cur.UID)
			}
		case st == nil:
			switch {
			case cur.DeletionTimestamp != nil:
				actions = append(actions, mirrorAction{Delete: cur, Reason: "deleted in the API"})
			case in.Desired != nil && !in.Desired[name]:
				actions = append(actions, mirrorAction{Delete: cur, Reason: "its static pod is gone"})
			}
		case cur == nil:
			actions = append(actions, mirrorAction{Create: st, Reason: "none in the API"})
		case cur.DeletionTimestamp != nil:
			actions = append(actions,
				mirrorAction{Delete: cur, Reason: "deleted in the API"},
				mirrorAction{Create: st, Reason: "deleted in the API"})
		case !isMirrorOf(cur, st):
			actions = append(actions,
				mirrorAction{Delete: cur, Reason: "its static pod changed"},
				mirrorAction{Create: st, Reason: "its static pod changed"})
		}
	}
	return actions, blocked
}

// mirrorPod is the mirror pod to create for the static pod st of node
// (whose Node object has UID nodeUID).
func mirrorPod(st *v1.Pod, node string, nodeUID types.UID) *v1.Pod {
	controller := true
	m := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        st.Name,
			Namespace:   st.Namespace,
			Labels:      maps.Clone(st.Labels),
			Annotations: maps.Clone(st.Annotations),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       node,
				UID:        nodeUID,
				Controller: &controller,
			}},
		},
		Spec: *st.Spec.DeepCopy(),
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1.MirrorPodAnnotationKey] = staticHash(st)
	// Whoever may read pods in the cluster reads the mirror: a manifest
	// URL's credentials stay on the node.
	manifest.RedactSourceAnnotation(m)
	m.Spec.NodeName = node
	return m
}
