package runner

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/engine"
)

// ReasonEvicted is the status reason of a pod evicted for node pressure.
const ReasonEvicted = "Evicted"

// evictionGrace is the grace period of an eviction at a hard threshold,
// the kubelet's immediateEvictionGracePeriodSeconds.
const evictionGrace = time.Second

// eviction marks a worker's pod as evicted: it stays stopped and Failed
// while its spec is the one it was evicted with (specKey).
type eviction struct {
	spec    string
	message string
	// emptied is set once the pod's emptyDirs are removed.
	emptied bool
}

// Evict stops the pod with uid and keeps it Failed, reason Evicted, with
// message, until its spec changes (an edit of its manifest makes it a new
// pod, as the kubelet would admit it again). It reports whether the runner
// holds that pod.
func (r *Runner) Evict(uid types.UID, message string) bool {
	r.mu.Lock()
	w := r.workers[string(uid)]
	if w != nil {
		// An evicted pod holds no host port nor extended resource: a new
		// spec of it is admitted again (set makes a new claim), as the
		// kubelet admits a pod anew.
		r.wakeLocked(r.ports.remove(string(uid)))
	}
	r.mu.Unlock()
	if w == nil {
		return false
	}
	w.mu.Lock()
	if w.removed {
		w.mu.Unlock()
		return false
	}
	w.evicted = &eviction{spec: specKey(w.pod), message: message}
	w.needNow = true
	w.mu.Unlock()
	w.wake(0)
	return true
}

// evictedMessage is why pod was evicted, when it is still the pod evicted.
func (w *podWorker) evictedMessage(pod *v1.Pod) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.evicted == nil {
		return "", false
	}
	if w.evicted.spec != specKey(pod) {
		w.evicted = nil
		w.renewed = true
		return "", false
	}
	return w.evicted.message, true
}

// specKey identifies what a pod runs: its sandbox and containers, by
// their hashes.
func specKey(pod *v1.Pod) string {
	parts := []string{SandboxHash(pod)}
	for _, c := range allContainers(pod) {
		parts = append(parts, ContainerHash(c))
	}
	return strings.Join(parts, ",")
}

// syncEvicted is the sync of an evicted pod: nothing of it runs, and its
// status is the kubelet's for an evicted pod: its containers' statuses as
// the runtime shows them, phase Failed with reason Evicted and the
// message (once nothing of it runs: holdTerminalPhase), and the
// DisruptionTarget condition the eviction manager adds, sent with the
// terminal phase as the status manager's mergePodStatus sends it.
func (w *podWorker) syncEvicted(ctx context.Context, pod *v1.Pod, st *podState, message string) (*podActions, bool, error) {
	r := w.r
	prev := r.previousStatus(w.uid)
	status := computePodStatus(statusInput{
		Pod: pod, State: st, HostIP: r.cfg.HostIP, Probes: r.probes, Runtime: r.cfg.RuntimeName, Previous: prev,
		Now: r.clock.Now(), Messages: w.terminationMessages(ctx, pod, st),
		FailedReason: ReasonEvicted, FailedMessage: message,
	})
	if status.Phase == v1.PodFailed {
		disruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: "TerminationByKubelet", Message: message, LastTransitionTime: metav1.NewTime(r.clock.Now()),
			ObservedGeneration: pod.Generation}
		if prev != nil {
			for _, c := range prev.Conditions {
				if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
					disruption.LastTransitionTime = c.LastTransitionTime
				}
			}
		}
		status.Conditions = append(status.Conditions, disruption)
	}
	a, did, err := w.stopAsFailed(ctx, pod, st, evictionGrace, "pod evicted", status)
	// The status published is of the state before the stop (its phase
	// held, not Failed, while a container ran): the emptyDirs go in the
	// sync that finds nothing left to stop and publishes Failed Evicted.
	if err == nil && !did {
		w.emptyEvicted(pod)
	}
	return a, did, err
}

// emptyEvicted removes the emptyDirs of the evicted pod, its containers
// stopped, as the kubelet tears down the volumes of a terminated pod (and
// the disk it was evicted for, often, is theirs); once per eviction. An
// edit that runs it again makes them anew, empty.
func (w *podWorker) emptyEvicted(pod *v1.Pod) {
	w.mu.Lock()
	ev := w.evicted
	done := ev == nil || ev.emptied
	w.mu.Unlock()
	if done {
		return
	}
	if err := removeEmptyDirs(w.r.cfg.RootDir, w.uid); err != nil {
		w.r.log.Warn("emptyDirs of an evicted pod not removed", "pod", podKey(pod), "err", err)
		return
	}
	w.r.log.Info("removed the emptyDirs of an evicted pod", "pod", podKey(pod))
	w.mu.Lock()
	ev.emptied = true
	w.mu.Unlock()
}

// EvictedPods returns the UIDs of the pods evicted (and not edited since):
// container GC removes all their dead containers and sandboxes.
func (r *Runner) EvictedPods() map[string]bool {
	r.mu.Lock()
	workers := make([]*podWorker, 0, len(r.workers))
	for _, w := range r.workers {
		workers = append(workers, w)
	}
	r.mu.Unlock()
	out := map[string]bool{}
	for _, w := range workers {
		w.mu.Lock()
		if w.evicted != nil {
			out[w.uid] = true
		}
		w.mu.Unlock()
	}
	return out
}

// stopAsFailed stops everything of the pod that runs, within grace, and
// publishes status (a Failed one): a pod the node refused or evicted.
func (w *podWorker) stopAsFailed(ctx context.Context, pod *v1.Pod, st *podState, grace time.Duration, why string, status v1.PodStatus) (*podActions, bool, error) {
	r := w.r
	r.probes.RemovePod(w.uid)
	a := &podActions{}
	for _, sb := range st.Sandboxes {
		a.KillPod = a.KillPod || (sb.State != engine.StateExited && sb.State != engine.StateCreated)
	}
	a.KillPod = a.KillPod || len(runningContainers(st)) > 0
	var err error
	if a.KillPod {
		if err = r.killPod(ctx, pod, st, nil, grace, why); err != nil && ctx.Err() == nil {
			r.log.Warn("stop pod", "pod", podKey(pod), "reason", status.Reason, "err", err)
		}
	}
	out := pod.DeepCopy()
	status.ObservedGeneration = pod.Generation
	status.HostIP = r.cfg.HostIP
	if r.cfg.HostIP != "" {
		status.HostIPs = []v1.HostIP{{IP: r.cfg.HostIP}}
	}
	out.Status = status
	r.publish(out, false, !a.KillPod, st)
	return a, a.KillPod, err
}
