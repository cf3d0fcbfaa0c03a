package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/expansion"
	"github.com/podrun/podrun/health"
)

// annotationSource is where the manifest package records a pod's source.
const annotationSource = "podrun.io/source"

// Waiting reasons for images, as the kubelet's.
const (
	reasonErrImagePull      = "ErrImagePull"
	reasonImagePullBackOff  = "ImagePullBackOff"
	reasonErrImageNeverPull = "ErrImageNeverPull"
	reasonInvalidImageName  = "InvalidImageName"
)

// imageError is an image that could not be had.
type imageError struct {
	reason string
	err    error
}

func (e *imageError) Error() string { return e.err.Error() }
func (e *imageError) Unwrap() error { return e.err }

// applyActions carries out one sync's actions, in the kubelet's order: kill
// what must go (containers, then the sandboxes that must not run), remove
// leftovers, make the sandbox, then start containers. One step is taken
// early: the stop of a container whose name the sync also starts (an
// edit's old container) runs while its successor is made (splitKills).
// A container starts only once every stop of its name in the sync has
// ended well.
func (r *Runner) applyActions(ctx context.Context, pod *v1.Pod, st *podState, a *podActions, w *podWorker) (retErr error) {
	grace := GracePeriod(pod)
	if a.KillPod {
		if err := r.killPod(ctx, pod, st, a.AdoptSandbox, grace, a.KillReason); err != nil {
			return fmt.Errorf("kill pod: %w", err)
		}
	}
	// What failed along the way fails the sync, also when a later step
	// ends it early.
	var errs []error
	podIP := r.podEnv(pod, st.latestSandbox()).PodIP
	kills, earlyKills := splitKills(a)
	early := r.beginStops(ctx, pod, podIP, earlyKills, grace)
	defer func() {
		// Every stop this sync began has ended when it returns.
		retErr = errors.Join(append(errs, retErr, early.waitAll())...)
	}()
	stopped := r.beginStops(ctx, pod, podIP, kills, grace)
	if err := stopped.waitAll(); err != nil {
		errs = append(errs, err)
	}
	// A container starts only once every stop of its name this sync made
	// has ended well: also one of an older sandbox, lest a container
	// that would not stop run beside its successor.
	predecessors := early.with(stopped)
	for _, sb := range a.StopSandboxes {
		if err := r.rt.StopSandbox(ctx, sb.ID, grace); err != nil && !errors.Is(err, engine.ErrNotFound) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", shortID(sb.ID), err))
			continue
		}
		r.log.Info("sandbox stopped", "pod", podKey(pod), "id", shortID(sb.ID), "attempt", sb.Attempt,
			"reason", reasonNotLatest)
	}
	r.removeLeftovers(ctx, pod, a, &errs)

	sandboxID := a.SandboxID
	sbCfg := r.sandboxConfig(pod, a.SandboxAttempt)
	if !a.CreateSandbox {
		if sb := st.latestSandbox(); sb != nil {
			sbCfg.Attempt = sb.Attempt
		}
	}

	pe := r.podEnv(pod, st.latestSandbox())
	// Every container to start waits out the back-off of a failure (a
	// volume's image that could not be pulled, say): preparing the volumes
	// again now would only repeat it, and show ErrImagePull where the
	// kubelet shows ImagePullBackOff. Without a sandbox to make there is
	// still the rest to do (resources, created containers, a stop).
	held := a.preparesVolumes() && w.allHeld(a)
	if held && a.CreateSandbox {
		return nil
	}
	var vols map[string]volumeSource
	if a.preparesVolumes() && !held {
		var err error
		vols, err = w.prepareVolumes(ctx, pod, pe)
		if err != nil {
			for _, c := range allContainers(pod) {
				w.recordStartError(pod, c, err)
			}
			return fmt.Errorf("prepare volumes: %w", err)
		}
	}

	// The runtime of the pod's RuntimeClass, resolved and checked against
	// the engine's when a sandbox is made. Containers run with their
	// sandbox's (the engine takes it from the sandbox): a class changed or
	// gone since does not stop a container of a running sandbox.
	var runtime string
	var err error
	if a.CreateSandbox {
		runtime, err = r.podRuntime(ctx, pod, true)
	}
	if err != nil {
		if targets := startTargets(pod, a); len(targets) > 0 {
			for _, c := range targets {
				// One failure a back-off period: a sync meanwhile (an
				// event, the resync) must not lengthen it.
				if !w.holdStart(c) {
					w.recordStartError(pod, c, err)
				}
			}
			return fmt.Errorf("runtime class: %w", err)
		}
	}
	sbCfg.Runtime = runtime

	// The pod's own cgroup, where it needs one (pod-level resources, a
	// per-pod pids limit): its sandbox and containers go under it.
	if a.preparesVolumes() && !held {
		parent, err := r.cfg.PodCgroups.Ensure(pod)
		if err != nil {
			for _, c := range startTargets(pod, a) {
				if !w.holdStart(c) {
					w.recordStartError(pod, c, err)
				}
			}
			return fmt.Errorf("pod cgroup: %w", err)
		}
		sbCfg.CgroupParent = parent
	}

	var looked map[string]*imageLookup
	if a.CreateSandbox && r.cfg.Admit != nil {
		if err := r.cfg.Admit(pod); err != nil {
			for _, c := range allContainers(pod) {
				w.recordStartError(pod, c, err)
			}
			return fmt.Errorf("pod not admitted: %w", err)
		}
	}
	if a.CreateSandbox {
		r.keepRecord(pod, podSandboxKey(pod), sandboxRecord(pod))
		looked = r.lookUpImages(ctx, a)
		id, err := r.rt.RunSandbox(ctx, sbCfg)
		if err != nil {
			return fmt.Errorf("run sandbox: %w", err)
		}
		sandboxID = id
		// A start that failed in the old sandbox (its namespaces were
		// gone, say) says nothing of the new one: try at once.
		w.clearStartErrors(reasonRunContainerError)
		r.metrics.podStarted()
		r.log.Info("sandbox started", "pod", podKey(pod), "id", shortID(id), "attempt", sbCfg.Attempt,
			"reason", a.SandboxReason)
		if pod.Spec.HostNetwork {
			pe.PodIP = r.cfg.HostIP
		} else {
			ip, err := r.sandboxIP(ctx, string(pod.UID), id)
			if err != nil {
				return err
			}
			pe.PodIP = ip
		}
		// The new sandbox has no containers yet: attempts still count on
		// from the old ones.
	}
	var hostsErr error
	if a.startsInit() || len(a.StartApps) > 0 {
		// Written once for the containers this sync starts (which start
		// concurrently), as the kubelet writes it for each container.
		pe.HostsFile, hostsErr = r.writePodHostsFile(pod, pe.PodIP)
	}

	for _, c := range a.UpdateResources {
		cur := st.latest(c.Name, sandboxID)
		u, ok := r.raw.(engine.ResourceUpdater)
		if !ok || cur == nil {
			continue
		}
		res := containerResources(c)
		if err := u.UpdateContainerResources(ctx, cur.ID, &res); err != nil {
			errs = append(errs, fmt.Errorf("update resources of %s: %w", c.Name, err))
			continue
		}
		r.applied.Store(cur.ID, ResourcesHash(c))
		r.log.Info("container resources updated", "pod", podKey(pod), "container", c.Name, "reason", a.Reasons[c.Name])
	}

	for _, c := range a.StartCreated {
		if predecessors.wait(c.Name) != nil {
			continue // the stop's error fails the sync (applyActions)
		}
		spec := findContainer(pod, c.Name)
		if spec == nil {
			continue // not in the spec: removed as a leftover
		}
		if err := r.startMade(ctx, pod, spec, c.ID, c.Type, c.Attempt, a.Reasons[c.Name], pe.PodIP); err != nil {
			w.recordStartError(pod, spec, err)
			errs = append(errs, fmt.Errorf("start %s: %w", c.Name, err))
			continue
		}
		w.clearStartError(c.Name)
	}

	var errMu sync.Mutex
	start := func(c *v1.Container, typ engine.ContainerType) {
		if w.holdStart(c) {
			return
		}
		err := hostsErr
		if err == nil {
			err = r.startContainer(ctx, pod, c, typ, a.Reasons[c.Name], sandboxID, sbCfg, st, vols, pe, looked[c.Image], predecessors)
		}
		if errors.Is(err, errPredecessorNotStopped) {
			return // the stop's error fails the sync (applyActions)
		}
		if err != nil {
			w.recordStartError(pod, c, err)
			errMu.Lock()
			errs = append(errs, fmt.Errorf("start %s: %w", c.Name, err))
			errMu.Unlock()
			return
		}
		w.clearStartError(c.Name)
	}
	for _, c := range a.StartEphemeral {
		start(c, engine.ContainerTypeEphemeral)
	}
	// Init containers start one by one, in order.
	for _, c := range a.initStarts() {
		start(c, engine.ContainerTypeInit)
	}
	// App containers start together: each is one create and one start
	// against the engine, and nothing orders them (init containers do that).
	var wg sync.WaitGroup
	for _, c := range a.StartApps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start(c, engine.ContainerTypeApp)
		}()
	}
	wg.Wait()
	if a.CreateSandbox || a.startsInit() || len(a.StartApps) > 0 || len(a.StartEphemeral) > 0 {
		// Records were written: those nothing names now go.
		if err := pruneRecords(r.cfg.RootDir, string(pod.UID), recordsKeptFor(pod, st)); err != nil {
			r.log.Warn("prune spec records", "pod", podKey(pod), "err", err)
		}
		if err := pruneTerminationLogs(r.cfg.RootDir, string(pod.UID), st); err != nil {
			r.log.Warn("prune termination-message files", "pod", podKey(pod), "err", err)
		}
	}

	if a.StopSandbox && sandboxID != "" {
		if err := r.rt.StopSandbox(ctx, sandboxID, grace); err != nil && !errors.Is(err, engine.ErrNotFound) {
			errs = append(errs, fmt.Errorf("stop sandbox: %w", err))
		}
	}
	return nil
}

