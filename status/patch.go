package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The status of a pod in the API is partly the node's and partly others':
// the scheduler's PodScheduled reason, a controller's readiness gates, the
// API's QOS class. mergeStatus takes the node's part from the runner's
// status and keeps the rest of the API's, as the kubelet's status manager
// does (mergePodStatus, updateStatusInternal).

// ownedConditions are the pod conditions the node owns (the kubelet's
// PodConditionsByKubelet, with PodReadyToStartContainers): the node's
// status replaces them; other conditions are kept as the API has them.
var ownedConditions = []v1.PodConditionType{
	v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers,
}

func ownedCondition(t v1.PodConditionType) bool { return slices.Contains(ownedConditions, t) }

func terminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// mergeStatus returns the status to write for a pod whose status in the API
// is api, and which the node says is node: api with the node's fields
// (phase, reason, message, conditions it owns, host and pod IPs, container
// statuses, ephemeral ones included, the observed generation unless the
// API's is higher) taken from node, and its DisruptionTarget condition as
// the pod turns terminal; the conditions keep the observed generation node
// gives them. It keeps from api what the node must not change: other
// conditions, the start time once set, the QOS class, a terminal phase
// (the API refuses to leave one), and a condition's
// lastTransitionTime while its status is the same (a podrun restart does
// not reset them). Container statuses, ephemeral ones too, are sorted by
// name, as the kubelet sends them (SortedContainerStatuses, in
// convertToAPIContainerStatuses and normalizeStatus). The pod's readiness
// gates hold its Ready condition False while the API's conditions they
// name are not True (gateReadiness); now is when such a hold begins, or a
// terminal phase turns Ready False. Neither argument is modified.
func mergeStatus(api, node *v1.PodStatus, gates []v1.PodReadinessGate, now time.Time) v1.PodStatus {
	out := *api.DeepCopy()
	n := node.DeepCopy()
	gateReadiness(gates, api.Conditions, n.Conditions, now)

	out.Phase, out.Reason, out.Message = n.Phase, n.Reason, n.Message
	if terminalPhase(api.Phase) && api.Phase != n.Phase {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}

	var conds []v1.PodCondition
	for _, c := range api.Conditions {
		if !ownedCondition(c.Type) {
			conds = append(conds, c)
		}
	}
	// The node's DisruptionTarget (an evicted pod's) is written once, as
	// the pod turns terminal, replacing another's (the kubelet's
	// mergePodStatus, for the conditions it shares: only then, with all
	// containers stopped, which a node saying a terminal phase has done);
	// its transition time is now unless the API has it with the same
	// status (updateLastTransitionTime).
	toTerminal := !terminalPhase(api.Phase) && terminalPhase(n.Phase)
	for _, c := range n.Conditions {
		if c.Type == v1.DisruptionTarget && toTerminal {
			c.LastTransitionTime = metav1.NewTime(now)
			if old := findCondition(conds, c.Type); old != nil {
				if old.Status == c.Status {
					c.LastTransitionTime = old.LastTransitionTime
				}
				*old = c
			} else {
				conds = append(conds, c)
			}
			continue
		}
		if !ownedCondition(c.Type) {
			continue
		}
		if old := findCondition(api.Conditions, c.Type); old != nil && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conds = append(conds, c)
	}
	out.Conditions = conds
	if terminalPhase(out.Phase) {
		out.Conditions = notReadyWhenDone(out.Conditions, api.Conditions, out.Phase, n.ObservedGeneration, now)
	}

	// The generation the node has seen: the kubelet sets it in
	// updateStatusInternal (SetPodStatus, from the pod's generation) and
	// never lets it go down (over the status it had), then sends it as it
	// is (mergePodStatus). A node status without one keeps the API's.
	out.ObservedGeneration = max(api.ObservedGeneration, n.ObservedGeneration)
	out.HostIP, out.HostIPs = n.HostIP, n.HostIPs
	out.PodIP, out.PodIPs = n.PodIP, n.PodIPs
	if api.StartTime == nil || api.StartTime.IsZero() {
		out.StartTime = n.StartTime
	}
	if out.QOSClass == "" {
		out.QOSClass = n.QOSClass
	}
	out.InitContainerStatuses = n.InitContainerStatuses
	out.ContainerStatuses = n.ContainerStatuses
	out.EphemeralContainerStatuses = n.EphemeralContainerStatuses
	byName := func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(out.ContainerStatuses, byName)
	slices.SortStableFunc(out.EphemeralContainerStatuses, byName)
	return out
}

// Reasons of the Ready and ContainersReady conditions of a pod in a
// terminal phase (the kubelet's PodCompleted and PodFailed).
const (
	reasonPodCompleted = "PodCompleted"
	reasonPodFailed    = "PodFailed"
)

// terminalReason is the reason of the Ready and ContainersReady conditions
// of a pod in the terminal phase p, as the kubelet's
// generatePodReadyConditionForTerminalPhase and
// generateContainersReadyConditionForTerminalPhase give it: PodFailed for
// Failed, PodCompleted for Succeeded.
func terminalReason(p v1.PodPhase) string {
	if p == v1.PodFailed {
		return reasonPodFailed
	}
	return reasonPodCompleted
}

