package runner

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// removeLeftovers removes the containers of a.Remove, then the sandboxes
// of a.RemoveSandboxes, as computePodActions decided. One that is gone
// already is not an error. A sandbox is kept while a removal of one of its
// containers failed: a sandbox goes only once it is empty.
func (r *Runner) removeLeftovers(ctx context.Context, pod *v1.Pod, a *podActions, errs *[]error) {
	kept := map[string]bool{} // sandboxes with a container left
	for _, c := range a.Remove {
		r.probes.RemoveContainer(c.ID)
		if err := r.rt.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
			*errs = append(*errs, fmt.Errorf("remove %s: %w", c.Name, err))
			kept[c.SandboxID] = true
			continue
		}
		r.log.Info("container removed", "pod", podKey(pod), "container", c.Name, "id", shortID(c.ID),
			"attempt", c.Attempt, "state", string(c.State))
	}
	for _, sb := range a.RemoveSandboxes {
		if kept[sb.ID] {
			continue
		}
		if err := r.rt.RemoveSandbox(ctx, sb.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
			*errs = append(*errs, fmt.Errorf("remove sandbox %s: %w", shortID(sb.ID), err))
			continue
		}
		r.log.Info("sandbox removed", "pod", podKey(pod), "id", shortID(sb.ID), "attempt", sb.Attempt,
			"state", string(sb.State))
	}
}
