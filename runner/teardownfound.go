package runner

import (
	"context"
	"time"
)

// Found is what the runtime had of a teardown target when its teardown
// began.
type Found struct {
	// OnNode says the runtime had objects of the target's pod: its UID,
	// labelled with its namespace/name.
	OnNode bool
	// Namesakes are the other pods of the target's namespace/name on the
	// node (of other UIDs: from another manifest path), which the
	// teardown leaves alone, sorted by UID.
	Namesakes []Namesake
}

// Namesake is a pod of another UID with a pod's namespace/name.
type Namesake struct {
	UID string
	// Source is the manifest its sandbox recorded ("" when none did).
	Source string
}

// TeardownPodsFound is TeardownPods, with done told what the runtime had
// of each target (found from the same list): `podrun down` says which
// pods it removed and which were not there.
func (r *Runner) TeardownPodsFound(ctx context.Context, targets []TeardownTarget, grace time.Duration,
	done func(TeardownTarget, Found, error)) {
	pods, err := r.listForTeardown(ctx)
	if err != nil {
		for _, t := range targets {
			done(t, Found{}, err)
		}
		return
	}
	found := make(map[string]Found, len(targets))
	for _, t := range targets {
		var f Found
		if t.Pod != nil {
			f.OnNode = namedAs(pods[t.UID], t.Pod.Namespace, t.Pod.Name)
			for _, uid := range sortedKeys(namesakes(pods, t.UID, t.Pod.Namespace, t.Pod.Name)) {
				f.Namesakes = append(f.Namesakes, Namesake{UID: uid, Source: sourceOf(pods[uid])})
			}
		} else {
			f.OnNode = pods[t.UID] != nil
		}
		found[t.UID] = f
	}
	r.teardownEach(ctx, pods, targets, grace, func(t TeardownTarget, err error) { done(t, found[t.UID], err) })
}