// startTargets are the containers a sync would start: all of them with a
// new sandbox, else the init container and the app containers to start.
func startTargets(pod *v1.Pod, a *podActions) []*v1.Container {
	if a.CreateSandbox {
		return allContainers(pod)
	}
	out := append([]*v1.Container(nil), a.StartEphemeral...)
	out = append(out, a.initStarts()...)
	return append(out, a.StartApps...)
}

// stopsUnderWay are stops begun (beginStops), by container name. A sync
// that starts a name first waits for every stop of it, early ones
// (splitKills) included.
type stopsUnderWay map[string][]*pendingStop

// pendingStop is one stop under way.
type pendingStop struct {
	done chan struct{}
	err  error // the stop's, once done is closed
}

// wait waits for the stops of name and returns their errors.
func (s stopsUnderWay) wait(name string) error {
	var errs []error
	for _, p := range s[name] {
		<-p.done
		errs = append(errs, p.err)
	}
	return errors.Join(errs...)
}

// with returns the stops of s and of o together.
func (s stopsUnderWay) with(o stopsUnderWay) stopsUnderWay {
	out := make(stopsUnderWay, len(s)+len(o))
	for _, m := range []stopsUnderWay{s, o} {
		for name, ps := range m {
			out[name] = append(out[name], ps...)
		}
	}
	return out
}

// waitAll waits for every stop and returns their errors.
func (s stopsUnderWay) waitAll() error {
	var errs []error
	for name := range s {
		errs = append(errs, s.wait(name))
	}
	return errors.Join(errs...)
}

// errPredecessorNotStopped is a start not made because an older attempt
// of the container could not be stopped: the next sync stops that one
// again, then starts the one made (created, it is adopted).
var errPredecessorNotStopped = errors.New("an older attempt of the container was not stopped")

// splitKills splits a's kills into those to stop before anything is made
// and the early ones: the stops of containers whose name the sync also
// starts (the old container of an edit; an older attempt still running
// beside a created newer one). An early stop runs while the sync makes the
// new container, so that an edit costs the longer of the stop and the
// create, not both; the new container starts once every stop of its name
// has ended well, so that two attempts of a container never run together.
// A new sandbox starts its containers only after the old one is gone, so
// then nothing is early; nor is the stop of a container of an older
// sandbox, which must end before that sandbox is stopped.
func splitKills(a *podActions) (now, early []killTarget) {
	if a.CreateSandbox || a.KillPod || len(a.Kill) == 0 {
		return a.Kill, nil
	}
	starting := map[string]bool{}
	for _, c := range a.StartApps {
		starting[c.Name] = true
	}
	for _, c := range a.initStarts() {
		starting[c.Name] = true
	}
	for _, c := range a.StartCreated {
		starting[c.Name] = true
	}
	for _, k := range a.Kill {
		if starting[k.Container.Name] && k.Container.SandboxID == a.SandboxID {
			early = append(early, k)
		} else {
			now = append(now, k)
		}
	}
	return now, early
}

