package runner

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pod the API deletes is reported, before the API object is released,
// with how its containers really ended (exit code, reason, startedAt,
// finishedAt), as the kubelet's status manager reports a terminated pod
// from the runtime's state before it lets the pod go. podrun removes a
// pod's containers with the pod, so the worker stops them first, reads
// their end from the runtime, publishes that, and only then removes them;
// the Runner keeps that last status (FinalPod) until the pod's source
// drops the pod.

// stopForFinalStatus stops the running containers of pod, which the API
// is deleting, within grace, and publishes the pod's status as the
// runtime then shows it. It returns the state after the stop (st when it
// could not be read), for the teardown.
func (w *podWorker) stopForFinalStatus(ctx context.Context, pod *v1.Pod, st *podState, grace time.Duration) *podState {
	r := w.r
	if st == nil || len(st.Containers) == 0 {
		return st
	}
	if errs := r.stopPodContainers(ctx, pod, st, grace, ""); len(errs) > 0 && ctx.Err() == nil {
		r.log.Warn("stop a deleted pod's containers", "pod", podKey(pod), "err", errors.Join(errs...))
	}
	after, err := r.cache.refresh(ctx, w.uid)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("read a deleted pod's containers", "pod", podKey(pod), "err", err)
		}
		return st
	}
	out := pod.DeepCopy()
	out.Status = computePodStatus(statusInput{
		Pod: pod, State: after, HostIP: r.cfg.HostIP, Runtime: r.cfg.RuntimeName, Previous: r.previousStatus(w.uid),
		Now: r.clock.Now(), Messages: w.terminationMessages(ctx, pod, after), Terminated: true,
	})
	r.publish(out, false, true, after)
	return after
}

// FinalPod returns the last status of a pod the runner stopped and removed
// because the API deleted it, until its source drops the pod (the API
// object is gone).
func (r *Runner) FinalPod(uid types.UID) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.final[string(uid)]
	return p, ok
}
