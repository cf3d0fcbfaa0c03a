package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

// scriptedExec answers exec probes by the command's first word, and
// counts the calls.
type scriptedExec struct {
	mu      sync.Mutex
	answers map[string]execAnswer
	calls   map[string]int
	entered chan string // if set, told of each call
}

type execAnswer struct {
	code  int
	out   string
	err   error
	block bool // until ctx ends
}

func newScriptedExec() *scriptedExec {
	return &scriptedExec{answers: map[string]execAnswer{}, calls: map[string]int{}}
}

func (s *scriptedExec) set(cmd string, a execAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[cmd] = a
}

func (s *scriptedExec) count(cmd string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[cmd]
}

func (s *scriptedExec) Exec(ctx context.Context, _ string, cmd []string) (int, []byte, error) {
	s.mu.Lock()
	s.calls[cmd[0]]++
	a := s.answers[cmd[0]]
	entered := s.entered
	s.mu.Unlock()
	if entered != nil {
		entered <- cmd[0]
	}
	if a.block {
		<-ctx.Done()
		return -1, nil, ctx.Err()
	}
	return a.code, []byte(a.out), a.err
}

var (
	pass = execAnswer{code: 0, out: "ok"}
	fail = execAnswer{code: 1, out: "boom"}
)

// harness is a Manager on a fake clock.
type harness struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	exec  *scriptedExec
	m     *Manager

	mu      sync.Mutex
	changes map[string]int
	results map[string]int // "Liveness/failure" -> count
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:       t,
		clock:   clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		exec:    newScriptedExec(),
		changes: map[string]int{},
		results: map[string]int{},
	}
	h.m = NewManager(ManagerOptions{
		Clock: h.clock,
		Exec:  h.exec,
		OnChange: func(pod string) {
			h.mu.Lock()
			h.changes[pod]++
			h.mu.Unlock()
		},
		OnResult: func(kind string, r Result) {
			h.mu.Lock()
			h.results[kind+"/"+r.String()]++
			h.mu.Unlock()
		},
	})
	t.Cleanup(func() {
		h.m.Stop()
		if n := h.m.running.Load(); n != 0 {
			t.Errorf("%d probe workers still running after Stop", n)
		}
	})
	return h
}

// settle waits until every probe worker is idle, waiting on the clock
// with no run asked of it.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.clock.Waiters() != int(h.m.running.Load()) || h.m.runsAsked.Load() != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("probe workers did not settle: %d waiting of %d running", h.clock.Waiters(), h.m.running.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// step moves the clock by d once every worker is idle, then waits for the
// probes that became due.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.settle()
	h.clock.Step(d)
	h.settle()
}

// waitRunning waits until n probe workers are left.
func (h *harness) waitRunning(n int64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.m.running.Load() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d probe workers running, want %d", h.m.running.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) changesOf(pod string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changes[pod]
}

func (h *harness) resultsOf(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.results[key]
}

func (h *harness) add(pod, id string, c *v1.Container) {
	h.m.AddContainer(pod, id, c, "127.0.0.1", h.clock.Now())
	h.settle()
}

func (h *harness) wantCalls(cmd string, n int) {
	h.t.Helper()
	if got := h.exec.count(cmd); got != n {
		h.t.Fatalf("%s probe ran %d times, want %d", cmd, got, n)
	}
}

func (h *harness) wantNoKill(id string) {
	h.t.Helper()
	if v, ok := h.m.KillVerdict(id); ok {
		h.t.Fatalf("unexpected kill verdict %+v", v)
	}
}

func timed(p *v1.Probe, initialDelay, period, success, failure int32) *v1.Probe {
	p.InitialDelaySeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold = initialDelay, period, success, failure
	return p
}