// beginStops stops the targets in parallel, each within grace, running
// their preStop hooks first. Each is announced (Killing) before any
// begins, so that Killing comes before anything the sync makes meanwhile.
func (r *Runner) beginStops(ctx context.Context, pod *v1.Pod, podIP string, targets []killTarget, grace time.Duration) stopsUnderWay {
	if len(targets) == 0 {
		return nil
	}
	s := stopsUnderWay{}
	for _, k := range targets {
		p := &pendingStop{done: make(chan struct{})}
		s[k.Container.Name] = append(s[k.Container.Name], p)
		r.announceKill(pod, k)
		go func() {
			defer close(p.done)
			p.err = r.stopContainer(ctx, pod, podIP, k, grace)
		}()
	}
	return s
}

// minGracePeriod is the least time a container stopped gracefully (a
// grace period above 0) gets between its stop signal and SIGKILL, whatever
// a preStop hook used of it: the kubelet's minimum shutdown window
// (killContainer). A grace period of 0 is a kill at once, as the API
// documents terminationGracePeriodSeconds: 0, where the kubelet still
// gives 2 s.
const minGracePeriod = 2 * time.Second

// announceKill records the Killing event of a running container of pod:
// as the kubelet's, before the preStop hook.
func (r *Runner) announceKill(pod *v1.Pod, k killTarget) {
	c := k.Container
	if pod == nil || c.State != engine.StateRunning {
		return
	}
	if k.Event != "" {
		r.event(pod, c.Name, v1.EventTypeNormal, eventKilling, "%s", k.Event)
	} else {
		r.event(pod, c.Name, v1.EventTypeNormal, eventKilling, "Stopping container %s (%s)", c.Name, k.Reason)
	}
}

// stopContainer runs the container's preStop hook (when the pod spec has
// one and grace is not 0), then stops it: its stop signal, and SIGKILL
// after what is left of grace, never less than minGracePeriod; with no
// grace, SIGKILL at once.
func (r *Runner) stopContainer(ctx context.Context, pod *v1.Pod, podIP string, k killTarget, grace time.Duration) error {
	c := k.Container
	// A probe's own grace period applies, but not to a pod the API is
	// deleting: its deletionGracePeriodSeconds comes first (the kubelet's
	// setTerminationGracePeriod).
	if k.Grace > 0 && (pod == nil || pod.DeletionGracePeriodSeconds == nil) {
		grace = k.Grace
	}
	graceful := grace > 0
	began := k.Began
	if began.IsZero() {
		began = r.clock.Now()
	}
	left := func() time.Duration { return grace - r.clock.Since(began) }
	waited := false // for a preStop hook or a turn: grace is what is left
	// A container being stopped is probed no more.
	r.probes.RemoveContainer(c.ID)
	if pod != nil && c.State == engine.StateRunning {
		// As the kubelet's, no preStop hook runs without a grace period
		// for it.
		if spec := findContainer(pod, c.Name); graceful && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
			waited = true
			hctx, cancel := context.WithTimeout(ctx, left())
			err := health.RunHook(hctx, r.hookTarget(pod, spec, c.ID, podIP), spec.Lifecycle.PreStop)
			outlived := hctx.Err() != nil
			cancel()
			switch {
			case err != nil && outlived:
				// The kubelet stops waiting for the hook then, and warns
				// of nothing.
				r.log.Info("preStop hook did not end within the grace period", "pod", podKey(pod), "container", c.Name)
			case err != nil:
				r.log.Warn("preStop hook failed", "pod", podKey(pod), "container", c.Name, "err", err)
				// Without the hook's output, which may hold secrets.
				r.event(pod, c.Name, v1.EventTypeWarning, eventFailedPreStopHook, "PreStopHook failed")
			}
		}
	}
	if graceful && len(k.Turn) > 0 {
		waited = true
		r.waitTurn(ctx, k.Turn, left())
	}
	if waited {
		grace = left()
	}
	if graceful {
		grace = max(grace, minGracePeriod)
	}
	if err := ctx.Err(); err != nil {
		// The stop was interrupted (a shorter grace period came): the
		// next one stops the container.
		return fmt.Errorf("stop %s: %w", c.Name, err)
	}
	err := r.rt.StopContainer(ctx, c.ID, grace)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("stop %s: %w", c.Name, err)
	}
	r.log.Info("container stopped", "pod", c.Pod.Namespace+"/"+c.Pod.Name,
		"container", c.Name, "id", shortID(c.ID), "reason", k.Reason)
	return nil
}

// waitTurn waits until every stop of turn has ended, for at most limit.
func (r *Runner) waitTurn(ctx context.Context, turn []<-chan struct{}, limit time.Duration) {
	timer := r.clock.NewTimer(limit)
	defer timer.Stop()
	for _, done := range turn {
		select {
		case <-done:
		case <-timer.C():
			return
		case <-ctx.Done():
			return
		}
	}
}

// killPod stops every container of the pod (app containers first, then
// sidecars in reverse order, as the kubelet does), then its sandboxes but
// adopt (one about to be started: a stop would only race the start a
// killed podrun may have sent); why is the reason its log lines and
// events give (empty: the pod is being replaced or removed).
func (r *Runner) killPod(ctx context.Context, pod *v1.Pod, st *podState, adopt *engine.Sandbox, grace time.Duration, why string) error {
	errs := r.stopPodContainers(ctx, pod, st, grace, why)
	for _, sb := range st.Sandboxes {
		if sb.State == engine.StateExited || sb == adopt {
			continue
		}
		if err := r.rt.StopSandbox(ctx, sb.ID, grace); err != nil && !errors.Is(err, engine.ErrNotFound) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", shortID(sb.ID), err))
		}
	}
	return errors.Join(errs...)
}

