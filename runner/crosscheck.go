package runner

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Checks between objects: what makes pods that are each valid unable to
// run as written, together or on this node. `podrun once` and `watch` meet
// each at run time, in the sync core; `podrun validate` reports them all
// beforehand, from the same functions:
//
//   - two pods asking for the same host port: the later one is refused
//     (ReasonNodePorts; AdmitHostPorts, and at run time the runner's
//     admission, which also never refuses a pod that already runs);
//   - a reference to a ConfigMap, Secret or key the sources do not define
//     (MissingRefs): the containers wait with CreateContainerConfigError
//     until it appears; a missing imagePullSecret is only not used;
//   - a privileged container without --allow-privileged (CheckPrivileged):
//     the pod is refused;
//   - a runtimeClassName that no RuntimeClass declares (RuntimeClasses):
//     the containers wait with CreateContainerConfigError until it is
//     declared.

// Finding is one problem between objects, at a field of one pod.
type Finding struct {
	Pod *v1.Pod
	// Field is the path of the problem in Pod.
	Field string
	// Reason is what once and watch show for it: ReasonNodePorts (the pod
	// is refused), "CreateContainerConfigError" (its containers wait),
	// ReasonPrivileged (the pod is refused), or "" for a problem that only
	// deserves a warning at run time (a missing imagePullSecret).
	Reason string
	// Conflict is set for a host port conflict: the pod that holds the
	// port, and where (Describe renders it).
	Conflict *PortConflict
	// Message says what is wrong, without the place of the other pod of a
	// conflict (see Text).
	Message string
}

// ReasonPrivileged names the refusal of a privileged container without
// --allow-privileged.
const ReasonPrivileged = "Privileged"

// Text is the finding's message; otherAt renders where the other pod of
// a conflict asks for its port (its field, and where the caller knows it,
// its file and line).
func (f Finding) Text(otherAt func(pod *v1.Pod, field string) string) string {
	if f.Conflict != nil {
		return f.Conflict.Describe(otherAt(f.Conflict.Holder, f.Conflict.HolderPort.Field+".hostPort"))
	}
	return f.Message
}

// CheckPods runs every check between objects over pods, given in the
// order the runner is given them (the sources' priority order), against
// the ConfigMaps and Secrets of the sources and the RuntimeClasses of the
// node and the sources (nil: runtimeClassName is not checked), with the
// privileged policy of allowPrivileged. Findings come pod by pod, in the
// order of pods.
func CheckPods(pods []*v1.Pod, cms []*v1.ConfigMap, secrets []*v1.Secret, classes *RuntimeClasses, allowPrivileged bool) []Finding {
	objs := NewObjects()
	objs.Set(cms, secrets)
	refused := map[*v1.Pod][]PortConflict{}
	for _, c := range AdmitHostPorts(pods) {
		refused[c.Pod] = append(refused[c.Pod], c)
	}
	var out []Finding
	for _, pod := range pods {
		out = append(out, PrivilegedFindings(pod, allowPrivileged)...)
		for _, c := range refused[pod] {
			out = append(out, Finding{Pod: pod, Field: c.Port.Field + ".hostPort", Reason: ReasonNodePorts, Conflict: &c})
		}
		for _, m := range MissingRefs(pod, objs) {
			reason := "CreateContainerConfigError"
			if m.Ref.PullSecret {
				reason = ""
			}
			out = append(out, Finding{Pod: pod, Field: m.Field, Reason: reason, Message: m.Message})
		}
		if classes == nil {
			continue
		}
		if _, err := classes.Resolve(pod.Spec.RuntimeClassName); err != nil {
			out = append(out, Finding{Pod: pod, Field: "spec.runtimeClassName", Reason: "CreateContainerConfigError", Message: err.Error()})
		}
	}
	return out
}

// PrivilegedFindings are the pod's containers that CheckPrivileged
// refuses, at their securityContext.privileged fields.
func PrivilegedFindings(pod *v1.Pod, allow bool) []Finding {
	var out []Finding
	check := func(cs []v1.Container, field string) {
		for i := range cs {
			if err := CheckPrivileged(&cs[i], allow); err != nil {
				out = append(out, Finding{Pod: pod, Field: fmt.Sprintf("spec.%s[%d].securityContext.privileged", field, i),
					Reason: ReasonPrivileged, Message: err.Error()})
			}
		}
	}
	check(pod.Spec.InitContainers, "initContainers")
	check(pod.Spec.Containers, "containers")
	return out
}