func TestManagerLivenessTiming(t *testing.T) {
	h := newHarness(t)
	h.exec.set("live", fail)
	live := timed(execProbe("live"), 15, 10, 1, 3)
	grace := int64(5)
	live.TerminationGracePeriodSeconds = &grace
	h.add("pod1", "c1", &v1.Container{Name: "app", LivenessProbe: live})

	if !h.m.Started("c1") || !h.m.Ready("c1") {
		t.Fatal("a container without startup and readiness probes is started and ready at once")
	}
	h.wantCalls("live", 0)
	h.step(14 * time.Second)
	h.wantCalls("live", 0) // initialDelaySeconds
	h.step(time.Second)
	h.wantCalls("live", 1)
	h.step(9 * time.Second)
	h.wantCalls("live", 1) // periodSeconds
	h.step(time.Second)
	h.wantCalls("live", 2)
	h.wantNoKill("c1")
	if h.changesOf("pod1") != 0 {
		t.Fatal("OnChange called before anything changed")
	}
	h.step(10 * time.Second)
	h.wantCalls("live", 3)

	v, ok := h.m.KillVerdict("c1")
	want := Verdict{Probe: ProbeLiveness, Message: "Liveness probe failed: boom", GracePeriod: 5 * time.Second}
	if !ok || v != want {
		t.Fatalf("verdict %+v %v, want %+v", v, ok, want)
	}
	if n := h.changesOf("pod1"); n != 1 {
		t.Fatalf("OnChange called %d times, want 1", n)
	}
	if n := h.resultsOf("Liveness/failure"); n != 3 {
		t.Fatalf("OnResult got %d liveness failures, want 3", n)
	}
	// The container is to be replaced: no more probing of it.
	if n := h.m.running.Load(); n != 0 {
		t.Fatalf("%d workers still running after the kill verdict", n)
	}
	h.step(time.Minute)
	h.wantCalls("live", 3)

	// Its replacement starts fresh.
	h.m.RemoveContainer("c1")
	h.exec.set("live", pass)
	h.add("pod1", "c2", &v1.Container{Name: "app", LivenessProbe: live})
	h.step(15 * time.Second)
	h.wantCalls("live", 4)
	h.wantNoKill("c2")
}

func TestManagerLivenessFailuresMustBeConsecutive(t *testing.T) {
	h := newHarness(t)
	h.add("pod1", "c1", &v1.Container{Name: "app", LivenessProbe: timed(execProbe("live"), 0, 10, 1, 3)})
	// The first probe ran at once (no initial delay); it failed.
	for i, a := range []execAnswer{fail, fail, pass, fail, fail} {
		h.exec.set("live", a)
		h.step(10 * time.Second)
		if _, ok := h.m.KillVerdict("c1"); ok {
			t.Fatalf("killed after probe %d", i+2)
		}
	}
	h.step(10 * time.Second) // third failure in a row
	if v, ok := h.m.KillVerdict("c1"); !ok || v.GracePeriod != 0 {
		t.Fatalf("verdict %+v %v, want a kill without a probe grace period", v, ok)
	}
}

func TestManagerReadinessThresholds(t *testing.T) {
	h := newHarness(t)
	h.exec.set("ready", pass)
	h.add("pod1", "c1", &v1.Container{Name: "app", ReadinessProbe: timed(execProbe("ready"), 0, 1, 2, 3)})

	if !h.m.Started("c1") {
		t.Fatal("no startup probe: started at once")
	}
	// One success (at once) is not enough for successThreshold 2.
	h.wantCalls("ready", 1)
	if h.m.Ready("c1") {
		t.Fatal("ready before successThreshold")
	}
	h.step(time.Second)
	if !h.m.Ready("c1") || h.changesOf("pod1") != 1 {
		t.Fatalf("ready=%v changes=%d, want ready after 2 successes, 1 change", h.m.Ready("c1"), h.changesOf("pod1"))
	}
	h.step(time.Second)
	h.step(time.Second)
	if h.changesOf("pod1") != 1 {
		t.Fatal("OnChange called without a change")
	}

	h.exec.set("ready", fail)
	h.step(time.Second)
	h.step(time.Second)
	if !h.m.Ready("c1") {
		t.Fatal("not ready before failureThreshold")
	}
	h.step(time.Second)
	if h.m.Ready("c1") || h.changesOf("pod1") != 2 {
		t.Fatalf("ready=%v changes=%d, want not ready after 3 failures, 2 changes", h.m.Ready("c1"), h.changesOf("pod1"))
	}

	// Flapping below the thresholds changes nothing.
	for _, a := range []execAnswer{pass, fail, pass, fail} {
		h.exec.set("ready", a)
		h.step(time.Second)
	}
	if h.m.Ready("c1") || h.changesOf("pod1") != 2 {
		t.Fatal("a single success made the container ready")
	}
	h.exec.set("ready", pass)
	h.step(time.Second)
	if h.m.Ready("c1") {
		t.Fatal("ready after one success, want successThreshold 2")
	}
	h.step(time.Second)
	if !h.m.Ready("c1") || h.changesOf("pod1") != 3 {
		t.Fatalf("ready=%v changes=%d, want ready again, 3 changes", h.m.Ready("c1"), h.changesOf("pod1"))
	}
	// Readiness failures never kill.
	h.wantNoKill("c1")
}