// stopPodContainers is killPod without the sandboxes: it returns what
// failed.
func (r *Runner) stopPodContainers(ctx context.Context, pod *v1.Pod, st *podState, grace time.Duration, why string) []error {
	if why == "" {
		why = "pod is being replaced or removed"
	}
	var errs []error
	podIP := ""
	if sb := st.latestSandbox(); sb != nil {
		podIP = sb.IP
		if pod != nil && pod.Spec.HostNetwork {
			podIP = r.cfg.HostIP
		}
	}
	apps, sidecars := killOrder(pod, st, func(c *engine.Container) bool {
		return c.State == engine.StateRunning || c.State == engine.StateCreated
	})
	// The pod's grace period counts from now for every container, however
	// late its stop's goroutine runs.
	began := r.clock.Now()
	targets := func(cs []*engine.Container) []killTarget {
		out := make([]killTarget, len(cs))
		for i, c := range cs {
			out[i] = killTarget{Container: c, Reason: why, Began: began}
		}
		return out
	}
	// As the kubelet's termination ordering: every stop begins at once,
	// so that every preStop hook, a sidecar's too, runs from the start;
	// a sidecar's stop signal then waits for its turn (the app containers
	// and the sidecars started after it stopped) within one grace period
	// for the pod, and gets what is left of it, at least the minimum of a
	// graceful stop.
	stops := r.beginStops(ctx, pod, podIP, targets(apps), grace)
	var turn []<-chan struct{}
	for _, ps := range stops {
		for _, p := range ps {
			turn = append(turn, p.done)
		}
	}
	for _, k := range targets(sidecars) {
		// An init container that is no sidecar (one still running) has
		// no turn to wait for, nor is it one. Without a spec (a pod no
		// source defines) each running init container counts as one.
		sidecar := true
		if pod != nil {
			spec := findContainer(pod, k.Container.Name)
			sidecar = spec == nil || isSidecar(spec)
		}
		if sidecar {
			k.Turn = slices.Clone(turn)
		}
		s := r.beginStops(ctx, pod, podIP, []killTarget{k}, grace)
		if sidecar {
			turn = append(turn, s[k.Container.Name][0].done)
		}
		stops = stops.with(s)
	}
	if err := stops.waitAll(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// killOrder splits the pod's containers that pick chooses as the kubelet
// stops them: the app containers (with the init containers that have
// finished), which go together, then the init containers still running or
// created (sidecars), one after another, the last started first.
func killOrder(pod *v1.Pod, st *podState, pick func(*engine.Container) bool) (together, inTurn []*engine.Container) {
	for _, c := range st.Containers {
		switch {
		case !pick(c):
		case c.Type == engine.ContainerTypeInit && c.State != engine.StateExited:
			inTurn = append(inTurn, c)
		default:
			together = append(together, c)
		}
	}
	sort.SliceStable(inTurn, func(i, j int) bool {
		return sidecarIndex(pod, inTurn[i]) > sidecarIndex(pod, inTurn[j])
	})
	return together, inTurn
}

func sidecarIndex(pod *v1.Pod, c *engine.Container) int {
	if pod != nil {
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == c.Name {
				return i
			}
		}
	}
	return 0
}

// teardown stops and removes everything of a pod, and its pod directory.
// pod may be nil (a pod no source defines): then no hooks run.
func (r *Runner) teardown(ctx context.Context, pod *v1.Pod, st *podState, grace time.Duration) error {
	if st == nil {
		st = &podState{}
	}
	uid := ""
	switch {
	case pod != nil:
		uid = string(pod.UID)
	case len(st.Sandboxes) > 0:
		uid = st.Sandboxes[0].Pod.UID
	case len(st.Containers) > 0:
		uid = st.Containers[0].Pod.UID
	}
	r.probes.RemovePod(uid)
	if err := r.removePodObjects(ctx, pod, st, grace); err != nil || uid == "" {
		return err
	}
	return errors.Join(r.cfg.PodCgroups.Remove(uid), removePodDir(r.cfg.RootDir, uid))
}

// removePodObjects stops and removes the containers and sandboxes of st,
// in the kubelet's order, and nothing else of the pod.
func (r *Runner) removePodObjects(ctx context.Context, pod *v1.Pod, st *podState, grace time.Duration) error {
	// Containers are stopped before their removal only where a stop is
	// more than a kill: with a grace period (no preStop hook runs
	// without one). Otherwise their forced removal (below, in the same
	// order) kills them as a stop with no grace would: one Engine call
	// per container, as Docker's own rm -f makes, not two. The sandbox is not stopped first either: its
	// removal kills it, and the infra container has nothing to do in a
	// grace period.
	if grace > 0 {
		if errs := r.stopPodContainers(ctx, pod, st, grace, ""); len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	var mu sync.Mutex
	var errs []error
	remove := func(c *engine.Container) {
		if err := r.rt.RemoveContainer(ctx, c.ID); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("remove %s: %w", c.Name, err))
			mu.Unlock()
		}
	}
	together, inTurn := killOrder(pod, st, func(*engine.Container) bool { return true })
	var wg sync.WaitGroup
	for _, c := range together {
		wg.Go(func() { remove(c) })
	}
	wg.Wait()
	for _, c := range inTurn {
		remove(c)
	}
	for _, sb := range st.Sandboxes {
		if err := r.rt.RemoveSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", shortID(sb.ID), err))
		}
	}
	return errors.Join(errs...)
}

// TeardownTarget is a pod to tear down: its UID, its namespace/name (for
// reports), and its spec when a source defines it (nil: no preStop hooks
// can run, and the grace period is the one its sandbox recorded).
type TeardownTarget struct {
	UID  string
	Name string
	Pod  *v1.Pod
}

// TeardownPods stops (gracefully, within grace, running preStop hooks of
// the pods given with a spec) and removes every container and sandbox of
// each target, and its pod directory. It needs no running sync loop:
// `podrun down` calls it directly. A grace below zero means each pod's own:
// its spec's, else the one its sandbox recorded, else 30 s.
//
// The pods are torn down as bring-up brings them up, one goroutine per pod
// (each pod's containers in the kubelet's order), so that their grace
// periods overlap rather than add up. The runtime is listed once for all
// of them: a list per pod made N pods cost N lists of every pod. done is
// called once per target as it is done (with the list's error, when that
// failed), by one goroutine at a time.
func (r *Runner) TeardownPods(ctx context.Context, targets []TeardownTarget, grace time.Duration, done func(TeardownTarget, error)) {
	pods, err := r.listForTeardown(ctx)
	if err != nil {
		for _, t := range targets {
			done(t, err)
		}
		return
	}
	r.teardownEach(ctx, pods, targets, grace, done)
}

// TeardownAll is TeardownPods of every pod of this node, found by one list
// of the runtime, without specs. The error is the list's.
func (r *Runner) TeardownAll(ctx context.Context, grace time.Duration, done func(TeardownTarget, error)) error {
	pods, err := r.listForTeardown(ctx)
	if err != nil {
		return err
	}
	targets := make([]TeardownTarget, 0, len(pods))
	for uid, st := range pods {
		var ref engine.PodRef
		switch {
		case len(st.Sandboxes) > 0:
			ref = st.Sandboxes[0].Pod
		case len(st.Containers) > 0:
			ref = st.Containers[0].Pod
		}
		targets = append(targets, TeardownTarget{UID: uid, Name: ref.Namespace + "/" + ref.Name})
	}
	r.teardownEach(ctx, pods, targets, grace, done)
	return nil
}

// teardownEach tears each target down from pods, the runtime's state, one
// goroutine per pod, and returns when all are done.
func (r *Runner) teardownEach(ctx context.Context, pods map[string]*podState, targets []TeardownTarget, grace time.Duration, done func(TeardownTarget, error)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			err := r.teardownTarget(ctx, t, pods[t.UID], grace)
			mu.Lock()
			defer mu.Unlock()
			done(t, err)
		})
	}
	wg.Wait()
}

