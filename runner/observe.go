package runner

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
)

// Observe rebuilds this node's pods from the runtime alone, with no
// manifest: what `podrun ps` shows while no podrun daemon runs. Containers
// are known by the names and types their labels carry (init containers in
// the order they began, app containers by name); restart policies are
// not, so the phase is the one a pod that restarts its containers would
// have, but for a pod whose sandbox is stopped: finished, Succeeded when
// its app containers all exited 0, else Failed.
func Observe(ctx context.Context, rt engine.Runtime, runtimeName string) ([]*v1.Pod, error) {
	return ObserveWithClock(ctx, rt, runtimeName, clock.RealClock{})
}

// ObserveWithClock is Observe with the statuses computed at clk's time.
func ObserveWithClock(ctx context.Context, rt engine.Runtime, runtimeName string, clk clock.PassiveClock) ([]*v1.Pod, error) {
	states, err := listPods(ctx, rt)
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Pod, 0, len(states))
	for uid, st := range states {
		pod := &v1.Pod{}
		pod.UID = types.UID(uid)
		ref := engine.PodRef{UID: uid}
		switch {
		case len(st.Sandboxes) > 0:
			ref = st.Sandboxes[0].Pod
		case len(st.Containers) > 0:
			ref = st.Containers[0].Pod
		}
		pod.Name, pod.Namespace = ref.Name, ref.Namespace
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
		// Oldest first, so containers are listed in the order they began.
		seen := map[string]bool{}
		for i := len(st.Containers) - 1; i >= 0; i-- {
			c := st.Containers[i]
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			spec := v1.Container{Name: c.Name, Image: c.Image}
			switch c.Type {
			case engine.ContainerTypeInit:
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, spec)
			case engine.ContainerTypeEphemeral:
				pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
					v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon(spec)})
			default:
				pod.Spec.Containers = append(pod.Spec.Containers, spec)
			}
		}
		// App containers by name, the order of the kubelet's container
		// statuses: the runtime's creation times (Docker's are in seconds)
		// cannot order containers started together.
		sort.Slice(pod.Spec.Containers, func(i, j int) bool {
			return pod.Spec.Containers[i].Name < pod.Spec.Containers[j].Name
		})
		if len(st.Sandboxes) > 0 {
			pod.CreationTimestamp = metav1.NewTime(st.Sandboxes[len(st.Sandboxes)-1].CreatedAt)
		}
		pod.Status = computePodStatus(statusInput{Pod: pod, State: st, Runtime: runtimeName, Now: clk.Now()})
		// The spec's resources are unknown here: the class is the one
		// kept with the sandbox ("" for one made before podrun kept it).
		pod.Status.QOSClass = ""
		if sb := st.latestSandbox(); sb != nil {
			pod.Status.QOSClass = v1.PodQOSClass(sb.QOSClass)
		}
		if sb := st.latestSandbox(); sb == nil || sb.State != engine.StateRunning {
			// Without a sandbox nothing runs: say so, whatever the
			// containers' records. A pod whose app containers all
			// exited 0 is done, as a finished pod's sandbox is stopped:
			// a Never or OnFailure job that Succeeded.
			if pod.Status.Phase == v1.PodRunning {
				pod.Status.Phase = v1.PodFailed
				if allSucceeded(pod.Status.ContainerStatuses) {
					pod.Status.Phase = v1.PodSucceeded
				}
			}
		}
		// The policy was assumed for the status only: it is not known.
		pod.Spec.RestartPolicy = ""
		out = append(out, pod)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// allSucceeded says whether there are app containers and each has
// terminated with exit code 0.
func allSucceeded(statuses []v1.ContainerStatus) bool {
	for _, cs := range statuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return len(statuses) > 0
}
