package runner

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// Keeping the files of a running pod's volumes current, as the kubelet's
// volume manager does at its syncs: an edited ConfigMap or Secret, a
// label or annotation a downwardAPI file shows, a service account token
// at 80 % of its life. Env from ConfigMaps and Secrets is never changed in
// a running container, and a subPath mount keeps the file it bound when
// its container started (both as in the kubelet).

// volumeState is what a pod worker knows of the files of its pod's
// generated volumes (configMap, secret, downwardAPI, projected).
type volumeState struct {
	mu sync.Mutex
	// gen counts the changes of the objects the pod refers to; the files
	// were last written at writtenGen, for the pod writtenFor (nil: not
	// by this worker yet, so after a podrun restart they are rewritten,
	// with new tokens, at the first sync).
	gen, writtenGen uint64
	writtenFor      *v1.Pod
	// refreshAt is when the first token in the files must be replaced
	// (zero: no token).
	refreshAt time.Time
	// After a rewrite of a running pod's files that failed, the next is
	// held back until retryAt; failures counts those in a row.
	retryAt  time.Time
	failures int
}

// Back-off of a running pod's volume rewrites that fail (a token the
// apiserver does not give now, a ConfigMap deleted): an edit of an object
// the pod refers to ends it.
const (
	volumeRetryMin = 5 * time.Second
	volumeRetryMax = 2 * time.Minute
)

// eventFailedMount is the kubelet's event of a volume it could not set up.
const eventFailedMount = "FailedMount"

// preparesVolumes reports whether applying a makes the pod's volumes ready
// itself (a sandbox to make, containers to start).
func (a *podActions) preparesVolumes() bool {
	return a.CreateSandbox || a.startsInit() || len(a.StartApps) > 0 || len(a.StartEphemeral) > 0
}

// prepareVolumes makes every volume of the pod ready: its image volumes
// (prepareImageVolumes), then the others (prepareVolumes) with the tokens
// of Config.Tokens, and records what their files now hold.
func (w *podWorker) prepareVolumes(ctx context.Context, pod *v1.Pod, pe podEnv) (map[string]volumeSource, error) {
	r := w.r
	gen := w.volumeGen()
	imgs, err := r.prepareImageVolumes(ctx, pod)
	if err != nil {
		return nil, err
	}
	tf := newTokenFetch(ctx, r.cfg.Tokens, pod, r.clock.Now)
	pe.Token = tf.tokenFunc()
	vols, err := prepareVolumes(pod, podDir(r.cfg.RootDir, string(pod.UID)), r.cfg.Objects, pe)
	if err != nil {
		return nil, err
	}
	w.volumesWritten(pod, gen, tf.refresh())
	for name, src := range imgs {
		vols[name] = src
	}
	return vols, nil
}

// refreshVolumes rewrites the files of the generated volumes of a running
// pod when they may be out of date: an object the pod refers to changed,
// the pod did (downwardAPI files), a token is due, or this worker has not
// written them yet. Nothing is done when applying a prepares the volumes
// anyway, or when the pod's sandbox does not run (not made yet, being
// replaced, or the pod is done). A failure keeps the files that were, is
// logged with the kubelet's FailedMount event, and is tried again with
// back-off; the containers keep running.
func (w *podWorker) refreshVolumes(ctx context.Context, pod *v1.Pod, st *podState, a *podActions) {
	r := w.r
	if a.KillPod || a.preparesVolumes() || !hasGeneratedVolumes(pod) {
		return
	}
	sb := st.latestSandbox()
	if sb == nil || sb.State != engine.StateRunning {
		return
	}
	now := r.clock.Now()
	gen, due := w.volumesDue(pod, now)
	if !due {
		return
	}
	tf := newTokenFetch(ctx, r.cfg.Tokens, pod, r.clock.Now)
	pe := r.podEnv(pod, sb)
	pe.Token = tf.tokenFunc()
	if err := refreshVolumeFiles(pod, podDir(r.cfg.RootDir, string(pod.UID)), r.cfg.Objects, pe); err != nil {
		if ctx.Err() != nil {
			return
		}
		delay := w.volumesFailed(now)
		r.log.Warn("volume files not refreshed", "pod", podKey(pod), "retry", delay, "err", err)
		r.event(pod, "", v1.EventTypeWarning, eventFailedMount, "MountVolume.SetUp failed: %v", err)
		return
	}
	w.volumesWritten(pod, gen, tf.refresh())
	r.log.Debug("volume files refreshed", "pod", podKey(pod))
}

func (w *podWorker) volumeGen() uint64 {
	w.vols.mu.Lock()
	defer w.vols.mu.Unlock()
	return w.vols.gen
}

