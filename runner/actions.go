package runner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/kubelet/util/format"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
)

// podState is what the runtime holds for one pod.
type podState struct {
	// Sandboxes and Containers are sorted newest first (by attempt, then
	// creation time).
	Sandboxes  []*engine.Sandbox
	Containers []*engine.Container
}

func (s *podState) sort() {
	sort.SliceStable(s.Sandboxes, func(i, j int) bool {
		a, b := s.Sandboxes[i], s.Sandboxes[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	sort.SliceStable(s.Containers, func(i, j int) bool {
		a, b := s.Containers[i], s.Containers[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
}

// latestSandbox is the sandbox the pod's containers should be in, or nil.
func (s *podState) latestSandbox() *engine.Sandbox {
	if len(s.Sandboxes) == 0 {
		return nil
	}
	return s.Sandboxes[0]
}

// latest returns the newest container named name, in sandboxID when it is
// not empty.
func (s *podState) latest(name, sandboxID string) *engine.Container {
	for _, c := range s.Containers {
		if c.Name == name && (sandboxID == "" || c.SandboxID == sandboxID) {
			return c
		}
	}
	return nil
}

// lastExited is the newest run named name that has exited, in any
// sandbox, or nil: the crash-loop back-off counts from it, as the
// kubelet's doBackOff, also while a newer run is still being stopped.
func (s *podState) lastExited(name string) *engine.Container {
	for _, c := range s.Containers {
		if c.Name == name && c.State == engine.StateExited {
			return c
		}
	}
	return nil
}

// nextAttempt is the attempt number of the next container named name: one
// past every attempt the runtime has seen, so names never collide.
func (s *podState) nextAttempt(name string) int {
	if c := s.latest(name, ""); c != nil {
		return c.Attempt + 1
	}
	return 0
}

// killTarget is a container to stop, and why.
type killTarget struct {
	Container *engine.Container
	Reason    string
	// Grace replaces the pod's grace period when set (a probe's
	// terminationGracePeriodSeconds).
	Grace time.Duration
	// Event, when set, is the Killing event's message in place of
	// "Stopping container NAME (Reason)".
	Event string
	// Turn, when set, is the stops that end before this one's stop signal
	// (a sidecar's: after its preStop hook, within the grace period).
	Turn []<-chan struct{}
	// Began is when the grace period began (the pod's termination); zero:
	// when this stop begins.
	Began time.Time
}

// probeKill is the kill of a container that failed its liveness or startup
// probe, with the kubelet's Killing message ("Container app failed
// liveness probe, will be restarted"; "Init container ..." for a sidecar),
// which tools and the conformance specs look for.
func probeKill(st *engine.Container, v health.Verdict, sidecar, restart bool) killTarget {
	k := killTarget{Container: st, Reason: v.Message, Grace: v.GracePeriod}
	k.Event = fmt.Sprintf("Container %s failed %s probe", st.Name, strings.ToLower(v.Probe))
	switch {
	case sidecar:
		k.Event = "Init c" + k.Event[1:]
	case restart:
		k.Event += ", will be restarted"
	}
	return k
}

// probeVerdicts is what compute-actions needs of the prober: which running
// containers failed their liveness or startup probe.
type probeVerdicts interface {
	KillVerdict(containerID string) (health.Verdict, bool)
	Started(containerID string) bool
}

// waiting is why a container is not running when it should be.
type waiting struct {
	Reason  string // CrashLoopBackOff, PodInitializing, ...
	Message string
	// Retry is when a sync should look again; zero: on the next event.
	Retry time.Duration
}

// podActions is what one sync must do to bring a pod to its spec. It is
// computed from the spec, the runtime's state and the back-off state, and
// nothing else, so it can be tested without a runtime.
type podActions struct {
	// KillPod stops every container and the sandbox before anything else.
	KillPod bool
	// CreateSandbox makes a new sandbox with SandboxAttempt.
	CreateSandbox  bool
	SandboxAttempt int
	// AdoptSandbox, with CreateSandbox, is the latest sandbox when it was
	// made and never started (podrun died between the two): it is started
	// (RunSandbox with its attempt), not stopped by KillPod nor replaced.
	AdoptSandbox *engine.Sandbox
	// SandboxID is the sandbox containers are started in when no new one is
	// made.
	SandboxID string

	// StartInit is the init container to start next, or nil.
	StartInit *v1.Container
	// StartSidecars are the sidecars (init containers with restartPolicy
	// Always) to start in a pod whose initialisation is over (an app
	// container was made in its sandbox): each one that exited, failed a
	// probe or whose spec changed, all in the same sync as the app
	// containers' actions, as the kubelet's InitContainersToStart. (Before
	// that, one init container at a time is StartInit.)
	StartSidecars []*v1.Container
	// StartApps are the app containers to start.
	StartApps []*v1.Container
	// StartEphemeral are the ephemeral containers to start (ephemeral.go).
	StartEphemeral []*v1.Container
	// StartCreated are containers that were created but never started (a
	// podrun killed between create and start left them): start, not replace.
	StartCreated []*engine.Container
	// Kill are containers to stop (and keep, for their status and logs).
	Kill []killTarget
	// UpdateResources are running containers whose resources alone changed.
	UpdateResources []*v1.Container
	// StopSandbox stops the sandbox of a pod that has finished.
	StopSandbox bool

	// StopSandboxes are running sandboxes of the pod other than its latest
	// (see reconcileSandboxes); their running containers are in Kill, and
	// are stopped first.
	StopSandboxes []*engine.Sandbox
	// Remove are leftover containers to remove (never running ones): those
	// of older sandboxes that are superseded or were never started, and
	// created ones the latest sandbox no longer needs.
	Remove []*engine.Container
	// RemoveSandboxes are dead sandboxes other than the latest that hold no
	// container once Remove is done.
	RemoveSandboxes []*engine.Sandbox

	// Waiting says why containers that should run do not, by name.
	Waiting map[string]waiting
	// PodFailed is set when the pod can never succeed (an init container
	// failed under restartPolicy Never).
	PodFailed bool
	// DeadlineExceeded is set when the pod is past its
	// activeDeadlineSeconds (deadline.go): it is Failed for good.
	DeadlineExceeded bool
	// DeadlineIn is how long until the pod reaches its
	// activeDeadlineSeconds (0: no deadline, or past it): a sync must run
	// then.
	DeadlineIn time.Duration
	// KillReason says why KillPod stops the pod's containers (empty: the
	// pod is being replaced).
	KillReason string

	// SandboxReason says why CreateSandbox is set, and Reasons, by
	// container name, why each container of StartInit, StartSidecars,
	// StartApps, StartCreated and UpdateResources is acted on (Kill
	// targets carry their own): for the log, and for `podrun plan` (Plan).
	SandboxReason string
	Reasons       map[string]string
}

// Why a sync acts, as its log lines and Plan say it.
const (
	reasonNoSandbox      = "no sandbox"
	reasonSandboxChanged = "sandbox spec changed"
	reasonSandboxStopped = "sandbox is not running"
	reasonNewSandbox     = "the pod's sandbox is new"
	reasonSpecChanged    = "container spec changed"
	reasonNotCreated     = "not created yet"
	reasonNeverStarted   = "created but never started"
	reasonResources      = "resources changed"
	reasonPodFinished    = "pod has finished"
	reasonNotLatest      = "not the pod's latest sandbox"
)

func (a *podActions) wait(name string, w waiting) {
	if a.Waiting == nil {
		a.Waiting = map[string]waiting{}
	}
	a.Waiting[name] = w
}

func (a *podActions) because(name, why string) {
	if a.Reasons == nil {
		a.Reasons = map[string]string{}
	}
	a.Reasons[name] = why
}

func (a *podActions) startInit(c *v1.Container, why string) {
	a.StartInit = c
	a.because(c.Name, why)
}

func (a *podActions) startSidecar(c *v1.Container, why string) {
	a.StartSidecars = append(a.StartSidecars, c)
	a.because(c.Name, why)
}

// initStarts are the init containers a sync starts: StartInit, then
// StartSidecars.
func (a *podActions) initStarts() []*v1.Container {
	if a.StartInit == nil {
		return a.StartSidecars
	}
	return append([]*v1.Container{a.StartInit}, a.StartSidecars...)
}

// startsInit reports whether the sync starts an init container, as
// len(a.initStarts()) > 0 without making the list.
func (a *podActions) startsInit() bool {
	return a.StartInit != nil || len(a.StartSidecars) > 0
}

func (a *podActions) startApp(c *v1.Container, why string) {
	a.StartApps = append(a.StartApps, c)
	a.because(c.Name, why)
}

func (a *podActions) startCreated(c *engine.Container) {
	a.StartCreated = append(a.StartCreated, c)
	a.because(c.Name, reasonNeverStarted)
}

// exitedReason is why an exited container st is started again.
func exitedReason(st *engine.Container, policy string) string {
	return fmt.Sprintf("exited with code %d, restartPolicy %s", st.ExitCode, policy)
}

// RetryAfter is the soonest a sync should run again for back-off to expire,
// or 0.
func (a *podActions) RetryAfter() time.Duration {
	d := a.DeadlineIn
	for _, w := range a.Waiting {
		if w.Retry > 0 && (d == 0 || w.Retry < d) {
			d = w.Retry
		}
	}
	return d
}

// Empty reports whether the sync has nothing to change.
func (a *podActions) Empty() bool {
	return !a.KillPod && !a.CreateSandbox && !a.startsInit() && len(a.StartApps) == 0 && len(a.StartEphemeral) == 0 &&
		len(a.StartCreated) == 0 && len(a.Kill) == 0 && len(a.UpdateResources) == 0 && !a.StopSandbox &&
		len(a.StopSandboxes) == 0 && len(a.Remove) == 0 && len(a.RemoveSandboxes) == 0
}

// Converged reports whether nothing of the pod runs that must not: no
// sandbox or container to stop. Then the pod has at most one running
// sandbox, its latest (exactly one unless it has finished), and nothing
// runs but the latest attempt of each of the spec's containers in it.
//
// What is missing (a container not started yet) shows in the pod's status;
// what runs but must not (a second sandbox a killed podrun's late start
// brought up, a container of an older attempt) does not, since the status
// shows only the latest attempt of each name: so `podrun once` waits for
// this too before it reports success. Leftovers that run nothing (dead or
// never started objects in Remove, RemoveSandboxes) do not count: they are
// removed in the same sync, before its status is published, and one whose
// removal fails (logged, tried again with back-off) must not keep `once`
// from succeeding. Nor do starts and in-place resource updates, which the
// status shows or which change nothing that runs.
func (a *podActions) Converged() bool {
	return !a.KillPod && len(a.Kill) == 0 && !a.StopSandbox && len(a.StopSandboxes) == 0
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// computePodActions decides what a sync does, following the kubelet's
// computePodActions: a missing, dead or changed sandbox means a fresh pod;
// otherwise init containers run in order, each to success (sidecars are kept
// running), then app containers are started, restarted under the restart
// policy and back-off, or replaced when their spec changed.
func computePodActions(pod *v1.Pod, state *podState, backoff *flowcontrol.Backoff, probes probeVerdicts) *podActions {
	a := &podActions{}
	sb := state.latestSandbox()
	sandboxHash := SandboxHash(pod)

	createSandbox := sb == nil || sb.State != engine.StateRunning || sb.Hash != sandboxHash
	if createSandbox {
		// A pod that will not restart its containers and has already run
		// some stays finished: its sandbox is not made again. So does a pod
		// under restartPolicy Never whose sandbox died after it had run
		// containers, even one that still ran: the kubelet stops it and
		// makes no new sandbox (computePodActions:
		// !shouldRestartOnFailure(pod) && attempt != 0).
		if sb != nil && sb.Hash == sandboxHash && (podFinished(pod, state, sb.ID) ||
			neverRunsAgain(pod) && sb.State != engine.StateCreated && len(state.Containers) > 0 && !editedSinceRun(pod, state)) {
			a.Kill = runningKills(state, reasonPodFinished)
			// An older sandbox that runs (a late start) is stopped too,
			// and what runs nothing goes, as for a pod that runs.
			reconcileSandboxes(state, sb, specNamesOf(pod), a)
			a.PodFailed = initFailed(pod, state, sb.ID)
			return a
		}
		a.KillPod = sb != nil || len(runningContainers(state)) > 0
		a.CreateSandbox = true
		switch {
		case sb == nil:
			a.SandboxReason = reasonNoSandbox
		case sb.Hash != sandboxHash:
			a.SandboxReason = reasonSandboxChanged
		default:
			a.SandboxReason = reasonSandboxStopped
		}
		if sb != nil {
			a.SandboxAttempt = sb.Attempt + 1
			if sb.State == engine.StateCreated && sb.Hash == sandboxHash {
				a.AdoptSandbox, a.SandboxAttempt = sb, sb.Attempt
			}
		}
		// What runs nothing goes in this sync, before the new sandbox is
		// made, as when the sandbox runs.
		removeDead(state, a.AdoptSandbox, specNamesOf(pod), a)
		// A container whose last run (in the dead sandbox) is in its
		// crash-loop back-off waits for it in the new one too: the
		// kubelet's doBackOff holds every start.
		if len(pod.Spec.InitContainers) > 0 {
			c := &pod.Spec.InitContainers[0]
			if !heldInBackoff(pod, c, state, backoff, a) {
				a.startInit(c, reasonNewSandbox)
				a.wait(c.Name, waiting{Reason: "PodInitializing"})
			}
			waitApps(pod, a)
			return a
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if succeededBefore(pod, c, state) || heldInBackoff(pod, c, state, backoff, a) {
				continue
			}
			a.startApp(c, reasonNewSandbox)
		}
		return a
	}
	a.SandboxID = sb.ID

	// Containers of older sandboxes, and containers no longer in the spec,
	// must not run. A running one is stopped (gracefully, and kept for its
	// status and logs until the rule of reconcileSandboxes removes it); a
	// created one never ran, so there is nothing to stop or keep: it is
	// removed. (Stopping it would do nothing - Docker leaves a created
	// container created - and a start that a killed podrun sent could
	// still run it later.)
	specNames := specNamesOf(pod)
	for _, c := range state.Containers {
		if c.State != engine.StateRunning && c.State != engine.StateCreated {
			continue
		}
		reason := ""
		switch {
		case c.SandboxID != sb.ID:
			reason = "container of an older sandbox"
		case !specNames[c.Name]:
			reason = "container removed from the pod spec"
		case state.latest(c.Name, sb.ID) != c:
			reason = "superseded by a newer attempt"
		default:
			continue
		}
		if c.State == engine.StateCreated {
			a.Remove = append(a.Remove, c)
			continue
		}
		a.Kill = append(a.Kill, killTarget{Container: c, Reason: reason})
	}
	reconcileSandboxes(state, sb, specNames, a)
	// Before initialisation is done, as the kubelet: a debug container is
	// of most use when an init container is stuck.
	computeEphemeralActions(pod, state, a)

	if !computeInitActions(pod, state, sb.ID, backoff, probes, a) {
		return a
	}

	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		computeContainerAction(pod, c, state, sb.ID, backoff, probes, a)
	}

	if len(a.StartApps) == 0 && len(a.StartCreated) == 0 && terminalApps(pod, state, sb.ID) {
		// Every app container is done for good: stop the sidecars (and
		// any ephemeral container) and the sandbox, keep the containers for
		// their status and logs.
		for _, c := range state.Containers {
			if c.SandboxID == sb.ID && c.State == engine.StateRunning &&
				(c.Type == engine.ContainerTypeInit || c.Type == engine.ContainerTypeEphemeral) {
				a.Kill = append(a.Kill, killTarget{Container: c, Reason: reasonPodFinished})
			}
		}
		a.StopSandbox = true
		a.StartEphemeral = nil
		// Nor is an exited sidecar started again to keep the pod alive:
		// the kubelet clears InitContainersToStart when it kills the pod
		// (computePodActions).
		for _, c := range a.StartSidecars {
			delete(a.Reasons, c.Name)
		}
		a.StartSidecars = nil
	}
	return a
}

// reconcileSandboxes brings a pod whose latest sandbox sb runs and is
// current, or has the finished pod's runs, to exactly one sandbox, sb, and
// removes what older attempts left (removeDead). A podrun killed
// mid-bring-up may have sent a start that completes inside the engine
// after the next podrun judged that sandbox dead and made a new one: then
// two sandboxes run, each with containers.
//
// The kubelet, seeing more than one sandbox, kills the whole pod and makes
// it again. podrun keeps sb and its containers (this function is only
// called with such a sandbox) and stops every other running sandbox (its
// running containers are already in Kill): the pod that is up stays up.
// When the latest sandbox does not run, the KillPod path stops everything
// but a sandbox it adopts, removes what runs nothing (removeDead, with no
// sandbox to keep but the adopted one) and makes or adopts the latest.
//
// Leftovers are removed by the sync itself, in once as in watch, not left
// to watch's garbage collection. Everything is decided here, from the
// state alone; applyActions only carries it out.
func reconcileSandboxes(state *podState, sb *engine.Sandbox, specNames map[string]bool, a *podActions) {
	removeDead(state, sb, specNames, a)
	for _, o := range state.Sandboxes {
		if o != sb && o.State != engine.StateExited && o.State != engine.StateCreated {
			// Running, or unknown: stop it, as killPod would.
			a.StopSandboxes = append(a.StopSandboxes, o)
		}
	}
}

// removeDead adds to a.Remove and a.RemoveSandboxes what runs nothing and
// is kept for nothing, outside keep, the sandbox the pod goes on in (its
// containers are the caller's to judge; nil when a new sandbox is made):
// a container created and never started, one whose start failed and that
// is not the newest of its name, a dead one no longer in the spec or not
// one of the runs of its name the status reads (statusRun: the newest and
// the run before it, kept whatever their sandbox, as the kubelet's status
// reads every container of the pod's UID), and then a dead sandbox none
// of whose containers is left.
func removeDead(state *podState, keep *engine.Sandbox, specNames map[string]bool, a *podActions) {
	removed := map[string]bool{}
	for _, c := range a.Remove {
		removed[c.ID] = true
	}
	for _, c := range state.Containers {
		if keep != nil && c.SandboxID == keep.ID || c.State == engine.StateRunning || removed[c.ID] {
			continue
		}
		// A start that failed in an older sandbox (one that died under
		// it: a killed podrun's late start) never ran: no run before the
		// newest, as its error says nothing of the sandbox made since.
		if c.State == engine.StateCreated || !specNames[c.Name] || !statusRun(state, c) ||
			failedStart(c) && state.latest(c.Name, "") != c {
			a.Remove = append(a.Remove, c)
			removed[c.ID] = true
		}
	}
	occupied := map[string]bool{}
	for _, c := range state.Containers {
		if !removed[c.ID] {
			occupied[c.SandboxID] = true
		}
	}
	for _, o := range state.Sandboxes {
		if o != keep && (o.State == engine.StateExited || o.State == engine.StateCreated) && !occupied[o.ID] {
			a.RemoveSandboxes = append(a.RemoveSandboxes, o)
		}
	}
}

// failedStart reports whether c never ran: its start failed (the runtime
// says why in Message) and it has no run time of its own (Docker stamps
// both times with the creation, a CRI runtime leaves the start unset).
// A run that ended with an error the runtime explains (CRI's "Unknown"
// after a restart of containerd) did run.
func failedStart(c *engine.Container) bool {
	return c.State == engine.StateExited && c.Message != "" && (c.StartedAt.IsZero() || c.FinishedAt.Equal(c.StartedAt))
}

// specNamesOf is the set of the names of pod's containers, of every kind.
func specNamesOf(pod *v1.Pod) map[string]bool {
	names := map[string]bool{}
	for _, c := range slices.Concat(allContainers(pod), ephemeralContainers(pod)) {
		names[c.Name] = true
	}
	return names
}

// statusRun reports whether c is one of the runs of its name that the
// pod's status reads: the newest (the container's state, what `podrun logs`
// shows) or the run before it (its lastState, what `logs --previous`
// shows). After the sandbox is made again (dockerd restarted without
// live-restore, the box rebooted, the pause container killed) the run
// before is in the older sandbox, and is the one the operator wants to see.
// A run that was still running after the newest had started is no run
// before it but a duplicate (a killed podrun's late start, stopped by
// reconcileSandboxes): it goes.
func statusRun(state *podState, c *engine.Container) bool {
	cur := state.latest(c.Name, "")
	switch {
	case cur == c:
		return true
	case cur == nil || previousRun(state, c.Name, cur) != c:
		return false
	}
	return cur.StartedAt.IsZero() || !c.FinishedAt.After(cur.StartedAt)
}

// computeInitActions decides the init-container step and reports whether the
// app containers may be looked at (every init container has done its part).
func computeInitActions(pod *v1.Pod, state *podState, sandboxID string, backoff *flowcontrol.Backoff, probes probeVerdicts, a *podActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	// Once an app container has been made in this sandbox, initialisation is
	// over even if the init containers have since been collected.
	appsStarted := false
	for i := range pod.Spec.Containers {
		if state.latest(pod.Spec.Containers[i].Name, sandboxID) != nil {
			appsStarted = true
			break
		}
	}
	// Once initialisation is over, every sidecar is looked at in the same
	// sync, and the app containers after them: a sidecar to start again
	// holds nothing back (the kubelet's computeInitContainerActions).
	// Before, init containers start one at a time, in order.
	startSidecar := a.startInit
	if appsStarted {
		startSidecar = a.startSidecar
	}
	for i := range inits {
		c := &inits[i]
		st := state.latest(c.Name, sandboxID)
		if isSidecar(c) {
			if st != nil && st.State == engine.StateRunning && probes != nil {
				if v, kill := probes.KillVerdict(st.ID); kill {
					a.Kill = append(a.Kill, probeKill(st, v, true, true))
					startProbeKilled(pod, c, state, backoff, v, a, startSidecar)
					if appsStarted {
						continue
					}
					return false
				}
			}
			if st != nil && st.State == engine.StateRunning {
				if st.Hash != ContainerHash(c) {
					a.Kill = append(a.Kill, killTarget{Container: st, Reason: reasonSpecChanged})
					startSidecar(c, reasonSpecChanged)
					if appsStarted {
						continue
					}
					return false
				}
				// The next init container waits until the sidecar has
				// started: its startup probe passed (at once without one).
				// The prober's change of verdict syncs the pod again.
				if !appsStarted && probes != nil && !probes.Started(st.ID) {
					waitApps(pod, a)
					return false
				}
				continue
			}
			if st != nil && st.State == engine.StateCreated {
				a.startCreated(st)
				if appsStarted {
					continue
				}
				return false
			}
			if (st == nil || st.State == engine.StateExited) && heldInBackoff(pod, c, state, backoff, a) {
				if appsStarted {
					continue
				}
				return false
			}
			if st == nil {
				startSidecar(c, reasonNotCreated)
			} else {
				startSidecar(c, exitedReason(st, string(v1.ContainerRestartPolicyAlways)))
			}
			if appsStarted {
				continue
			}
			return false
		}
		if appsStarted {
			continue
		}
		switch {
		case st == nil:
			if !heldInBackoff(pod, c, state, backoff, a) {
				a.startInit(c, reasonNotCreated)
			}
			waitApps(pod, a)
			return false
		case st.State == engine.StateCreated:
			a.startCreated(st)
			waitApps(pod, a)
			return false
		case st.State == engine.StateRunning:
			waitApps(pod, a)
			return false
		case st.ExitCode == 0 && !st.OOMKilled:
			continue
		}
		// This init container failed: it exited non-zero, or was
		// OOM-killed, which the kubelet's isInitContainerFailed counts as
		// a failure whatever the exit code.
		if !RestartsAfterExit(pod, c, st.ExitCode) {
			a.PodFailed = true
			a.Kill = append(a.Kill, runningKills(state, "init container failed")...)
			a.StopSandbox = true
			return false
		}
		if w, held := inBackoff(pod, c, st, backoff); held {
			a.wait(c.Name, w)
		} else {
			a.startInit(c, exitedReason(st, string(containerPolicy(pod, c))))
		}
		waitApps(pod, a)
		return false
	}
	return true
}

func waitApps(pod *v1.Pod, a *podActions) {
	for i := range pod.Spec.Containers {
		a.wait(pod.Spec.Containers[i].Name, waiting{Reason: "PodInitializing"})
	}
}

func computeContainerAction(pod *v1.Pod, c *v1.Container, state *podState, sandboxID string,
	backoff *flowcontrol.Backoff, probes probeVerdicts, a *podActions) {
	policy := containerPolicy(pod, c)
	st := state.latest(c.Name, sandboxID)
	switch {
	case st == nil && succeededBefore(pod, c, state):
		// Done in an earlier sandbox of the pod: not run again.
	case st == nil:
		if !heldInBackoff(pod, c, state, backoff, a) {
			a.startApp(c, reasonNotCreated)
		}
	case st.State == engine.StateCreated:
		if st.Hash != ContainerHash(c) {
			a.Kill = append(a.Kill, killTarget{Container: st, Reason: reasonSpecChanged})
			a.startApp(c, reasonSpecChanged)
			return
		}
		a.startCreated(st)
	case st.State == engine.StateRunning:
		if st.Hash != ContainerHash(c) {
			// A changed spec replaces the container whatever the restart
			// policy, as the kubelet does.
			a.Kill = append(a.Kill, killTarget{Container: st, Reason: reasonSpecChanged})
			a.startApp(c, reasonSpecChanged)
			return
		}
		if probes != nil {
			if v, kill := probes.KillVerdict(st.ID); kill {
				restart := policy != v1.RestartPolicyNever
				a.Kill = append(a.Kill, probeKill(st, v, false, restart))
				if restart {
					startProbeKilled(pod, c, state, backoff, v, a, a.startApp)
				}
				return
			}
		}
		if st.ResourcesHash != ResourcesHash(c) {
			a.UpdateResources = append(a.UpdateResources, c)
			a.because(c.Name, reasonResources)
		}
	default: // exited or unknown
		if st.Hash != ContainerHash(c) && policy != v1.RestartPolicyAlways {
			// An edited container of a finished pod runs once more.
			a.startApp(c, reasonSpecChanged)
			return
		}
		if !RestartsAfterExit(pod, c, st.ExitCode) {
			return
		}
		if w, held := inBackoff(pod, c, st, backoff); held {
			a.wait(c.Name, w)
			return
		}
		a.startApp(c, restartReason(c, st, policy))
	}
}

// startProbeKilled starts the successor of c's run killed by a failed
// liveness or startup probe in the sync that kills it, as the kubelet
// does: the probe decided the restart, so how the program then exits does
// not matter (one that exits 0 on SIGTERM under OnFailure runs again). The
// crash-loop back-off counts from the newest run that had exited before
// (the kubelet's doBackOff); while it holds, the next sync finds the
// killed run exited and decides as for a crash.
func startProbeKilled(pod *v1.Pod, c *v1.Container, state *podState, backoff *flowcontrol.Backoff, v health.Verdict,
	a *podActions, start func(*v1.Container, string)) {
	if heldInBackoff(pod, c, state, backoff, a) {
		return
	}
	start(c, fmt.Sprintf("failed %s probe", strings.ToLower(v.Probe)))
}

// restartReason is why c is started again after its run st exited: a
// restart rule of c when one matches, else policy.
func restartReason(c *v1.Container, st *engine.Container, policy v1.RestartPolicy) string {
	if c.RestartPolicy != nil {
		for i, r := range c.RestartPolicyRules {
			if ruleMatches(r, st.ExitCode) {
				return fmt.Sprintf("exited with code %d, restartPolicyRules[%d] matched", st.ExitCode, i)
			}
		}
	}
	return exitedReason(st, string(policy))
}

// heldInBackoff reports whether a start of c must wait for the crash-loop
// back-off of its newest exited run, whatever the sandbox of that run, and
// then records the wait in a: the kubelet's doBackOff, called for every
// start, looks at the newest run of the name in the pod, also when the
// start is into a new sandbox or the first of the name in this one.
func heldInBackoff(pod *v1.Pod, c *v1.Container, state *podState, backoff *flowcontrol.Backoff, a *podActions) bool {
	prev := state.lastExited(c.Name)
	if prev == nil {
		return false
	}
	w, held := inBackoff(pod, c, prev, backoff)
	if held {
		a.wait(c.Name, w)
	}
	return held
}

// inBackoff reports whether restarting c (whose last run is st) must wait.
func inBackoff(pod *v1.Pod, c *v1.Container, st *engine.Container, backoff *flowcontrol.Backoff) (waiting, bool) {
	key := backoffKey(pod, c)
	ts := st.FinishedAt
	if ts.IsZero() {
		ts = st.CreatedAt
	}
	if !backoff.IsInBackOffSince(key, ts) {
		return waiting{}, false
	}
	d := backoff.Get(key)
	remaining := d - backoff.Clock.Since(ts)
	return waiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", d, c.Name, format.Pod(pod)),
		Retry:   remaining,
	}, true
}

// podFinished reports whether the pod in sandboxID is done for good: the
// restart policies will not run anything again.
func podFinished(pod *v1.Pod, state *podState, sandboxID string) bool {
	return terminalApps(pod, state, sandboxID) || initFailed(pod, state, sandboxID)
}

// initFailed reports whether a (non-sidecar) init container failed in
// sandboxID (exited non-zero, or was OOM-killed, as the kubelet's
// isInitContainerFailed) and its restart policy does not run it again.
func initFailed(pod *v1.Pod, state *podState, sandboxID string) bool {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(c) {
			continue
		}
		if st := state.latest(c.Name, sandboxID); st != nil && st.State == engine.StateExited && (st.ExitCode != 0 || st.OOMKilled) &&
			!RestartsAfterExit(pod, c, st.ExitCode) {
			return true
		}
	}
	return false
}

// terminalApps reports whether every app container has exited for good
// under its restart policy and rules (Never: exited at all; OnFailure:
// exited 0; a rule may restart either).
func terminalApps(pod *v1.Pod, state *podState, sandboxID string) bool {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := state.latest(c.Name, sandboxID)
		if st == nil && succeededBefore(pod, c, state) {
			continue
		}
		if st == nil || st.State != engine.StateExited {
			return false
		}
		if st.Hash != ContainerHash(c) {
			return false
		}
		if RestartsAfterExit(pod, c, st.ExitCode) {
			return false
		}
	}
	return true
}

// succeededBefore reports whether c, under OnFailure (its own or the
// pod's), has run to success in any sandbox of the pod as it is specified
// now: it is done for good, even after the pod's sandbox was made again (a
// dockerd restart), as the kubelet looks at a container's last run
// whatever its sandbox.
func succeededBefore(pod *v1.Pod, c *v1.Container, state *podState) bool {
	if containerPolicy(pod, c) != v1.RestartPolicyOnFailure {
		return false
	}
	last := state.latest(c.Name, "")
	return last != nil && last.State == engine.StateExited && last.ExitCode == 0 && last.Hash == ContainerHash(c)
}

func runningContainers(state *podState) []*engine.Container {
	var out []*engine.Container
	for _, c := range state.Containers {
		if c.State == engine.StateRunning {
			out = append(out, c)
		}
	}
	return out
}

func runningKills(state *podState, reason string) []killTarget {
	var out []killTarget
	for _, c := range runningContainers(state) {
		out = append(out, killTarget{Container: c, Reason: reason})
	}
	return out
}

// neverRunsAgain reports whether the pod's restartPolicy is Never and no
// container of it but its sidecars has a restartPolicy or rules of its
// own: then the kubelet makes no new sandbox for a pod that has run
// containers. A container that may run again keeps podrun's decision of
// any pod: the pod is made again unless it has finished.
func neverRunsAgain(pod *v1.Pod) bool {
	if pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		return false
	}
	for i, c := range allContainers(pod) {
		if i < len(pod.Spec.InitContainers) && isSidecar(c) {
			continue
		}
		if c.RestartPolicy != nil && (*c.RestartPolicy != v1.ContainerRestartPolicyNever || len(c.RestartPolicyRules) > 0) {
			return false
		}
	}
	return true
}

// editedSinceRun reports whether the pod's spec was edited since its
// containers ran: a container whose latest run is of another spec, or,
// when every app container that ran has exited, one that never ran (added
// by the edit). The kubelet gives an edited static pod a new UID, a new
// pod that runs from the start; podrun keeps the UID, so it looks at the
// runs. (A Never pod whose sandbox died while an app ran, or before any
// did, has no edit here: it is stopped, as the kubelet's.)
func editedSinceRun(pod *v1.Pod, state *podState) bool {
	for _, c := range allContainers(pod) {
		if st := state.latest(c.Name, ""); st != nil && st.Hash != ContainerHash(c) {
			return true
		}
	}
	ran, unrun := false, false
	for i := range pod.Spec.Containers {
		st := state.latest(pod.Spec.Containers[i].Name, "")
		switch {
		case st == nil:
			unrun = true
		case st.State != engine.StateExited:
			return false // the pod was running: no edit made it stop
		default:
			ran = true
		}
	}
	return ran && unrun
}
