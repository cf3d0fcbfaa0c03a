package runner

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/manifest"
)

// statusInput is what a pod's status is computed from.
type statusInput struct {
	Pod     *v1.Pod
	State   *podState
	Actions *podActions // may be nil
	// Errors by container name: why a container could not be created or
	// started in the last sync (CreateContainerConfigError, ErrImagePull...).
	Errors   map[string]waiting
	HostIP   string
	Runtime  string // "docker": the prefix of container IDs
	Previous *v1.PodStatus
	Now      time.Time
	// Probes says which running containers are started and ready; nil:
	// every running container is both.
	Probes     probeStates
	Terminated bool // the pod was removed and its containers stopped
	// Messages are the termination messages of finished runs, by
	// container ID (termmsg.go); nil: none.
	Messages map[string]string
	// FailedReason, when set, makes the pod Failed with it and
	// FailedMessage whatever its containers: an evicted pod.
	FailedReason, FailedMessage string
}

// probeStates is what status needs of the prober.
type probeStates interface {
	Started(containerID string) bool
	Ready(containerID string) bool
}

// computePodStatus computes a pod's status as the kubelet's
// generateAPIPodStatus does: container statuses from the runtime's state and
// the last sync's waiting reasons, then phase and conditions from them.
func computePodStatus(in statusInput) v1.PodStatus {
	pod, state := in.Pod, in.State
	var s v1.PodStatus
	sb := state.latestSandbox()
	sandboxID := ""
	if sb != nil {
		sandboxID = sb.ID
	}

	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(in, c, sandboxID)
		if !isSidecar(c) {
			// As the kubelet's prober manager: an init container that
			// has done its work is ready (conformance checks it).
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, containerStatus(in, &pod.Spec.Containers[i], sandboxID))
	}
	s.EphemeralContainerStatuses = ephemeralStatuses(in, sandboxID)

	s.HostIP = in.HostIP
	if in.HostIP != "" {
		s.HostIPs = []v1.HostIP{{IP: in.HostIP}}
	}
	if sb != nil && sb.State == engine.StateRunning && !pod.Spec.HostNetwork {
		s.PodIP = sb.IP
	}
	if pod.Spec.HostNetwork {
		// A hostNetwork pod has the node's IP, sandbox or not, as the
		// kubelet's generateAPIPodStatus gives it whenever the runtime
		// gives none.
		s.PodIP = in.HostIP
	}
	if s.PodIP != "" {
		s.PodIPs = []v1.PodIP{{IP: s.PodIP}}
	}

	// A deleted pod (its containers stopped on purpose) is terminal, as
	// the kubelet's podIsTerminal: but for a static pod (a file or URL
	// pod), which the kubelet leaves out.
	terminal := in.Terminated && !isStaticPod(pod)
	s.Phase = podPhase(pod, &s, appsInSandbox(pod, state, sandboxID), terminal)
	if terminal && s.Phase != v1.PodSucceeded && s.Phase != v1.PodFailed {
		// As the kubelet's status manager (TerminatePod): a terminated
		// pod that is not finished by its statuses is Failed.
		s.Phase = v1.PodFailed
	}

	// startTime: when podrun first brought the pod up; after a restart of
	// podrun, the oldest sandbox's creation.
	if in.Previous != nil && in.Previous.StartTime != nil {
		s.StartTime = in.Previous.StartTime
	} else {
		t := metav1.NewTime(podStartTime(in.Previous, state, in.Now))
		s.StartTime = &t
	}
	if in.Actions != nil && in.Actions.DeadlineExceeded {
		// As the kubelet's eviction by its activeDeadlineHandler.
		s.Phase = v1.PodFailed
		s.Reason, s.Message = ReasonDeadlineExceeded, messageDeadlineExceeded
	}
	if in.FailedReason != "" {
		s.Phase = v1.PodFailed
		s.Reason, s.Message = in.FailedReason, in.FailedMessage
	}

	// The generation of the spec this status reflects, as the kubelet's
	// status manager sets it (podutil.CalculatePodStatusObservedGeneration,
	// PodObservedGenerationTracking on by default since 1.34).
	s.ObservedGeneration = pod.Generation
	capTerminationMessages(pod, &s)
	s.QOSClass = podQOS(pod)
	s.Conditions = podConditions(pod, &s, sb, in.Previous, in.Now)
	holdTerminalPhase(&s, in.Previous)
	return s
}