// teardownTarget tears t down from st, the runtime's objects of its UID,
// with grace (below zero: the pod's own). A manifest may set any
// metadata.uid, and static pod UIDs are predictable: objects of the UID
// labelled as another pod's are that pod's, and neither they nor the
// UID's pod directory and cgroup, which they use, are touched.
func (r *Runner) teardownTarget(ctx context.Context, t TeardownTarget, st *podState, grace time.Duration) error {
	own, others := splitByPod(t.Pod, st)
	if grace < 0 {
		grace = recordedGrace(t.Pod, own)
	}
	err := r.teardownOwn(ctx, t.Pod, own, others, grace)
	if others != nil {
		err = errors.Join(err, fmt.Errorf("metadata.uid %s is also that of pod %s, left alone with the uid's pod directory and cgroup "+
			"(a manifest's uid must be its own)", t.UID, strings.Join(podNames(others), ", ")))
	}
	return err
}

// splitByPod splits st into the objects of pod (by their pod
// namespace/name labels) and those of other pods that share its UID
// (others is nil when there are none). A nil pod owns all of st.
func splitByPod(pod *v1.Pod, st *podState) (own, others *podState) {
	if st == nil || pod == nil {
		return st, nil
	}
	mine := func(ref engine.PodRef) bool { return ref.Namespace == pod.Namespace && ref.Name == pod.Name }
	// Every sync asks: what is all the pod's, as it nearly always is, is
	// not copied.
	shared := slices.ContainsFunc(st.Sandboxes, func(sb *engine.Sandbox) bool { return !mine(sb.Pod) }) ||
		slices.ContainsFunc(st.Containers, func(c *engine.Container) bool { return !mine(c.Pod) })
	if !shared {
		return st, nil
	}
	own, others = &podState{}, &podState{}
	for _, sb := range st.Sandboxes {
		if mine(sb.Pod) {
			own.Sandboxes = append(own.Sandboxes, sb)
		} else {
			others.Sandboxes = append(others.Sandboxes, sb)
		}
	}
	for _, c := range st.Containers {
		if mine(c.Pod) {
			own.Containers = append(own.Containers, c)
		} else {
			others.Containers = append(others.Containers, c)
		}
	}
	return own, others
}

