package runner_test

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// TestErroredProbeIsAnUnhealthyEvent: a probe that cannot be run (here the
// runtime fails the exec) is an Unhealthy warning naming the error, as the
// kubelet's prober records ("... probe errored and resulted in unknown
// state: ..."), so that a user sees why a container never gets ready.
func TestErroredProbeIsAnUnhealthyEvent(t *testing.T) {
	fake := newFake(t)
	fake.SetExecHandler(func(string, []string) (int, []byte, error) {
		return 0, nil, errors.New("exec is broken")
	})
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].ReadinessProbe = everySecond("ready")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	events.wait(t, h, "default/p-node1 spec.containers{a} Warning Unhealthy: Readiness probe errored and resulted in unknown state: ")
	events.wait(t, h, "exec is broken")
}