// holdTerminalPhase keeps a terminal phase from being reported while a
// container of the pod still runs (a pod past its deadline, or whose init
// container failed, before its containers are stopped): the phase, reason
// and message stay the previous ones until nothing runs, as the kubelet's
// status manager (mergePodStatus) holds a transition to a terminal phase
// while the pod could have running containers; the conditions are those of
// the terminal phase, as there. A pod reported terminal before stays so.
// Without a previous phase (podrun restarted), the pod is Running: a
// container runs.
func holdTerminalPhase(s *v1.PodStatus, prev *v1.PodStatus) {
	if !isTerminal(s.Phase) || !anyRunning(s) {
		return
	}
	switch {
	case prev != nil && isTerminal(prev.Phase):
	case prev != nil && prev.Phase != "":
		s.Phase, s.Reason, s.Message = prev.Phase, prev.Reason, prev.Message
	default:
		s.Phase, s.Reason, s.Message = v1.PodRunning, "", ""
	}
}

func isTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}

// anyRunning reports whether a container of s (init, app or ephemeral)
// runs.
func anyRunning(s *v1.PodStatus) bool {
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].State.Running != nil {
				return true
			}
		}
	}
	return false
}

func containerStatus(in statusInput, c *v1.Container, sandboxID string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	cur := in.State.latest(c.Name, "")
	if cur != nil {
		cs.ContainerID = in.Runtime + "://" + cur.ID
		cs.ImageID = cur.ImageID
		cs.RestartCount = int32(cur.Attempt)
	}
	switch {
	case cur == nil:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: defaultWaitingReason(in.Pod)}
	case cur.State == engine.StateRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		started, ready := true, c.ReadinessProbe == nil
		if in.Probes != nil {
			started, ready = in.Probes.Started(cur.ID), in.Probes.Ready(cur.ID)
		}
		cs.Started = &started
		cs.Ready = cur.SandboxID == sandboxID && ready
	case cur.State == engine.StateCreated:
		// Made, not started: waiting with no reason, as the kubelet's
		// convertToAPIContainerStatuses (ContainerCreating is the
		// default of a container not made yet).
		cs.State.Waiting = &v1.ContainerStateWaiting{}
	default:
		cs.State.Terminated = terminatedState(in.Runtime, cur, in.Messages[cur.ID])
	}
	if cur != nil {
		if prev := previousRun(in.State, c.Name, cur); prev != nil {
			cs.LastTerminationState.Terminated = terminatedState(in.Runtime, prev, in.Messages[prev.ID])
		}
	}
	f := false
	if cs.Started == nil {
		cs.Started = &f
	}

	w, ok := in.Errors[c.Name]
	if !ok && in.Actions != nil {
		w, ok = in.Actions.Waiting[c.Name]
	}
	if ok && (cur == nil || cur.State != engine.StateRunning) {
		if cs.State.Terminated != nil {
			cs.LastTerminationState.Terminated = cs.State.Terminated
			cs.State.Terminated = nil
		}
		reason := w.Reason
		if reason == reasonContainerCreating {
			// The pod is not set up yet (a service account token, say):
			// its containers wait with the default reason, as the
			// kubelet's do while it cannot set up a pod's volumes.
			reason = defaultWaitingReason(in.Pod)
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: w.Message}
	}
	return cs
}

// reasonContainerCreating is the waiting reason of a container not made
// yet.
const reasonContainerCreating = "ContainerCreating"

// defaultWaitingReason is why a container not made yet waits, as the
// kubelet's default waiting state: every container of a pod with init
// containers (init containers too) is PodInitializing until it has run.
func defaultWaitingReason(pod *v1.Pod) string {
	if len(pod.Spec.InitContainers) > 0 {
		return "PodInitializing"
	}
	return reasonContainerCreating
}

// terminatedState is the terminated state of the finished run c; its
// message is the runtime's (why the container could not start), then
// msg, what the container left (its termination message), as the kubelet
// joins them.
func terminatedState(runtime string, c *engine.Container, msg string) *v1.ContainerStateTerminated {
	t := &v1.ContainerStateTerminated{
		ExitCode:    int32(c.ExitCode),
		StartedAt:   metav1.NewTime(c.StartedAt),
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: runtime + "://" + c.ID,
		Message:     c.Message,
	}
	if msg != "" {
		if t.Message != "" {
			t.Message += ": "
		}
		t.Message += msg
	}
	switch {
	case c.OOMKilled:
		t.Reason = "OOMKilled"
	case c.ExitCode == 0 && c.State == engine.StateExited:
		t.Reason = "Completed"
	case c.State == engine.StateUnknown:
		t.Reason = "Unknown"
	default:
		t.Reason = "Error"
	}
	return t
}

