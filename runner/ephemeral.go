package runner

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// Ephemeral containers are added to a running pod through the API's
// pods/ephemeralcontainers subresource (a static pod cannot have them:
// the manifest package refuses them). As the kubelet, podrun starts each
// once in the pod's current sandbox, never restarts it, and never makes
// the pod's other containers or its sandbox again for it: they are in
// neither ContainerHash nor SandboxHash.

// ephemeralContainers are the pod's ephemeral containers, as containers.
func ephemeralContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out = append(out, (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// computeEphemeralActions starts the ephemeral containers that have never
// run: one the runtime holds in any state, in any sandbox of the pod, has
// had its run (the kubelet's FindContainerStatusByName). Called only while
// the pod's latest sandbox runs: a pod made again does not run them again.
func computeEphemeralActions(pod *v1.Pod, state *podState, a *podActions) {
	for _, c := range ephemeralContainers(pod) {
		if state.latest(c.Name, "") == nil {
			a.StartEphemeral = append(a.StartEphemeral, c)
			a.because(c.Name, reasonNotCreated)
		}
	}
}

// ephemeralTarget is the targetContainerName of the ephemeral container
// name, or "".
func ephemeralTarget(pod *v1.Pod, name string) string {
	for i := range pod.Spec.EphemeralContainers {
		if ec := &pod.Spec.EphemeralContainers[i]; ec.Name == name {
			return ec.TargetContainerName
		}
	}
	return ""
}

// pidTarget is the ID of the running container whose PID namespace the
// ephemeral container c joins (its targetContainerName), or "" without a
// target. A target that does not run is an error: there is no namespace to
// join, and the next sync tries again.
func pidTarget(pod *v1.Pod, c *v1.Container, st *podState, sandboxID string) (string, error) {
	name := ephemeralTarget(pod, c.Name)
	if name == "" {
		return "", nil
	}
	t := st.latest(name, sandboxID)
	if t == nil || t.State != engine.StateRunning {
		return "", fmt.Errorf("target container %q of ephemeral container %q is not running", name, c.Name)
	}
	return t.ID, nil
}

// ephemeralStatuses are the statuses of the pod's ephemeral containers,
// computed as the others' (waiting, running, terminated). None is ever
// ready: the kubelet's prober, which sets readiness, does not look at
// them, and they count for nothing in the pod's conditions or phase.
func ephemeralStatuses(in statusInput, sandboxID string) []v1.ContainerStatus {
	var out []v1.ContainerStatus
	for _, c := range ephemeralContainers(in.Pod) {
		cs := containerStatus(in, c, sandboxID)
		cs.Ready = false
		out = append(out, cs)
	}
	return out
}
