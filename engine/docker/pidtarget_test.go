package docker

import (
	"strings"
	"testing"

	"github.com/podrun/podrun/engine"
)

// TestPIDTarget: a container with PIDTarget (an ephemeral container's
// targetContainerName) is in its target's PID namespace: the target's
// process is its PID 1.
func TestPIDTarget(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	target := p.run(&engine.ContainerConfig{Name: "target", Command: []string{"sleep", "3603"}})
	out, _, _ := p.output(&engine.ContainerConfig{Name: "debug", Type: engine.ContainerTypeEphemeral, PIDTarget: target,
		Command: []string{"sh", "-c", "tr '\\0' ' ' </proc/1/cmdline; echo"}})
	if !strings.Contains(out, "sleep 3603") {
		t.Errorf("PID 1 of a container targeting another: %q, want the target's sleep 3603", out)
	}
}