// kubeadmContainer probes as kubeadm's kube-apiserver does, with exec
// handlers standing in for its httpGet ones.
func kubeadmContainer() *v1.Container {
	return &v1.Container{
		Name:           "kube-apiserver",
		StartupProbe:   timed(execProbe("start"), 10, 10, 1, 24),
		LivenessProbe:  timed(execProbe("live"), 10, 10, 1, 8),
		ReadinessProbe: timed(execProbe("ready"), 0, 1, 1, 3),
	}
}

func TestManagerStartupGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", fail)
	h.exec.set("live", fail)
	h.exec.set("ready", pass)
	h.add("pod1", "c1", kubeadmContainer())

	if h.m.Started("c1") || h.m.Ready("c1") {
		t.Fatal("started or ready before the startup probe passed")
	}
	h.step(10 * time.Second)
	h.wantCalls("start", 1)
	for range 10 {
		h.step(10 * time.Second)
	}
	h.wantCalls("start", 11)
	h.wantCalls("live", 0)
	h.wantCalls("ready", 0)
	h.wantNoKill("c1")
	if h.m.Started("c1") || h.changesOf("pod1") != 0 {
		t.Fatal("started while the startup probe fails")
	}

	h.exec.set("start", pass)
	h.step(10 * time.Second)
	// The readiness probe, due at this same instant, may already have seen
	// the container started.
	if !h.m.Started("c1") || h.changesOf("pod1") == 0 {
		t.Fatalf("started=%v changes=%d after the startup probe passed", h.m.Started("c1"), h.changesOf("pod1"))
	}
	h.wantCalls("start", 12)
	h.step(time.Second)
	if !h.m.Ready("c1") || h.changesOf("pod1") != 2 {
		t.Fatalf("ready=%v changes=%d a readiness period after starting, want ready, 2 changes", h.m.Ready("c1"), h.changesOf("pod1"))
	}
	// Liveness runs from now on, and a failing one kills after 8 periods
	// (its first run may have come at the moment startup passed).
	h.exec.set("live", fail)
	h.step(9 * time.Second)
	if h.exec.count("live") == 0 {
		t.Fatal("liveness did not run after startup")
	}
	for h.exec.count("live") < 8 {
		h.wantNoKill("c1")
		h.step(10 * time.Second)
	}
	if v, ok := h.m.KillVerdict("c1"); !ok || v.Probe != ProbeLiveness {
		t.Fatalf("verdict %+v %v, want liveness", v, ok)
	}
	// The startup probe is done for good once passed.
	h.wantCalls("start", 12)
}

// The spec "should be ready immediately after startupProbe succeeds": the
// readiness probe (period 30 s) runs the moment the startup probe passes,
// not a readiness period later, and its period counts from then.
func TestManagerReadinessRunsWhenStartupPasses(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", fail)
	h.exec.set("ready", pass)
	h.add("pod1", "c1", &v1.Container{
		Name:           "busybox",
		StartupProbe:   timed(execProbe("start"), 0, 5, 1, 120),
		ReadinessProbe: timed(execProbe("ready"), 0, 30, 1, 3),
	})
	h.wantCalls("start", 1)
	for range 6 { // 30 s: the readiness worker's first tick, still gated
		h.step(5 * time.Second)
	}
	h.wantCalls("ready", 0)
	h.step(5 * time.Second) // 35 s
	h.exec.set("start", pass)
	h.step(5 * time.Second) // 40 s: started
	if !h.m.Started("c1") {
		t.Fatal("not started after the startup probe passed")
	}
	h.wantCalls("ready", 1)
	if !h.m.Ready("c1") {
		t.Fatal("not ready the moment the startup probe passed: readiness waited for its period")
	}
	if n := h.changesOf("pod1"); n != 2 {
		t.Fatalf("OnChange called %d times, want 2 (started, ready)", n)
	}
	// The next readiness run is a period after that one, not at the old
	// tick (60 s).
	h.step(20 * time.Second) // 60 s
	h.wantCalls("ready", 1)
	h.step(10 * time.Second) // 70 s
	h.wantCalls("ready", 2)
}

// A run asked before the initial delay has passed waits for it, as the
// kubelet's worker skips a probe inside initialDelaySeconds.
func TestManagerReadinessKeepsItsInitialDelay(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", pass)
	h.exec.set("ready", pass)
	h.add("pod1", "c1", &v1.Container{
		Name:           "app",
		StartupProbe:   timed(execProbe("start"), 0, 5, 1, 3),
		ReadinessProbe: timed(execProbe("ready"), 20, 10, 1, 3),
	})
	if !h.m.Started("c1") {
		t.Fatal("not started after the startup probe passed")
	}
	h.step(19 * time.Second)
	h.wantCalls("ready", 0)
	h.step(time.Second)
	h.wantCalls("ready", 1)
	if !h.m.Ready("c1") {
		t.Fatal("not ready after the initial delay")
	}
}

