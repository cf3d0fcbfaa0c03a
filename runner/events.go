package runner

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records what happens to pods as Kubernetes Events (client-go's
// record.EventRecorder is one; it rate-limits and aggregates them).
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// The kubelet's event reasons (pkg/kubelet/events), which tools match on.
const (
	eventPulling   = "Pulling"
	eventPulled    = "Pulled"
	eventCreated   = "Created"
	eventStarted   = "Started"
	eventKilling   = "Killing"
	eventFailed    = "Failed"
	eventUnhealthy = "Unhealthy"
	// eventFailedPostStartHook is both the warning that a postStart hook
	// failed and the message of the Killing that follows, as the kubelet's.
	eventFailedPostStartHook = "FailedPostStartHook"
	eventFailedPreStopHook   = "FailedPreStopHook"
	// eventLifecycleHTTPFallback is the kubelet's warning of an HTTPS hook
	// that passed over HTTP.
	eventLifecycleHTTPFallback = "LifecycleHTTPFallback"
	// eventProbeWarning is the kubelet's ContainerProbeWarning.
	eventProbeWarning = "ProbeWarning"
)

// containerRef is the reference events of container name of pod are about,
// with the field path the kubelet gives them.
func containerRef(pod *v1.Pod, name string) *v1.ObjectReference {
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion}
	if name == "" {
		return ref
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", name)
			return ref
		}
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", name)
	return ref
}

// event records an event of container (or, with "", of the pod); a
// Runner without Config.Events records none.
func (r *Runner) event(pod *v1.Pod, container, eventtype, reason, format string, args ...any) {
	if r.cfg.Events == nil || pod == nil {
		return
	}
	r.cfg.Events.Event(containerRef(pod, container), eventtype, reason, fmt.Sprintf(format, args...))
}

// probeFailed records the kubelet's Unhealthy event of a failed probe.
func (r *Runner) probeFailed(uid, container, probeType, message string) {
	r.probeEvent(uid, container, eventUnhealthy, probeType+" probe failed: "+message)
}

// probeErrored records the kubelet's Unhealthy event of a probe run that
// could not be made.
func (r *Runner) probeErrored(uid, container, probeType, message string) {
	r.probeEvent(uid, container, eventUnhealthy, probeType+" probe errored and resulted in unknown state: "+message)
}

// probeWarned records the kubelet's ProbeWarning event of a probe that
// passed with a warning (an HTTP redirect to another host, not followed).
func (r *Runner) probeWarned(uid, container, probeType, message string) {
	r.probeEvent(uid, container, eventProbeWarning, probeType+" probe warning: "+message)
}

// probeEvent records a Warning event of a probe of the pod's container.
func (r *Runner) probeEvent(uid, container, reason, message string) {
	if r.cfg.Events == nil {
		return
	}
	r.mu.Lock()
	p := r.status[uid]
	r.mu.Unlock()
	if p != nil {
		r.event(p, container, v1.EventTypeWarning, reason, "%s", message)
	}
}
