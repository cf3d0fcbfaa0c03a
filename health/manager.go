package health

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Probe types, as the kubelet names them (in its events and in the
// probe_type label of its metrics).
const (
	ProbeStartup   = "Startup"
	ProbeLiveness  = "Liveness"
	ProbeReadiness = "Readiness"
)

// Kubelet defaults of a probe's timing fields, used where a field is unset.
const (
	defaultPeriodSeconds    = 10
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
	// maxProbeTries is how many times in a row a probe that could not be
	// run (Unknown) is tried before that period's run is given up.
	maxProbeTries = 3
)

// ManagerOptions are a Manager's dependencies.
type ManagerOptions struct {
	// Clock schedules the probes; nil is the real clock. (Each probe's own
	// timeout is real time.)
	Clock clock.Clock
	// Exec runs exec probes; nil makes them Unknown (never counted).
	Exec Execer
	// Log receives probe failures (debug) and changes of state (info); nil
	// discards.
	Log *slog.Logger
	// OnChange, if set, is called when a container of the pod changes
	// state: it became started, became ready or not ready, or must be
	// killed. It is called from a probe worker's goroutine, never with a
	// lock held, and never for the state a container is added with; it
	// should return quickly, and it must not call Stop.
	OnChange func(podUID string)
	// OnResult, if set, is called with every probe run's result (Success,
	// Failure, or Unknown for a run that could not be made), for metrics.
	// It is called concurrently from the probe workers.
	OnResult func(probeType string, result Result)
	// OnFailure, if set, is called with every failed probe run (below the
	// threshold too), for the Unhealthy events the kubelet records. It is
	// called concurrently from the probe workers.
	OnFailure func(podUID, container, probeType, message string)
	// OnError, if set, is called with every probe run that could not be
	// made (each of its tries errored: an unknown port name, the runtime
	// failing to exec), for the kubelet's Unhealthy "probe errored" events.
	// Such a run counts neither way. It is called concurrently from the
	// probe workers.
	OnError func(podUID, container, probeType, message string)
	// OnWarning, if set, is called with every probe run that passed with a
	// warning (an HTTP redirect to another host, not followed), for the
	// ProbeWarning events the kubelet records. It is called concurrently
	// from the probe workers.
	OnWarning func(podUID, container, probeType, message string)
}

// Verdict says that a container failed its liveness or startup probe and
// must be killed (and, by its restart policy, replaced).
type Verdict struct {
	// Probe is ProbeLiveness or ProbeStartup.
	Probe string
	// Message says why, as the kubelet's event does: "Liveness probe
	// failed: HTTP probe failed with statuscode: 500".
	Message string
	// GracePeriod is the probe's terminationGracePeriodSeconds, which
	// replaces the pod's for this kill; 0 when the probe sets none.
	GracePeriod time.Duration
}

// Manager probes running containers as the kubelet does, and keeps each
// one's verdicts: started (startup probe passed), ready (readiness probe
// passed), and whether it must be killed (liveness or startup probe failed
// failureThreshold times in a row).
//
// Each probe of a container runs on its own goroutine: first
// initialDelaySeconds after the container started, then every
// periodSeconds. A result changes the verdict only after successThreshold
// (failureThreshold) equal results in a row. Liveness and readiness probes
// do not run until the startup probe has passed; the readiness probe runs at
// once when it has, and its period counts from then (as the kubelet's
// manual trigger). After a kill verdict the
// container's liveness and startup probes stop; its replacement is added as
// a new container.
type Manager struct {
	opts  ManagerOptions
	clock clock.Clock
	log   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// running counts the probe workers not yet ended.
	running atomic.Int64
	// runsAsked counts the runs asked of workers (runNow) that they have
	// not yet taken up, so that a test can tell when every worker is idle.
	runsAsked atomic.Int64

	mu         sync.Mutex
	containers map[string]*probedContainer // by container ID
	stopped    bool
}

// probedContainer is one container being probed.
type probedContainer struct {
	podUID    string
	id        string
	spec      *v1.Container
	podIP     string
	startedAt time.Time
	cancel    context.CancelFunc
	// runReadiness asks the readiness worker to probe now (buffered, 1).
	runReadiness chan struct{}

	// Guarded by Manager.mu.
	started bool
	ready   bool // the readiness verdict (true when there is no readiness probe)
	kill    *Verdict
}

// NewManager returns a Manager that probes nothing yet.
func NewManager(opts ManagerOptions) *Manager {
	m := &Manager{
		opts:       opts,
		clock:      opts.Clock,
		log:        opts.Log,
		containers: make(map[string]*probedContainer),
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// AddContainer starts probing a running container: one that has just
// started at startedAt, or one found running (adopted). Its probes connect
// to podIP unless they name a host. Until its probes say otherwise, a
// container with a startup probe is not started, one with a readiness probe
// is not ready, and one with neither is both at once. Adding a container
// already known, or after Stop, does nothing.
func (m *Manager) AddContainer(podUID, containerID string, spec *v1.Container, podIP string, startedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || spec == nil || m.containers[containerID] != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	c := &probedContainer{
		podUID:       podUID,
		id:           containerID,
		spec:         spec.DeepCopy(),
		podIP:        podIP,
		startedAt:    startedAt,
		cancel:       cancel,
		runReadiness: make(chan struct{}, 1),
		started:      spec.StartupProbe == nil,
		ready:        spec.ReadinessProbe == nil,
	}
	m.containers[containerID] = c
	for _, w := range []struct {
		kind string
		p    *v1.Probe
	}{
		{ProbeStartup, c.spec.StartupProbe},
		{ProbeLiveness, c.spec.LivenessProbe},
		{ProbeReadiness, c.spec.ReadinessProbe},
	} {
		if w.p != nil {
			m.startWorker(ctx, c, w.kind, w.p)
		}
	}
}

// RemoveContainer stops probing a container (a probe in flight is
// cancelled) and forgets its verdicts. It does not wait for the workers to
// end. Removing an unknown container does nothing.
func (m *Manager) RemoveContainer(containerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.containers[containerID]; c != nil {
		delete(m.containers, containerID)
		c.cancel()
	}
}

// RemovePod stops probing every container of the pod, as RemoveContainer.
func (m *Manager) RemovePod(podUID string) {
	m.RemovePodExcept(podUID, nil)
}

// RemovePodExcept stops probing every container of the pod but those of
// keep, as RemoveContainer: the prober forgets containers gone from the
// runtime unseen (removed by someone else while nobody looked), which no
// RemoveContainer names.
func (m *Manager) RemovePodExcept(podUID string, keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, c := range m.containers {
		if c.podUID == podUID && !keep[id] {
			delete(m.containers, id)
			c.cancel()
		}
	}
}

// Stop ends every probe and waits for the workers to return. The Manager
// probes nothing afterwards.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	clear(m.containers)
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Started reports whether the container's startup probe has passed (true
// for a container without one). False for an unknown container.
func (m *Manager) Started(containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.containers[containerID]
	return c != nil && c.started
}

// Ready reports whether the container is started and its readiness probe
// has passed (true once started for a container without one). False for an
// unknown container.
func (m *Manager) Ready(containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.containers[containerID]
	return c != nil && c.started && c.ready
}

// KillVerdict reports whether the container failed its liveness or startup
// probe and must be killed, and why. The verdict stays until the container
// is removed.
func (m *Manager) KillVerdict(containerID string) (Verdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.containers[containerID]
	if c == nil || c.kill == nil {
		return Verdict{}, false
	}
	return *c.kill, true
}

// worker runs one probe of one container.
type worker struct {
	m      *Manager
	c      *probedContainer
	kind   string
	spec   *v1.Probe
	target Target
	// runNow, when it delivers, has the worker probe at once.
	runNow <-chan struct{}

	period           time.Duration
	successThreshold int
	failureThreshold int

	// The current run of equal results.
	last Result
	run  int
}

func (m *Manager) startWorker(ctx context.Context, c *probedContainer, kind string, p *v1.Probe) {
	w := &worker{
		m:                m,
		c:                c,
		kind:             kind,
		spec:             p,
		target:           Target{ContainerID: c.id, PodIP: c.podIP, Container: c.spec, Exec: m.opts.Exec},
		period:           time.Duration(orDefault(p.PeriodSeconds, defaultPeriodSeconds)) * time.Second,
		successThreshold: int(orDefault(p.SuccessThreshold, defaultSuccessThreshold)),
		failureThreshold: int(orDefault(p.FailureThreshold, defaultFailureThreshold)),
	}
	if kind == ProbeReadiness {
		w.runNow = c.runReadiness
	}
	m.wg.Add(1)
	m.running.Add(1)
	go w.loop(ctx)
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// loop probes at startedAt+initialDelay, then every period (a period
// missed by a slow probe is skipped), until ctx ends or the probe is done.
// A run asked through runNow after the initial delay comes at once, and
// the period counts from it.
func (w *worker) loop(ctx context.Context) {
	defer w.m.wg.Done()
	defer w.m.running.Add(-1)
	defer w.dropRunAsked()
	due := w.c.startedAt.Add(time.Duration(w.spec.InitialDelaySeconds) * time.Second)
	next := due
	for {
		if d := next.Sub(w.m.clock.Now()); d > 0 {
			t := w.m.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			case <-w.runNow:
				t.Stop()
				w.m.runsAsked.Add(-1)
				now := w.m.clock.Now()
				if now.Before(due) {
					continue // the initial delay still holds, as the kubelet's
				}
				next = now
			}
		}
		if ctx.Err() != nil || !w.probe(ctx) {
			return
		}
		if now := w.m.clock.Now(); !next.After(now) {
			next = next.Add((now.Sub(next)/w.period + 1) * w.period)
		}
	}
}

// dropRunAsked forgets a run asked of a worker that is ending.
func (w *worker) dropRunAsked() {
	select {
	case <-w.runNow:
		w.m.runsAsked.Add(-1)
	default:
	}
}

// probe runs the probe once if it is due (startup gating) and records the
// result; false when this worker has nothing more to do.
func (w *worker) probe(ctx context.Context) bool {
	w.m.mu.Lock()
	started, killed := w.c.started, w.c.kill != nil
	w.m.mu.Unlock()
	switch {
	case w.kind != ProbeReadiness && killed:
		return false
	case w.kind == ProbeStartup && started:
		return false
	case w.kind != ProbeStartup && !started:
		return true // not until the startup probe has passed
	}

	res, msg, err := Unknown, "", error(nil)
	for range maxProbeTries {
		if res, msg, err = RunProbe(ctx, w.target, w.spec); err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return false // removed while probing: the result means nothing
	}
	if err != nil {
		// Could not probe: the kubelet throws such a run away.
		w.m.log.Debug("probe errored", "probe", w.kind, "pod", w.c.podUID, "container", w.c.spec.Name, "err", err)
		w.m.report(w.kind, Unknown)
		if w.m.opts.OnError != nil {
			w.m.opts.OnError(w.c.podUID, w.c.spec.Name, w.kind, err.Error())
		}
		return true
	}
	switch res {
	case Warning:
		w.m.log.Debug("probe succeeded with a warning", "probe", w.kind, "pod", w.c.podUID, "container", w.c.spec.Name, "msg", msg)
		if w.m.opts.OnWarning != nil {
			w.m.opts.OnWarning(w.c.podUID, w.c.spec.Name, w.kind, msg)
		}
		res = Success
	case Unknown:
		res = Failure
	}
	w.m.report(w.kind, res)
	if res == Failure {
		w.m.log.Debug("probe failed", "probe", w.kind, "pod", w.c.podUID, "container", w.c.spec.Name, "msg", msg)
		if w.m.opts.OnFailure != nil {
			w.m.opts.OnFailure(w.c.podUID, w.c.spec.Name, w.kind, msg)
		}
	}

	if res == w.last {
		w.run++
	} else {
		w.last, w.run = res, 1
	}
	if (res == Failure && w.run < w.failureThreshold) || (res == Success && w.run < w.successThreshold) {
		return true
	}
	return w.m.apply(w, res, msg)
}

// runNow asks the worker reading ch to probe at once, unless it is asked
// already.
func (m *Manager) runNow(ch chan struct{}) {
	m.runsAsked.Add(1)
	select {
	case ch <- struct{}{}:
	default:
		m.runsAsked.Add(-1)
	}
}

func (m *Manager) report(kind string, r Result) {
	if m.opts.OnResult != nil {
		m.opts.OnResult(kind, r)
	}
}

// apply records a result that passed its threshold, calls OnChange if the
// container's state changed, and says whether the worker goes on.
func (m *Manager) apply(w *worker, res Result, msg string) bool {
	c := w.c
	m.mu.Lock()
	if m.containers[c.id] != c {
		m.mu.Unlock()
		return false
	}
	changed, keepGoing := false, true
	switch {
	case w.kind == ProbeReadiness:
		ready := res == Success
		changed, c.ready = c.ready != ready, ready
	case res == Failure: // liveness or startup
		c.kill = &Verdict{Probe: w.kind, Message: w.kind + " probe failed: " + msg}
		if g := w.spec.TerminationGracePeriodSeconds; g != nil && *g > 0 {
			c.kill.GracePeriod = time.Duration(*g) * time.Second
		}
		changed, keepGoing = true, false
	case w.kind == ProbeStartup:
		changed, c.started, keepGoing = !c.started, true, false
		// Readiness is probed at once rather than a readiness period
		// later, as the kubelet triggers it when a container has started
		// and is not ready.
		if changed && !c.ready {
			m.runNow(c.runReadiness)
		}
	}
	m.mu.Unlock()

	if !changed {
		return keepGoing
	}
	log := m.log.With("pod", c.podUID, "container", c.spec.Name, "id", c.id)
	switch {
	case w.kind == ProbeReadiness:
		log.Info("container readiness changed", "ready", res == Success, "msg", msg)
	case res == Failure:
		log.Info("container will be killed", "reason", w.kind+" probe failed", "msg", msg)
	default:
		log.Info("container started (startup probe passed)")
	}
	if m.opts.OnChange != nil {
		m.opts.OnChange(c.podUID)
	}
	return keepGoing
}
