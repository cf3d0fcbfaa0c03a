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

// backoffKey names one container of one pod at one spec: an edit of the
// container starts a fresh back-off, as it does in the kubelet.
func backoffKey(pod *v1.Pod, c *v1.Container) string {
	return string(pod.UID) + "/" + c.Name + "/" + ContainerHash(c)
}