// podNames are the namespace/names of the pods st's objects are of,
// sorted.
func podNames(st *podState) []string {
	var names []string
	add := func(ref engine.PodRef) {
		if name := ref.Namespace + "/" + ref.Name; !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, sb := range st.Sandboxes {
		add(sb.Pod)
	}
	for _, c := range st.Containers {
		add(c.Pod)
	}
	slices.Sort(names)
	return names
}

// listForTeardown is the runtime's state of every pod, as a teardown needs
// it: from one call where the runtime can (engine.PodSummaryLister), as
// the states of its objects are all it uses.
func (r *Runner) listForTeardown(ctx context.Context) (map[string]*podState, error) {
	if l, ok := r.raw.(engine.PodSummaryLister); ok {
		r.cfg.Metrics.runtimeCall("ListPodSummaries")
		sbs, cs, err := l.ListPodSummaries(ctx)
		if err != nil {
			return nil, err
		}
		return groupPods(sbs, cs), nil
	}
	return listPods(ctx, r.rt)
}

// recordedGrace is the grace period of a pod: from its spec when known,
// else what its sandbox recorded (zero included), else the default.
func recordedGrace(pod *v1.Pod, st *podState) time.Duration {
	if pod != nil {
		return GracePeriod(pod)
	}
	if st != nil {
		for _, sb := range st.Sandboxes {
			if sb.GracePeriod != nil {
				return max(*sb.GracePeriod, 0)
			}
		}
	}
	return GracePeriod(nil)
}

// sandboxIPReader is a runtime that reads one sandbox's address by its ID,
// as the kubelet asks PodSandboxStatus right after RunPodSandbox: one call
// where a list of the pod is three on CRI (sandboxes, their status,
// containers).
type sandboxIPReader interface {
	SandboxIP(ctx context.Context, id string) (string, error)
}

// sandboxIP returns the address of the pod's new sandbox id. Without a
// sandboxIPReader it comes from a list of that pod alone where the runtime
// can make one: a list of every sandbox here would make a bring-up of N
// pods cost O(N^2) (N concurrent lists of up to N sandboxes each).
func (r *Runner) sandboxIP(ctx context.Context, uid, id string) (string, error) {
	if r.ipReader != nil {
		ip, err := r.ipReader.SandboxIP(ctx, id)
		if err != nil {
			return "", fmt.Errorf("sandbox %s address: %w", shortID(id), err)
		}
		return ip, nil
	}
	var sbs []*engine.Sandbox
	var err error
	if l := r.cache.lister; l != nil {
		sbs, _, err = l.ListPodObjects(ctx, uid)
	} else {
		sbs, err = r.rt.ListSandboxes(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("list sandboxes: %w", err)
	}
	for _, sb := range sbs {
		if sb.ID == id {
			return sb.IP, nil
		}
	}
	return "", nil
}

func (r *Runner) podEnv(pod *v1.Pod, sb *engine.Sandbox) podEnv {
	pe := podEnv{HostIP: r.cfg.HostIP, NodeMilliCPU: r.cfg.NodeMilliCPU, NodeMemory: r.cfg.NodeMemory}
	pe.ServiceEnv, pe.ServiceErr = r.serviceEnv(pod)
	if sb != nil {
		pe.PodIP = sb.IP
	}
	if pod.Spec.HostNetwork {
		pe.PodIP = r.cfg.HostIP
	}
	return pe
}

// sandboxConfig describes the pod's sandbox.
func (r *Runner) sandboxConfig(pod *v1.Pod, attempt int) *engine.SandboxConfig {
	cfg := &engine.SandboxConfig{
		Pod:                   engine.PodRef{UID: string(pod.UID), Name: pod.Name, Namespace: pod.Namespace},
		Attempt:               attempt,
		Hash:                  SandboxHash(pod),
		Image:                 r.cfg.InfraImage,
		Hostname:              podHostname(pod),
		HostNetwork:           pod.Spec.HostNetwork,
		HostPID:               pod.Spec.HostPID,
		HostIPC:               pod.Spec.HostIPC,
		ShareProcessNamespace: pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace,
		Labels:                pod.Labels,
		Source:                pod.Annotations[annotationSource],
		GracePeriod:           GracePeriod(pod),
		QOSClass:              string(podQOS(pod)),
		OOMScoreAdj:           sandboxOOMScore(r.cfg.OOMScoreAdjFloor),
		// Ephemeral containers too, as the kubelet counts them: those
		// already added when the sandbox is made again.
		Privileged: hasPrivileged(allContainers(pod)) || hasPrivileged(ephemeralContainers(pod)),
	}
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			cfg.Ports = append(cfg.Ports, engine.PortMapping{
				Protocol: string(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP,
			})
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
		cfg.Sysctls = map[string]string{}
		for _, s := range sc.Sysctls {
			cfg.Sysctls[s.Name] = s.Value
		}
	}
	cfg.DNS = dnsConfig(pod, r.cfg.ClusterDNS, r.cfg.ClusterDomain, r.cfg.HostDNS)
	return cfg
}

// dnsConfig is the pod's resolv.conf, as the kubelet makes it: for
// ClusterFirst (ClusterFirstWithHostNet on the host's network) the cluster
// DNS servers, the search path <namespace>.svc.<domain>, svc.<domain>,
// <domain> then the host's, and ndots:5; for Default (and ClusterFirst
// without cluster DNS, or on the host's network) the host's, as Docker
// gives it; for None nothing but dnsConfig. dnsConfig's entries go on top
// of each, duplicates dropped, its options replacing those of the same
// name. host is the host's resolver configuration (nil: unknown). Under
// Default, a pod on its own network cannot reach the host's loopback
// nameservers: they are left out, as Docker leaves them out.
func dnsConfig(pod *v1.Pod, clusterDNS []string, clusterDomain string, host *engine.DNSConfig) *engine.DNSConfig {
	dc := pod.Spec.DNSConfig
	out := &engine.DNSConfig{}
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	cluster := len(clusterDNS) > 0 && (policy == v1.DNSClusterFirstWithHostNet ||
		policy == v1.DNSClusterFirst && !pod.Spec.HostNetwork)
	switch {
	case cluster:
		out.Servers = append(out.Servers, clusterDNS...)
		if clusterDomain != "" {
			out.Searches = append(out.Searches, pod.Namespace+".svc."+clusterDomain, "svc."+clusterDomain, clusterDomain)
		}
		if host != nil {
			out.Searches = appendNew(out.Searches, host.Searches...)
		}
		out.Options = append(out.Options, "ndots:5")
	case policy == v1.DNSNone:
	case dc == nil:
		// The host's, which Docker gives a container by default.
		return nil
	case host != nil:
		for _, s := range host.Servers {
			if ip := net.ParseIP(s); pod.Spec.HostNetwork || ip == nil || !ip.IsLoopback() {
				out.Servers = append(out.Servers, s)
			}
		}
		out.Searches = append(out.Searches, host.Searches...)
		out.Options = append(out.Options, host.Options...)
	}
	if dc != nil {
		out.Servers = appendNew(out.Servers, dc.Nameservers...)
		out.Searches = appendNew(out.Searches, dc.Searches...)
		for _, o := range dc.Options {
			name := o.Name
			if o.Value != nil {
				name += ":" + *o.Value
			}
			// A pod's option replaces the default of the same name.
			out.Options = slices.DeleteFunc(out.Options, func(have string) bool {
				n, _, _ := strings.Cut(have, ":")
				return n == o.Name
			})
			out.Options = append(out.Options, name)
		}
	}
	return fitDNSLimits(out)
}

// fitDNSLimits cuts a resolv.conf to what resolvers read, as the kubelet
// does: the first 3 nameservers, the first 32 search domains without those
// longer than 253 characters, and as many as fit in 2048 characters.
func fitDNSLimits(c *engine.DNSConfig) *engine.DNSConfig {
	if len(c.Servers) > corevalidation.MaxDNSNameservers {
		c.Servers = c.Servers[:corevalidation.MaxDNSNameservers]
	}
	if len(c.Searches) > corevalidation.MaxDNSSearchPaths {
		c.Searches = c.Searches[:corevalidation.MaxDNSSearchPaths]
	}
	c.Searches = slices.DeleteFunc(c.Searches, func(s string) bool { return len(s) > validation.DNS1123SubdomainMaxLength })
	for len(c.Searches) > 0 && len(strings.Join(c.Searches, " ")) > corevalidation.MaxDNSSearchListChars {
		c.Searches = c.Searches[:len(c.Searches)-1]
	}
	return c
}

// appendNew appends to list the values it lacks yet.
func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// podHostname is the pod's hostname: spec.hostnameOverride, else
// spec.hostname, else the pod name, cut to 63 characters without a
// trailing '-' or '.', as the kubelet makes it.
func podHostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if o := pod.Spec.HostnameOverride; o != nil {
		h = *o
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// podDomain is the pod's DNS domain as the kubelet makes it from
// spec.subdomain: <subdomain>.<namespace>.svc.<cluster domain>; without a
// cluster domain it ends at svc (the kubelet's would end in a '.').
func podDomain(pod *v1.Pod, clusterDomain string) string {
	// An overridden hostname is the whole name: no domain, as the kubelet.
	if pod.Spec.Subdomain == "" || pod.Spec.HostnameOverride != nil {
		return ""
	}
	d := pod.Spec.Subdomain + "." + pod.Namespace + ".svc"
	if clusterDomain != "" {
		d += "." + clusterDomain
	}
	return d
}

// ensureImage makes the image ref present under the pull policy, pulling
// it with the credentials of the pod's imagePullSecrets, then the node's
// (opts.Credentials), each in turn, as the kubelet does, and returns it.
// container names the container (or is "" for an image volume) in the
// events. Pulls of the same image with the same credentials are shared by
// every pod that needs it at once; opts may make pulls one at a time. It
// tells opts.Used of the image about to be used. opts may be nil.
func (r *Runner) ensureImage(ctx context.Context, pod *v1.Pod, container, ref string, policy v1.PullPolicy,
	opts *ImageOptions, looked *imageLookup) (*engine.Image, error) {
	if err := checkImageRef(ref); err != nil {
		return nil, &imageError{reason: reasonInvalidImageName, err: err}
	}
	if policy != v1.PullAlways {
		var img *engine.Image
		var err error
		if looked != nil {
			<-looked.done
			img, err = looked.img, looked.err
		} else {
			img, err = r.rt.ImageStatus(ctx, ref)
		}
		if err == nil {
			opts.used(img.ID, r.clock.Now())
			r.event(pod, container, v1.EventTypeNormal, eventPulled, "Container image %q already present on machine", ref)
			return img, nil
		}
		if !errors.Is(err, engine.ErrNotFound) {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		if policy == v1.PullNever {
			return nil, &imageError{reason: reasonErrImageNeverPull,
				err: fmt.Errorf("image %s is not present and imagePullPolicy is Never", ref)}
		}
	}
	creds := engine.UnionKeyring{engine.KeyringFunc(func(image string) []engine.AuthConfig { return r.podPullCredentials(pod, image) }),
		opts.nodeCredentials()}.Lookup(ref)
	r.event(pod, container, v1.EventTypeNormal, eventPulling, "Pulling image %q", ref)
	start := r.clock.Now()
	v, err := r.pulls.do(ctx, pullKey(ref, creds), func(ctx context.Context) (any, error) {
		return r.pullImage(ctx, ref, creds, opts)
	})
	if err != nil {
		if err == ctx.Err() {
			// This pod stopped waiting for a pull that may go on for others;
			// every other error is the engine's, which names the image.
			err = fmt.Errorf("pull %s: %w", ref, err)
		}
		return nil, &imageError{reason: reasonErrImagePull, err: err}
	}
	r.event(pod, container, v1.EventTypeNormal, eventPulled, "Successfully pulled image %q in %s", ref, r.clock.Since(start).Round(time.Millisecond))
	img := v.(*engine.Image)
	opts.used(img.ID, r.clock.Now())
	return img, nil
}

// checkImageRef refuses an image reference that is not one, as the
// kubelet does (InvalidImageName) before it asks the runtime anything: a
// ref reaches Docker's API as a URL path, where "x/../../containers/<id>"
// would inspect a container.
func checkImageRef(ref string) error {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("image %q is not an image reference: %w", ref, err)
	}
	return nil
}

// imageLookup is an ImageStatus begun before it is needed; done is closed
// when img and err are set.
type imageLookup struct {
	done chan struct{}
	img  *engine.Image
	err  error
}

// lookUpImages begins the ImageStatus of each image that a sync making a
// new sandbox starts a container of right after it (its init container,
// its app containers) and that it may use as present (pull policy not
// Always), by image. They run while the engine starts the sandbox (a
// quarter of a second of Docker's here), not after it, each bounded by
// ctx; what is pulled, and every event, stays where it was
// (ensureImage).
func (r *Runner) lookUpImages(ctx context.Context, a *podActions) map[string]*imageLookup {
	cs := a.StartApps
	if a.StartInit != nil {
		cs = []*v1.Container{a.StartInit}
	}
	out := map[string]*imageLookup{}
	for _, c := range cs {
		if c.ImagePullPolicy == v1.PullAlways || out[c.Image] != nil || checkImageRef(c.Image) != nil {
			continue
		}
		l := &imageLookup{done: make(chan struct{})}
		out[c.Image] = l
		go func() {
			defer close(l.done)
			l.img, l.err = r.rt.ImageStatus(ctx, c.Image)
		}()
	}
	return out
}

// startContainer makes and starts one container in the sandbox; why is
// the reason compute-actions gave, for the log. looked is the lookup of
// its image begun earlier, if any. The container is made at once but
// started only once predecessors' stops of its name have ended well.
func (r *Runner) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, typ engine.ContainerType, why string,
	sandboxID string, sbCfg *engine.SandboxConfig, st *podState, vols map[string]volumeSource, pe podEnv, looked *imageLookup,
	predecessors stopsUnderWay) error {
	if sandboxID == "" {
		return errors.New("no sandbox")
	}
	if _, err := r.ensureImage(ctx, pod, c.Name, c.Image, c.ImagePullPolicy, r.cfg.Images, looked); err != nil {
		return err
	}
	if err := r.checkRunAsNonRoot(ctx, pod, c); err != nil {
		return err
	}
	attempt := st.nextAttempt(c.Name)
	cfg, err := r.containerConfig(pod, c, typ, attempt, vols, pe)
	if err != nil {
		return err
	}
	if typ == engine.ContainerTypeEphemeral {
		if cfg.PIDTarget, err = pidTarget(pod, c, st, sandboxID); err != nil {
			return err
		}
	}
	r.keepRecord(pod, podContainerKey(c), containerRecord(c))
	id, err := r.rt.CreateContainer(ctx, sandboxID, sbCfg, cfg)
	// A container made has no event until it starts (nor after a start that
	// fails): the relist is not to take it for a change the events missed.
	r.cache.announce(string(pod.UID))
	if err != nil {
		return err // the engine's error names the create
	}
	r.event(pod, c.Name, v1.EventTypeNormal, eventCreated, "Created container %s", c.Name)
	if err := predecessors.wait(c.Name); err != nil {
		return fmt.Errorf("%w: %w", errPredecessorNotStopped, err)
	}
	if err := r.startMade(ctx, pod, c, id, typ, attempt, why, pe.PodIP); err != nil {
		return err
	}
	// Every start after an exited run counts towards the back-off, as in
	// the kubelet's doBackOff: also one that replaces a running container
	// (an edit, a failed probe); a container that never exited starts
	// afresh, its first crash restarted at once.
	if prev := st.lastExited(c.Name); prev != nil {
		finished := prev.FinishedAt
		if finished.IsZero() {
			finished = r.clock.Now()
		}
		r.backoff.Next(backoffKey(pod, c), finished)
	}
	return nil
}

// startMade starts container id, made for c of pod, and runs its
// postStart hook.
func (r *Runner) startMade(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, typ engine.ContainerType, attempt int,
	why, podIP string) error {
	if err := r.rt.StartContainer(ctx, id); err != nil {
		// Docker sends neither start nor die for a start that fails.
		r.cache.announce(string(pod.UID))
		return err // the engine's error names the start
	}
	r.event(pod, c.Name, v1.EventTypeNormal, eventStarted, "Started container %s", c.Name)
	r.metrics.containerStarted(attempt)
	if err := r.postStart(ctx, pod, c, id, podIP); err != nil {
		return err
	}
	r.log.Info("container started", "pod", podKey(pod), "container", c.Name, "type", string(typ),
		"id", shortID(id), "attempt", attempt, "reason", why)
	return nil
}

// keepRecord writes the spec record k of pod (records.go) before the
// object is made, so that no object of this podrun lacks one; a failure is
// logged and costs the pod nothing but plan's field diff.
func (r *Runner) keepRecord(pod *v1.Pod, k recordKey, data []byte) {
	if err := writeRecord(r.cfg.RootDir, string(pod.UID), k, data); err != nil {
		what := "sandbox"
		if !k.sandbox {
			what = "container " + k.container
		}
		r.log.Warn("spec record not kept: plan will not say which fields of it change", "pod", podKey(pod),
			"of", what, "err", err)
	}
}

// containerConfig resolves a container for the runtime.
func (r *Runner) containerConfig(pod *v1.Pod, c *v1.Container, typ engine.ContainerType, attempt int,
	vols map[string]volumeSource, pe podEnv) (*engine.ContainerConfig, error) {
	sec, err := securityConfig(pod, c, filepath.Join(r.cfg.RootDir, "seccomp"))
	if err != nil {
		return nil, err
	}
	sec.AppArmor = appArmorProfile(r.cfg.AppArmor, pod, c)
	if err := CheckPrivileged(c, r.cfg.AllowPrivileged); err != nil {
		return nil, err
	}
	var budget expansion.Budget
	env, lookup, err := makeEnv(pod, c, r.cfg.Objects, pe, &budget)
	if err != nil {
		return nil, err
	}
	command, err := expansion.All(c.Command, lookup, &budget)
	if err != nil {
		return nil, configErrorf("command%v", err)
	}
	args, err := expansion.All(c.Args, lookup, &budget)
	if err != nil {
		return nil, configErrorf("args%v", err)
	}
	cfg := &engine.ContainerConfig{
		Name:           c.Name,
		Type:           typ,
		Attempt:        attempt,
		Hash:           ContainerHash(c),
		ResourcesHash:  ResourcesHash(c),
		Image:          c.Image,
		Command:        command,
		Args:           args,
		Env:            env,
		WorkingDir:     c.WorkingDir,
		Resources:      containerResources(c),
		DeviceRequests: deviceRequests(c),
		OOMScoreAdj:    containerOOMScoreAdj(pod, c, r.cfg.NodeMemory, r.cfg.OOMScoreAdjFloor),
		Security:       sec,
		TTY:            c.TTY,
		Stdin:          c.Stdin,
		StdinOnce:      c.StdinOnce,
	}
	for i, vm := range c.VolumeMounts {
		src, ok := vols[vm.Name]
		if !ok {
			return nil, configErrorf("volumeMount %s: no volume %q", vm.MountPath, vm.Name)
		}
		host := src.HostPath
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			// As the kubelet: $(VAR) of the container's environment.
			if sub, err = expansion.Expand(vm.SubPathExpr, lookup); err != nil {
				return nil, configErrorf("volumeMount %s: subPathExpr: %v", vm.MountPath, err)
			}
		}
		if src.Image != "" {
			m, err := imageVolumeMount(src.Image, sub, vm.MountPath)
			if err != nil {
				return nil, fmt.Errorf("volumeMount %s: %w", vm.MountPath, err)
			}
			cfg.Mounts = append(cfg.Mounts, m)
			continue
		}
		if sub != "" {
			// Resolved within the volume, symlinks and all. Where a
			// container may write the volume (and so swap a directory of
			// the path for a symlink before the engine binds it), it is
			// bound onto a path of podrun's own, which the engine binds.
			f, p, err := subPathSource(src, sub)
			if err == nil {
				host = p
				if !src.ReadOnly {
					shared := vm.MountPropagation != nil && *vm.MountPropagation == v1.MountPropagationBidirectional
					host, err = bindSubPath(r.cfg.RootDir, string(pod.UID), vm.Name, c.Name, i, f, shared)
				}
				f.Close()
			}
			if err != nil {
				return nil, fmt.Errorf("volumeMount %s: %w", vm.MountPath, err)
			}
		}
		cfg.Mounts = append(cfg.Mounts, engine.Mount{
			HostPath:      host,
			ContainerPath: vm.MountPath,
			ReadOnly:      vm.ReadOnly || src.ReadOnly,
			Propagation:   propagation(vm.MountPropagation),
		})
	}
	if m := etcHostsMount(pe.HostsFile, c); m != nil {
		cfg.Mounts = append(cfg.Mounts, *m)
	}
	if c.TerminationMessagePath != "" {
		p, err := terminationMessageFile(r.cfg.RootDir, string(pod.UID), c.Name, attempt)
		if err != nil {
			return nil, fmt.Errorf("termination message file: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, engine.Mount{HostPath: p, ContainerPath: c.TerminationMessagePath})
	}
	return cfg, nil
}

func propagation(p *v1.MountPropagationMode) string {
	if p == nil {
		return ""
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return "rslave"
	case v1.MountPropagationBidirectional:
		return "rshared"
	}
	return "rprivate"
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// postStartTimeout bounds a postStart hook: the kubelet sets none, but a
// hook that never returns would hold the pod's worker for ever.
const postStartTimeout = 2 * time.Minute

// hookTarget is where a lifecycle hook of container id (spec c) of pod
// runs. An HTTPS httpGet hook that passed over HTTP is the kubelet's
// LifecycleHTTPFallback warning on the pod.
func (r *Runner) hookTarget(pod *v1.Pod, c *v1.Container, id, podIP string) health.Target {
	execer, _ := r.raw.(engine.Execer)
	return health.Target{ContainerID: id, PodIP: podIP, Container: c, Exec: execer,
		OnHTTPFallback: func(host string) {
			r.log.Info("HTTPS lifecycle hook got an HTTP answer; passed over HTTP", "pod", podKey(pod),
				"container", c.Name, "host", host)
			r.metrics.lifecycleHTTPFallback()
			r.event(pod, "", v1.EventTypeWarning, eventLifecycleHTTPFallback,
				"request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", host)
		}}
}

// postStart runs the container's postStart hook, if any. As in the kubelet,
// the next container waits for it, and a failed hook kills the container
// as any kill does (Killing, its preStop hook, the pod's grace period);
// the restart policy then applies.
func (r *Runner) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id, podIP string) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, postStartTimeout)
	defer cancel()
	err := health.RunHook(hctx, r.hookTarget(pod, c, id, podIP), c.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	r.log.Warn("postStart hook failed; killing the container", "pod", podKey(pod), "container", c.Name, "err", err)
	// The event leaves the hook's output out, as the kubelet's does: it
	// may hold secrets.
	r.event(pod, c.Name, v1.EventTypeWarning, eventFailedPostStartHook, "PostStartHook failed")
	k := killTarget{
		Container: &engine.Container{ID: id, Name: c.Name, State: engine.StateRunning,
			Pod: engine.PodRef{UID: string(pod.UID), Name: pod.Name, Namespace: pod.Namespace}},
		Reason: "postStart hook failed",
		Event:  eventFailedPostStartHook,
	}
	r.announceKill(pod, k)
	if serr := r.stopContainer(ctx, pod, podIP, k, GracePeriod(pod)); serr != nil {
		return fmt.Errorf("stop after failed postStart hook: %w", serr)
	}
	return &hookError{err: err}
}

// hookError is a postStart hook that failed (the kubelet's
// PostStartHookError).
type hookError struct{ err error }

func (e *hookError) Error() string { return "postStart hook failed: " + e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }
