package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// TestCrashLoopBackOffMessage: the waiting message names the pod as the
// kubelet's doBackOff does (format.Pod: name_namespace(uid)), which is what
// kubectl shows for a crash-looping container.
func TestCrashLoopBackOffMessage(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	bo := newBackoff(clk)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &pod.Spec.Containers[0]
	st := newState(pod).sandbox("s", 0, engine.StateRunning).build()
	st.Containers = []*engine.Container{{ID: "a", SandboxID: "s", Name: "a", State: engine.StateExited, ExitCode: 1,
		Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c), CreatedAt: t0, StartedAt: t0, FinishedAt: t0}}
	bo.Next(backoffKey(pod, c), t0.Add(-time.Second))
	w, held := inBackoff(pod, c, st.Containers[0], bo)
	if !held {
		t.Fatal("not held in back-off")
	}
	if want := "back-off 10s restarting failed container=a pod=p-node_default(uid-1)"; w.Message != want {
		t.Errorf("message %q, want %q", w.Message, want)
	}
}