// notReadyWhenDone returns conds, the conditions of a pod in the terminal
// phase phase, with Ready and ContainersReady False if either is True: a
// pod that is done is not ready, whatever the last probe said. As the
// kubelet's mergePodStatus (issue 108594), both are then replaced by the
// terminal phase's condition (generate*ConditionForTerminalPhase: False,
// its reason, no message), a missing one added since now, observing the
// generation gen (the status's; the others keep theirs). One that this
// turns from True to False is False since now (podutil.UpdatePodCondition),
// or since when api, the API's conditions, says so if it already has it
// False: the flip is a transition once, not at every merge.
func notReadyWhenDone(conds, api []v1.PodCondition, phase v1.PodPhase, gen int64, now time.Time) []v1.PodCondition {
	ready, containersReady := findCondition(conds, v1.PodReady), findCondition(conds, v1.ContainersReady)
	if (ready == nil || ready.Status != v1.ConditionTrue) && (containersReady == nil || containersReady.Status != v1.ConditionTrue) {
		return conds
	}
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		c := findCondition(conds, t)
		if c == nil {
			conds = append(conds, v1.PodCondition{Type: t, ObservedGeneration: gen, Status: v1.ConditionFalse,
				Reason: terminalReason(phase), LastTransitionTime: metav1.NewTime(now)})
			continue
		}
		if c.Status != v1.ConditionFalse {
			c.LastTransitionTime = metav1.NewTime(now)
			if old := findCondition(api, t); old != nil && old.Status == v1.ConditionFalse && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		c.Status, c.Reason, c.Message = v1.ConditionFalse, terminalReason(phase), ""
	}
	return conds
}

// gateReadiness holds the Ready condition of conds (the node's) False while
// a readiness gate's condition in api (others write them) is missing or
// not True, with the reason and message of the kubelet's
// GeneratePodReadyCondition. A Ready that is already False (containers not
// ready) keeps its own reason.
func gateReadiness(gates []v1.PodReadinessGate, api, conds []v1.PodCondition, now time.Time) {
	ready := findCondition(conds, v1.PodReady)
	if len(gates) == 0 || ready == nil || ready.Status != v1.ConditionTrue {
		return
	}
	var msgs []string
	for _, g := range gates {
		switch c := findCondition(api, g.ConditionType); {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	if len(msgs) == 0 {
		return
	}
	ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, reasonGatesNotReady, strings.Join(msgs, ", ")
	ready.LastTransitionTime = metav1.NewTime(now)
}

// reasonGatesNotReady is the kubelet's reason of a Ready condition that a
// readiness gate holds False.
const reasonGatesNotReady = "ReadinessGatesNotReady"

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// statusPatch is the strategic merge patch that turns the status old into
// new for the pod uid, for pods/status; the UID in it is a precondition (a
// pod deleted and made again under the same name refuses it). unchanged
// reports that the patch holds nothing but the UID: there is nothing to
// send. As the kubelet's PatchPodStatus.
func statusPatch(uid types.UID, old, new *v1.PodStatus) (patch []byte, unchanged bool, err error) {
	oldData, err := json.Marshal(v1.Pod{Status: *old})
	if err != nil {
		return nil, false, fmt.Errorf("marshal the old status: %w", err)
	}
	// Only the new object has the UID, so that the patch always holds it.
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *new})
	if err != nil {
		return nil, false, fmt.Errorf("marshal the new status: %w", err)
	}
	patch, err = strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, false, fmt.Errorf("make the status patch: %w", err)
	}
	return patch, bytes.Equal(patch, fmt.Appendf(nil, `{"metadata":{"uid":%q}}`, uid)), nil
}

// statusKey is what a status says as the API stores it (times to the
// second): two statuses with the same key need not be sent twice.
func statusKey(s *v1.PodStatus) string {
	data, err := json.Marshal(s)
	if err != nil {
		// A v1.PodStatus always marshals; a failure is a programming error.
		panic(fmt.Sprintf("status: marshal a pod status: %v", err))
	}
	return string(data)
}

// Why a container the node stopped because its pod was deleted shows no
// exit code of its own: the runner could not say how it ended (it could
// not read the container before removing it with the pod).
const (
	reasonDeleted  = "ContainerStatusUnknown"
	messageDeleted = "The container was stopped and removed with its pod, which was deleted; its exit code was not kept"
)

// finalStatus is the status of a pod the node has stopped and removed
// because the API deleted it (the kubelet's TerminatePod): every container
// that was not already terminated is terminated with exit code 137, the
// phase is Failed unless it was already Succeeded or Failed, and the pod
// and its containers are not ready (since now), with the reason of the
// phase (terminalReason).
func finalStatus(last *v1.PodStatus, now time.Time) v1.PodStatus {
	s := *last.DeepCopy()
	terminate := func(list []v1.ContainerStatus) {
		for i := range list {
			c := &list[i]
			c.Ready = false
			if c.State.Terminated != nil {
				continue
			}
			if c.State.Running != nil {
				c.LastTerminationState = v1.ContainerState{}
			}
			c.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: 137, Reason: reasonDeleted, Message: messageDeleted,
			}}
			started := false
			c.Started = &started
		}
	}
	terminate(s.InitContainerStatuses)
	terminate(s.ContainerStatuses)
	terminate(s.EphemeralContainerStatuses)
	if !terminalPhase(s.Phase) {
		s.Phase = v1.PodFailed
	}
	for i := range s.Conditions {
		if t := s.Conditions[i].Type; t == v1.PodReady || t == v1.ContainersReady {
			if s.Conditions[i].Status != v1.ConditionFalse {
				s.Conditions[i].Status = v1.ConditionFalse
				s.Conditions[i].Reason, s.Conditions[i].Message = terminalReason(s.Phase), ""
				s.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
		}
	}
	return s
}
