package runner

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Crash-loop and image-pull back-off as the kubelet's: 10 s doubling to 5 min,
// forgotten once a container has run for twice the maximum (10 min).
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
)

func newBackoff(clk clock.Clock) *flowcontrol.Backoff {
	return flowcontrol.NewFakeBackOff(backoffInitial, backoffMax, clk)
}

// backoffKey names one container of one pod at one spec, resources
// included: an edit of the container, or a change of its resources alone
// (a memory limit raised for a container OOM-killed in a loop), starts a
// fresh back-off, as the kubelet's GetBackoffKey, which covers
// container.Resources.
func backoffKey(pod *v1.Pod, c *v1.Container) string {
	return string(pod.UID) + "/" + c.Name + "/" + ContainerHash(c) + "/" + ResourcesHash(c)
}

// freshStartForEdits gives each container whose spec or resources changed
// from old to pod a fresh start, as the kubelet's static pods get one at
// every edit (an edit is a new pod, of a new UID, to it): no crash-loop or
// start back-off, and no start error, of before. backoffKey alone gives that
// only to a spec never seen before: the edit that puts back a spec that
// ran before (the revert of an image typo) would find that spec's old
// back-off, and the run podrun stopped for the typo would count as its
// crash, holding the fixed pod for up to 5 minutes. An edit of the
// sandbox's part of the spec makes the whole pod again: every container of
// it starts fresh (the new sandbox's starts keep the back-off of before,
// as the kubelet's do, only when the sandbox died).
func (w *podWorker) freshStartForEdits(old, pod *v1.Pod) {
	if old == nil {
		return
	}
	sandboxEdited := SandboxHash(old) != SandboxHash(pod)
	before := map[string]string{}
	for _, c := range allContainers(old) {
		before[c.Name] = ContainerHash(c) + "/" + ResourcesHash(c)
	}
	for _, c := range allContainers(pod) {
		if !sandboxEdited && before[c.Name] == ContainerHash(c)+"/"+ResourcesHash(c) {
			continue
		}
		// A container added again is edited too.
		w.r.backoff.Reset(backoffKey(pod, c))
		w.r.backoff.Reset(startBackoffKey(pod, c))
		w.clearStartError(c.Name)
	}
}