// volumesDue reports whether the pod's volume files are to be rewritten
// now, and the object generation a rewrite starting now is of.
func (w *podWorker) volumesDue(pod *v1.Pod, now time.Time) (uint64, bool) {
	v := &w.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	stale := v.writtenFor != pod || v.writtenGen != v.gen || !v.refreshAt.IsZero() && !now.Before(v.refreshAt)
	return v.gen, stale && !now.Before(v.retryAt)
}

// volumesWritten records that the files of pod's volumes were written at
// object generation gen, with tokens to replace at refreshAt.
func (w *podWorker) volumesWritten(pod *v1.Pod, gen uint64, refreshAt time.Time) {
	v := &w.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	v.writtenFor, v.writtenGen, v.refreshAt = pod, gen, refreshAt
	v.retryAt, v.failures = time.Time{}, 0
}

// volumesFailed records a rewrite that failed at now, and returns how
// long until the next.
func (w *podWorker) volumesFailed(now time.Time) time.Duration {
	v := &w.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	delay := volumeRetryMin << min(v.failures, 5)
	delay = min(delay, volumeRetryMax)
	v.failures++
	v.retryAt = now.Add(delay)
	return delay
}

// nextVolumeRefresh is how long until the pod's volume files are due to
// be rewritten (a token to replace, a failed rewrite to try again); 0 if
// nothing is.
func (w *podWorker) nextVolumeRefresh() time.Duration {
	now := w.r.clock.Now()
	v := &w.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	var ds []time.Duration
	if !v.refreshAt.IsZero() {
		ds = append(ds, v.refreshAt.Sub(now))
	}
	if !v.retryAt.IsZero() {
		ds = append(ds, v.retryAt.Sub(now))
	}
	return soonest(ds...)
}

// nextWake is how long until the worker must look at its pod again by
// itself: a start error's back-off ending, or volume files due.
func (w *podWorker) nextWake() time.Duration {
	return soonest(w.nextRetry(), w.nextVolumeRefresh())
}

// objectsChanged tells the worker that the ConfigMaps and Secrets changed
// changed. When its pod refers to one, the pod is synced now, as after a
// change of its spec: its volume files are rewritten, and containers that
// waited for a missing object (CreateContainerConfigError) are tried at
// once.
func (w *podWorker) objectsChanged(changed map[objectRef]bool) {
	pod, removed := w.desired()
	if removed || !refersToAny(pod, changed) {
		return
	}
	w.vols.mu.Lock()
	w.vols.gen++
	w.vols.retryAt, w.vols.failures = time.Time{}, 0
	w.vols.mu.Unlock()
	w.retryConfigErrorsNow()
}

// retryConfigErrorsNow: what the pod's containers' configuration waited
// for (an object, the Services) came. Their CreateContainerConfigErrors
// are forgotten and the pod synced as a new spec would be: at once,
// ending an error back-off.
func (w *podWorker) retryConfigErrorsNow() {
	w.clearStartErrors(reasonCreateContainerConfigError)
	w.mu.Lock()
	w.needNow = true
	w.configGen++
	w.mu.Unlock()
	w.signal()
}

// reasonCreateContainerConfigError is the waiting reason of a container
// that cannot be configured (configError).
const reasonCreateContainerConfigError = "CreateContainerConfigError"

func hasGeneratedVolumes(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if generatedVolume(&pod.Spec.Volumes[i]) {
			return true
		}
	}
	return false
}

// refersToAny reports whether the pod refers to one of the objects: in a
// volume (configMap, secret, their projections), in env or envFrom, or as
// an imagePullSecret.
func refersToAny(pod *v1.Pod, objs map[objectRef]bool) bool {
	if len(objs) == 0 {
		return false
	}
	cm := func(name string) bool { return objs[podRef(pod, false, name)] }
	secret := func(name string) bool { return objs[podRef(pod, true, name)] }
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.ConfigMap != nil && cm(vol.ConfigMap.Name),
			vol.Secret != nil && secret(vol.Secret.SecretName):
			return true
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if src.ConfigMap != nil && cm(src.ConfigMap.Name) || src.Secret != nil && secret(src.Secret.Name) {
					return true
				}
			}
		}
	}
	for _, c := range allContainers(pod) {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil && cm(from.ConfigMapRef.Name) || from.SecretRef != nil && secret(from.SecretRef.Name) {
				return true
			}
		}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && (f.ConfigMapKeyRef != nil && cm(f.ConfigMapKeyRef.Name) ||
				f.SecretKeyRef != nil && secret(f.SecretKeyRef.Name)) {
				return true
			}
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		if secret(ref.Name) {
			return true
		}
	}
	return false
}