// previousRun is the run of name before cur that has ended: an older
// attempt still running (stopping while cur was made) has no termination
// to report yet.
func previousRun(state *podState, name string, cur *engine.Container) *engine.Container {
	for _, c := range state.Containers {
		if c.State == engine.StateRunning || c.State == engine.StateCreated {
			continue
		}
		if c.Name == name && c != cur && c.Attempt < cur.Attempt {
			return c
		}
	}
	return nil
}

// podPhase follows the kubelet's getPhase, with its ContainerRestartRules
// branch (restartrules.go): from the container statuses alone. initialized
// says whether an app container of the latest sandbox exists (the
// kubelet's HasAnyActiveRegularContainerStarted): a sidecar that restarts
// after that does not make the pod Pending again.
//
// terminal says the pod is being deleted and its containers were stopped
// (the kubelet's podIsTerminal): none will run again, whatever the restart
// policy, so all stopped is Succeeded when they all exited 0, else Failed.
func podPhase(pod *v1.Pod, s *v1.PodStatus, initialized, terminal bool) v1.PodPhase {
	// Regular init containers: one that runs, or waits and has never
	// ended, is pending; one that failed and will not run again fails the
	// pod.
	var pendingInits, failedForGood int
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(c) {
			continue
		}
		st := s.InitContainerStatuses[i]
		last := st.State.Terminated
		switch {
		case st.State.Running != nil:
			pendingInits++
		case last == nil && st.State.Waiting != nil:
			if last = st.LastTerminationState.Terminated; last != nil {
				break
			}
			// Initialisation may have finished before the init
			// container's record was collected: app containers exist,
			// so it did. One with a record that waits is to run again
			// (in a new sandbox): the pod is Pending, whatever ran
			// before.
			if st.ContainerID == "" && anyAppStarted(s) {
				continue
			}
			pendingInits++
		case last == nil:
			pendingInits++
		}
		if last != nil && (last.ExitCode != 0 || last.Reason == "OOMKilled") && !RestartsAfterExit(pod, c, int(last.ExitCode)) {
			failedForGood++
		}
	}
	// stoppedForGood: stopped containers that their restart policy and
	// rules (restartrules.go) will not run again.
	var running, waiting, stopped, stoppedForGood, succeeded int
	// Sidecars (restartable init containers), as getPhase counts them: one
	// running counts as running (the pod stays Running while a sidecar
	// outlives the app containers); one waiting that has never ended
	// counts as waiting; a sidecar that is not started yet keeps a pod
	// that was never initialized Pending. Stopped ones do not count.
	pendingSidecars := 0
	for i := range pod.Spec.InitContainers {
		if !isSidecar(&pod.Spec.InitContainers[i]) {
			continue
		}
		st := s.InitContainerStatuses[i]
		switch {
		case st.State.Running != nil:
			if st.Started == nil || !*st.Started {
				pendingSidecars++
			}
			running++
		case st.State.Waiting != nil && st.LastTerminationState.Terminated == nil:
			pendingSidecars++
			waiting++
		}
	}
	for i, st := range s.ContainerStatuses {
		var last *v1.ContainerStateTerminated
		switch {
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			last = st.State.Terminated
			if last.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if last = st.LastTerminationState.Terminated; last == nil {
				waiting++
			}
		}
		if last != nil {
			stopped++
			if !RestartsAfterExit(pod, &pod.Spec.Containers[i], int(last.ExitCode)) {
				stoppedForGood++
			}
		}
	}
	switch {
	case failedForGood > 0:
		return v1.PodFailed
	case pendingInits > 0, pendingSidecars > 0 && !initialized, waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		switch {
		case terminal && stopped == succeeded:
			return v1.PodSucceeded
		case terminal:
			return v1.PodFailed
		case stopped != stoppedForGood:
			// At least one is restarting.
			return v1.PodRunning
		case stopped == succeeded:
			return v1.PodSucceeded
		default:
			return v1.PodFailed
		}
	}
	return v1.PodPending
}

// isStaticPod reports whether pod is a static pod: one from a file or a URL
// (kubernetes.io/config.source), not from the apiserver.
func isStaticPod(pod *v1.Pod) bool {
	switch pod.Annotations[manifest.AnnotationConfigSource] {
	case manifest.ConfigSourceFile, manifest.ConfigSourceHTTP:
		return true
	}
	return false
}