// messages collects what a Manager callback (OnWarning, OnError) is told,
// as "pod/container/probe: message".
type messages struct {
	mu  sync.Mutex
	got []string
}

func (m *messages) add(pod, container, kind, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, pod+"/"+container+"/"+kind+": "+msg)
}

func (m *messages) get() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// A redirect to another host passes with a warning, which OnWarning hears
// of (the kubelet's ProbeWarning event); the container is not killed.
func TestManagerWarningIsSuccessAndReported(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://0.0.0.0/", http.StatusFound))
	defer srv.Close()
	h := newHarness(t)
	var warnings messages
	h.m.opts.OnWarning = warnings.add
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	live := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Path: "/redirect?loc=" + url.QueryEscape("http://0.0.0.0/"), Port: intstr.FromInt32(int32(port))}}}
	h.add("pod1", "c1", &v1.Container{Name: "app", LivenessProbe: timed(live, 0, 10, 1, 1)})
	h.step(10 * time.Second)
	h.wantNoKill("c1")
	if n := h.resultsOf("Liveness/success"); n != 2 {
		t.Fatalf("%d liveness successes, want 2", n)
	}
	want := `pod1/app/Liveness: Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`
	if got := warnings.get(); len(got) != 2 || got[0] != want {
		t.Fatalf("warnings %q, want 2 of %q", got, want)
	}
}

func TestManagerStartupFailureKills(t *testing.T) {
	h := newHarness(t)
	h.exec.set("start", execAnswer{code: 1, out: "connection refused"})
	h.add("pod1", "c1", kubeadmContainer())

	h.step(10 * time.Second) // first startup probe
	for range 22 {
		h.step(10 * time.Second)
	}
	h.wantCalls("start", 23)
	h.wantNoKill("c1")
	h.step(10 * time.Second) // the 24th failure, 240 s after start
	v, ok := h.m.KillVerdict("c1")
	if !ok || v.Probe != ProbeStartup || v.Message != "Startup probe failed: connection refused" {
		t.Fatalf("verdict %+v %v", v, ok)
	}
	if h.m.Started("c1") || h.changesOf("pod1") != 1 {
		t.Fatal("want not started, one change")
	}
	h.step(time.Minute)
	h.wantCalls("start", 24)
	h.wantCalls("live", 0)
	h.wantCalls("ready", 0)
}

func TestManagerUnknownResultsDoNotCount(t *testing.T) {
	h := newHarness(t)
	h.exec.set("live", execAnswer{err: errors.New("container is restarting")})
	h.add("pod1", "c1", &v1.Container{Name: "app", LivenessProbe: timed(execProbe("live"), 0, 10, 1, 1)})
	for range 5 {
		h.step(10 * time.Second)
	}
	h.wantNoKill("c1")
	// Each period tries 3 times before giving the run up, as the kubelet.
	h.wantCalls("live", 6*maxProbeTries)
	if n := h.resultsOf("Liveness/unknown"); n != 6 {
		t.Fatalf("OnResult got %d unknown results, want 6", n)
	}
	h.exec.set("live", fail)
	h.step(10 * time.Second)
	if _, ok := h.m.KillVerdict("c1"); !ok {
		t.Fatal("no kill verdict after a real failure with failureThreshold 1")
	}
}

func TestManagerWithoutProbes(t *testing.T) {
	h := newHarness(t)
	h.add("pod1", "c1", &v1.Container{Name: "app"})
	if !h.m.Started("c1") || !h.m.Ready("c1") {
		t.Fatal("a container without probes is started and ready")
	}
	if n := h.m.running.Load(); n != 0 {
		t.Fatalf("%d workers for a container without probes", n)
	}
	if h.m.Started("nope") || h.m.Ready("nope") {
		t.Fatal("an unknown container is neither started nor ready")
	}
	if _, ok := h.m.KillVerdict("nope"); ok {
		t.Fatal("kill verdict for an unknown container")
	}
}

