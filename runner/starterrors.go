package runner

import (
	"errors"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// startError is why a container could not start (shown as its waiting
// reason), and until when its next start is held back.
type startError struct {
	waiting
	at, until time.Time
	// hash is the ContainerHash of the spec that failed: an edit is a new
	// container to the kubelet (a new pod, for a static one), which
	// another spec's failure does not hold back.
	hash string
}

// admitRetry is how soon a pod refused admission (low disk) is asked again:
// not an exponential back-off, so that it starts soon after space is freed.
const admitRetry = 10 * time.Second

// errImagePullShown is how long a failed pull shows as ErrImagePull before
// its back-off shows as ImagePullBackOff, as the kubelet's next sync would.
const errImagePullShown = 2 * time.Second

// errorReason classifies why a container could not be started.
func errorReason(err error) string {
	var ce *configError
	var ie *imageError
	if reason, ok := AdmitReason(err); ok {
		return reason
	}
	switch {
	case errors.As(err, &ie):
		return ie.reason
	case errors.As(err, &ce):
		return "CreateContainerConfigError"
	case errors.As(err, new(*hookError)):
		return "PostStartHookError"
	}
	return reasonRunContainerError
}

// reasonRunContainerError is a start the engine refused for a reason of
// its own (not the image, the pod's config or admission).
const reasonRunContainerError = "RunContainerError"

// recordStartError remembers why name did not start, with image-pull style
// back-off before the next try.
func (w *podWorker) recordStartError(pod *v1.Pod, c *v1.Container, err error) {
	r := w.r
	now := r.clock.Now()
	reason := errorReason(err)
	w.mu.Lock()
	// What the configuration waited for (an object, the Services) came
	// while this sync made it without: no back-off, the sync its arrival
	// asked for starts the container.
	arrived := reason == reasonCreateContainerConfigError && w.configGen != w.syncConfigGen
	w.mu.Unlock()
	until := now
	switch _, refused := AdmitReason(err); {
	case arrived:
	case refused:
		until = now.Add(admitRetry)
	default:
		key := startBackoffKey(pod, c)
		r.backoff.Next(key, now)
		until = now.Add(r.backoff.Get(key))
	}
	w.mu.Lock()
	w.errs[c.Name] = startError{waiting: waiting{Reason: reason, Message: err.Error()}, at: now, until: until, hash: ContainerHash(c)}
	w.mu.Unlock()
	r.event(pod, c.Name, v1.EventTypeWarning, eventFailed, "Error: %s: %v", reason, err)
}

// shownErrors are the start errors as the pod status shows them: a failed
// pull is ErrImagePull at first, then ImagePullBackOff while it waits.
func (w *podWorker) shownErrors() map[string]waiting {
	now := w.r.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]waiting, len(w.errs))
	for name, e := range w.errs {
		shown := e.waiting
		if shown.Reason == reasonErrImagePull && now.Sub(e.at) >= errImagePullShown && now.Before(e.until) {
			shown.Reason = reasonImagePullBackOff
		}
		out[name] = shown
	}
	return out
}

// nextRetry is how long until a start error's back-off ends, or until a
// failed pull should show as ImagePullBackOff; 0 if nothing waits.
func (w *podWorker) nextRetry() time.Duration {
	now := w.r.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Duration
	soonest := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, e := range w.errs {
		soonest(e.until.Sub(now))
		if e.Reason == reasonErrImagePull {
			soonest(e.at.Add(errImagePullShown).Sub(now))
		}
	}
	return next
}

// clearStartErrors forgets the start errors of reason, so that their
// containers are tried at the next chance.
func (w *podWorker) clearStartErrors(reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, e := range w.errs {
		if e.Reason == reason {
			delete(w.errs, name)
		}
	}
}

func (w *podWorker) clearStartError(name string) {
	w.mu.Lock()
	delete(w.errs, name)
	w.mu.Unlock()
}

// holdStart reports whether c must not be started yet, after a failure of
// its spec. A held image pull shows as ImagePullBackOff, as in the kubelet.
func (w *podWorker) holdStart(c *v1.Container) bool {
	hash := ContainerHash(c)
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.errs[c.Name]
	return ok && e.hash == hash && w.r.clock.Now().Before(e.until)
}

// allHeld reports whether a starts containers and every one of them must
// not start yet, after a failure that a new sandbox does not end (not a
// RunContainerError: applyActions clears those when it makes one).
func (w *podWorker) allHeld(a *podActions) bool {
	starts := slices.Concat(a.StartApps, a.StartEphemeral, a.initStarts())
	if len(starts) == 0 {
		return false
	}
	hashes := make([]string, len(starts))
	for i, c := range starts {
		hashes[i] = ContainerHash(c)
	}
	now := w.r.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range starts {
		e, ok := w.errs[c.Name]
		if !ok || e.hash != hashes[i] || !now.Before(e.until) || e.Reason == reasonRunContainerError {
			return false
		}
	}
	return true
}

// startBackoffKey names the back-off of c's failed starts (pulls, configs),
// beside its crash-loop back-off.
func startBackoffKey(pod *v1.Pod, c *v1.Container) string {
	return backoffKey(pod, c) + "/start"
}