// appsInSandbox reports whether an app container of the pod exists in the
// sandbox sandboxID (any state): the kubelet's
// HasAnyActiveRegularContainerStarted, its podHasInitialized.
func appsInSandbox(pod *v1.Pod, state *podState, sandboxID string) bool {
	if sandboxID == "" {
		return false
	}
	for i := range pod.Spec.Containers {
		if state.latest(pod.Spec.Containers[i].Name, sandboxID) != nil {
			return true
		}
	}
	return false
}

func anyAppStarted(s *v1.PodStatus) bool {
	for _, st := range s.ContainerStatuses {
		if st.ContainerID != "" {
			return true
		}
	}
	return false
}

// reasonPodCompleted is the kubelet's reason of the Ready, ContainersReady
// and Initialized conditions of a Succeeded pod.
const reasonPodCompleted = "PodCompleted"

// reasonContainersNotReady is the kubelet's reason of a Ready or
// ContainersReady condition that is false.
const reasonContainersNotReady = "ContainersNotReady"

// podConditions computes PodScheduled, PodReadyToStartContainers,
// Initialized, ContainersReady and Ready, keeping each condition's transition
// time while its status holds.
func podConditions(pod *v1.Pod, s *v1.PodStatus, sb *engine.Sandbox, prev *v1.PodStatus, now time.Time) []v1.PodCondition {
	// The init containers not done, and the containers not ready, by name
	// for the conditions' messages, as the kubelet's generate.go.
	var incomplete, unready []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := s.InitContainerStatuses[i]
		if isSidecar(c) {
			if (st.Started == nil || !*st.Started) && !anyAppStarted(s) {
				incomplete = append(incomplete, c.Name)
			}
			// A sidecar's readiness counts for the pod's, as an app
			// container's does (the kubelet, since sidecars).
			if !st.Ready {
				unready = append(unready, c.Name)
			}
			continue
		}
		if t := st.State.Terminated; (t == nil || t.ExitCode != 0) && !anyAppStarted(s) {
			incomplete = append(incomplete, c.Name)
		}
	}
	for _, st := range s.ContainerStatuses {
		if !st.Ready {
			unready = append(unready, st.Name)
		}
	}
	initialized, ready := len(incomplete) == 0, len(unready) == 0 && len(s.ContainerStatuses) > 0
	readyReason, readyMessage := reasonContainersNotReady, ""
	if len(unready) > 0 {
		readyMessage = fmt.Sprintf("containers with unready status: %s", unready)
	}
	// A finished pod is not ready, whatever its containers were, with the
	// kubelet's reason for its phase (generate.go
	// generateContainersReadyConditionForTerminalPhase).
	switch s.Phase {
	case v1.PodSucceeded:
		ready = false
		readyReason, readyMessage = reasonPodCompleted, ""
	case v1.PodFailed:
		ready = false
		readyReason, readyMessage = "PodFailed", ""
	}
	cond := func(t v1.PodConditionType, ok bool, reason, message string) v1.PodCondition {
		// Each condition the kubelet owns says which generation of the
		// spec it reflects (PodObservedGenerationTracking, on by default
		// since 1.34: podutil.CalculatePodConditionObservedGeneration).
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(now),
			ObservedGeneration: pod.Generation}
		if ok {
			c.Status = v1.ConditionTrue
		} else {
			c.Reason, c.Message = reason, message
		}
		if prev != nil {
			for _, p := range prev.Conditions {
				if p.Type == t && p.Status == c.Status {
					c.LastTransitionTime = p.LastTransitionTime
				}
			}
		}
		return c
	}
	sandboxReady := sb != nil && sb.State == engine.StateRunning
	initCond := cond(v1.PodInitialized, initialized, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: %s", incomplete))
	if s.Phase == v1.PodSucceeded {
		// A Succeeded pod is initialized, with the reason that says why
		// (generate.go GeneratePodInitializedCondition).
		initCond = cond(v1.PodInitialized, true, "", "")
		initCond.Reason = reasonPodCompleted
	}
	return []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, sandboxReady, "", ""),
		initCond,
		cond(v1.ContainersReady, ready, readyReason, readyMessage),
		cond(v1.PodReady, ready, readyReason, readyMessage),
		cond(v1.PodScheduled, true, "", ""),
	}
}