func TestManagerAddIsIdempotent(t *testing.T) {
	h := newHarness(t)
	h.exec.set("ready", pass)
	c := &v1.Container{Name: "app", ReadinessProbe: timed(execProbe("ready"), 0, 1, 1, 3)}
	h.add("pod1", "c1", c)
	if !h.m.Ready("c1") {
		t.Fatal("not ready")
	}
	h.add("pod1", "c1", c)
	if n := h.m.running.Load(); n != 1 {
		t.Fatalf("%d workers, want 1", n)
	}
	if !h.m.Ready("c1") {
		t.Fatal("adding again reset the state")
	}
}

func TestManagerRemoveStopsWorkers(t *testing.T) {
	h := newHarness(t)
	h.exec.set("ready", pass)
	h.exec.set("live", pass)
	both := func(id string) *v1.Container {
		return &v1.Container{Name: id, ReadinessProbe: timed(execProbe("ready"), 0, 1, 1, 3), LivenessProbe: timed(execProbe("live"), 0, 10, 1, 3)}
	}
	h.add("pod1", "a", both("a"))
	h.add("pod1", "b", both("b"))
	h.add("pod2", "c", both("c"))
	if n := h.m.running.Load(); n != 6 {
		t.Fatalf("%d workers, want 6", n)
	}

	h.m.RemoveContainer("a")
	h.waitRunning(4)
	if h.m.Ready("a") {
		t.Fatal("a removed container is still ready")
	}
	h.m.RemovePod("pod1")
	h.waitRunning(2)
	readyCalls := h.exec.count("ready")
	h.step(time.Second)
	if got := h.exec.count("ready"); got != readyCalls+1 {
		t.Fatalf("readiness ran %d times in a period, want once (pod2 only)", got-readyCalls)
	}

	h.m.Stop()
	if n := h.m.running.Load(); n != 0 {
		t.Fatalf("%d workers after Stop", n)
	}
	h.m.AddContainer("pod3", "d", both("d"), "127.0.0.1", h.clock.Now())
	if n := h.m.running.Load(); n != 0 {
		t.Fatal("AddContainer after Stop started workers")
	}
}

func TestManagerRemoveCancelsProbeInFlight(t *testing.T) {
	h := newHarness(t)
	h.exec.entered = make(chan string, 10)
	h.exec.set("live", execAnswer{block: true})
	p := timed(execProbe("live"), 0, 10, 1, 1)
	p.TimeoutSeconds = 60
	h.m.AddContainer("pod1", "c1", &v1.Container{Name: "app", LivenessProbe: p}, "127.0.0.1", h.clock.Now())
	<-h.exec.entered // the probe is running, and would for a minute
	h.m.RemoveContainer("c1")
	h.waitRunning(0) // well before the probe's timeout
	if h.changesOf("pod1") != 0 {
		t.Fatal("a cancelled probe changed the state")
	}
}

func TestManagerHTTPLivenessMessage(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "etcd failed", http.StatusInternalServerError)
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	c := &v1.Container{
		Name:  "kube-apiserver",
		Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: int32(port)}},
		LivenessProbe: timed(&v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: host, Path: "/livez", Port: intstr.FromString("probe-port"), Scheme: v1.URISchemeHTTPS,
		}}, TimeoutSeconds: 15}, 10, 10, 1, 2),
	}
	h := newHarness(t)
	h.m.AddContainer("pod1", "c1", c, "", h.clock.Now())
	h.step(10 * time.Second)
	h.wantNoKill("c1")
	h.step(10 * time.Second)
	v, ok := h.m.KillVerdict("c1")
	if want := "Liveness probe failed: HTTP probe failed with statuscode: 500"; !ok || v.Message != want {
		t.Fatalf("verdict %+v %v, want message %q", v, ok, want)
	}
	if n := h.resultsOf("Liveness/failure"); n != 2 {
		t.Fatalf("OnResult got %d failures, want 2", n)
	}
}

// A run that could not be made (its three tries errored) is reported to
// OnError, as the kubelet records its Unhealthy "probe errored" event;
// it still counts neither way.
func TestManagerErroredRunIsReported(t *testing.T) {
	h := newHarness(t)
	var errs messages
	h.m.opts.OnError = errs.add
	h.exec.set("ready", execAnswer{err: errors.New("container is restarting")})
	h.add("pod1", "c1", &v1.Container{Name: "app", ReadinessProbe: timed(execProbe("ready"), 0, 10, 1, 1)})
	h.step(10 * time.Second)
	want := `pod1/app/Readiness: exec "ready": container is restarting`
	if got := errs.get(); len(got) != 2 || got[0] != want {
		t.Fatalf("errors %q, want 2 of %q", got, want)
	}
}
