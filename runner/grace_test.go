package runner_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// hookRecorder is graceRecorder that records the execs (hooks) the runner
// makes and how long each was given (its context's time left; 0 for none).
type hookRecorder struct {
	*graceRecorder
	mu    sync.Mutex
	hooks map[string]time.Duration
	// fail is the commands that exit 1.
	fail []string
	// slow is the commands that take time: the harness's clock is stepped
	// by as much while they run.
	slow map[string]time.Duration
	clk  interface{ Step(time.Duration) }
}

func newHookRecorder(fake *enginetest.Fake) *hookRecorder {
	return &hookRecorder{graceRecorder: &graceRecorder{Fake: fake}, hooks: map[string]time.Duration{}}
}

func (h *hookRecorder) Exec(ctx context.Context, _ string, cmd []string) (int, []byte, error) {
	left := time.Duration(0)
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		left = time.Until(d)
	}
	h.mu.Lock()
	h.hooks[cmd[0]] = left
	failed := slices.Contains(h.fail, cmd[0])
	took := h.slow[cmd[0]]
	h.mu.Unlock()
	if took > 0 {
		h.clk.Step(took)
	}
	if failed {
		return 1, []byte("hook broke"), nil
	}
	return 0, nil, nil
}

// given is how long the hook cmd was given, and whether it ran.
func (h *hookRecorder) given(cmd string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.hooks[cmd]
	return d, ok
}

// startWithHooks starts a harness whose runtime records stops and hooks;
// the hooks named in fail exit 1.
func startWithHooks(t *testing.T, fail ...string) (*harness, *hookRecorder, *eventLog) {
	t.Helper()
	fake := newFake(t)
	rec := newHookRecorder(fake)
	rec.fail = fail
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Runtime, c.Events = rec, events })
	return h, rec, events
}

// runThenRemove runs pod until its containers run, then removes it and
// waits for its teardown.
func (h *harness) runThenRemove(pod *v1.Pod) {
	h.t.Helper()
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus(string(pod.UID), "running", allRunning)
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	waitUntil(h.t, "the removed pod's teardown", func() bool {
		_, ok := h.r.Pod(string(pod.UID))
		return !ok && len(h.containers(string(pod.UID))) == 0
	})
}

// zeroGracePod is a pod whose terminationGracePeriodSeconds is 0 and whose
// container a has a preStop hook "stop-hook" (b has none).
func zeroGracePod() *v1.Pod {
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	zero := int64(0)
	pod.Spec.TerminationGracePeriodSeconds = &zero
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"stop-hook"}}}}
	return pod
}

// TestRemovedPodWithZeroGraceIsKilledAtOnce: terminationGracePeriodSeconds
// 0 is, as the API documents it, a kill at once with no opportunity to
// shut down: no preStop hook runs and no stop signal is sent; the forced
// removal kills the containers. (The kubelet gives 1 s, then 2 s, here:
// see minGracePeriod.)
func TestRemovedPodWithZeroGraceIsKilledAtOnce(t *testing.T) {
	h, rec, _ := startWithHooks(t)
	h.runThenRemove(zeroGracePod())
	if d, ok := rec.given("stop-hook"); ok {
		t.Errorf("the preStop hook of a pod with grace 0 ran (given %v)", d)
	}
	if graces := rec.recorded(); len(graces) != 0 {
		t.Errorf("containers stopped with grace %v before their removal, want none: the removal kills them", graces)
	}
}

// TestRemovedPodWithAGraceGetsTheMinimum: a graceful stop (a grace period
// above 0) gives the stop signal at least the kubelet's 2 s before
// SIGKILL.
func TestRemovedPodWithAGraceGetsTheMinimum(t *testing.T) {
	h, rec, _ := startWithHooks(t)
	pod := zeroGracePod()
	one := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &one
	h.runThenRemove(pod)
	if _, ok := rec.given("stop-hook"); !ok {
		t.Error("the preStop hook of a pod with a grace period did not run")
	}
	graces := rec.recorded()
	if len(graces) != 2 || slices.ContainsFunc(graces, func(g time.Duration) bool { return g != 2*time.Second }) {
		t.Errorf("containers stopped with grace %v, want the kubelet's minimum 2s", graces)
	}
}

// TestEditWithZeroGraceSkipsPreStop: a container replaced in a sync (here
// for an edit) is stopped with the pod's grace period; at 0 no preStop
// hook runs and the stop is a kill (the kubelet gives the stop signal
// 2 s there).
func TestEditWithZeroGraceSkipsPreStop(t *testing.T) {
	h, rec, _ := startWithHooks(t)
	pod := zeroGracePod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "again"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	waitUntil(t, "the edited container's replacement", func() bool {
		exited, running := 0, 0
		for _, c := range h.containers("u1") {
			switch c.State {
			case engine.StateExited:
				exited++
			case engine.StateRunning:
				running++
			}
		}
		return exited == 1 && running == 1
	})
	if _, ok := rec.given("stop-hook"); ok {
		t.Error("the preStop hook ran with no grace period for it")
	}
	graces := rec.recorded()
	if len(graces) != 1 || graces[0] != 0 {
		t.Errorf("the old container stopped with grace %v, want 0: a kill", graces)
	}
}

// TestFailedPostStartStopsAsAKill: the kubelet stops a container whose
// postStart hook failed as any other kill (killContainer): Killing
// "FailedPostStartHook", its preStop hook first, then the stop signal
// with the pod's grace period (at least the 2 s minimum); the hook's
// failure is a FailedPostStartHook warning.
func TestFailedPostStartStopsAsAKill(t *testing.T) {
	h, rec, events := startWithHooks(t, "setup")
	pod := newPod("u1", "p-node1", v1.RestartPolicyNever, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"stop-hook"}}},
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "PostStartHookError", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "PostStartHookError"
	})
	if _, ok := rec.given("stop-hook"); !ok {
		t.Error("the preStop hook did not run before the stop of a container whose postStart hook failed")
	}
	if graces := rec.recorded(); len(graces) != 1 || graces[0] != 2*time.Second {
		t.Errorf("stopped with grace %v, want the pod's 1s raised to the kubelet's minimum 2s", graces)
	}
	events.wait(t, h, "default/p-node1 spec.containers{a} Warning FailedPostStartHook")
	events.wait(t, h, "default/p-node1 spec.containers{a} Normal Killing: FailedPostStartHook")
}

// TestFailedPreStopIsAWarning: a preStop hook that fails is a
// FailedPreStopHook warning on the container (without the hook's output),
// as the kubelet's executePreStopHook records, and the stop goes on.
func TestFailedPreStopIsAWarning(t *testing.T) {
	h, _, events := startWithHooks(t, "stop-hook")
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"stop-hook"}}}}
	h.runThenRemove(pod)
	events.wait(t, h, "default/p-node1 spec.containers{a} Warning FailedPreStopHook: PreStopHook failed")
}

// TestSidecarsStopWithinThePodsGrace: the kubelet stops a pod's containers
// within one grace period: a sidecar, stopped after the app containers,
// gets what they left of it (killContainer's termination ordering), with
// the 2 s minimum, not a whole grace period of its own.
func TestSidecarsStopWithinThePodsGrace(t *testing.T) {
	h, rec, _ := startWithHooks(t)
	rec.slow, rec.clk = map[string]time.Duration{"drain": 7 * time.Second}, h.clk
	h.runThenRemove(appAndProxy("drain", ""))
	graces := rec.recorded()
	if len(graces) != 2 || graces[0] != 3*time.Second || graces[1] != 3*time.Second {
		t.Errorf("stopped with grace %v, want the app's 3s left after its 7s preStop hook, then the sidecar's 3s left of the pod's 10s", graces)
	}
}

// appAndProxy is a pod of grace 10 s with container app and sidecar
// proxy, whose preStop hooks are the commands given ("" for none).
func appAndProxy(appHook, proxyHook string) *v1.Pod {
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	grace := int64(10)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: image, Command: []string{"run"},
		ImagePullPolicy: v1.PullIfNotPresent, RestartPolicy: &always}}
	preStop := func(c *v1.Container, cmd string) {
		if cmd != "" {
			c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{cmd}}}}
		}
	}
	preStop(&pod.Spec.Containers[0], appHook)
	preStop(&pod.Spec.InitContainers[0], proxyHook)
	return pod
}

// TestSidecarPreStopRunsFromTheStart: as the kubelet's termination
// ordering, every container's stop begins at once, so a sidecar's preStop
// hook runs beside the app containers' (a proxy starts draining as the
// app does), while its stop signal still waits until the app containers
// have stopped. Here the app's hook ends only once the sidecar's has run.
func TestSidecarPreStopRunsFromTheStart(t *testing.T) {
	fake := newFake(t)
	rec := &orderRecorder{Fake: fake, sidecarHookRan: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rec })
	h.runThenRemove(appAndProxy("drain", "proxy-drain"))
	log := rec.recorded()
	at := func(what string) int {
		i := slices.Index(log, what)
		if i < 0 {
			t.Fatalf("no %q in %q", what, log)
		}
		return i
	}
	if slices.Contains(log, "drain cut short") || at("hook proxy-drain") > at("stop app") || at("stop app") > at("stop proxy") {
		t.Errorf("termination went %q; want the sidecar's hook run before the app's stop, and the sidecar stopped after it", log)
	}
}

// orderRecorder logs, in order, the hooks run and the containers stopped.
// The hook "drain" ends once "proxy-drain" has run, or its time is up.
type orderRecorder struct {
	*enginetest.Fake
	mu             sync.Mutex
	log            []string
	sidecarHookRan chan struct{}
}

func (o *orderRecorder) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, s)
}

func (o *orderRecorder) recorded() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.log)
}

func (o *orderRecorder) Exec(ctx context.Context, _ string, cmd []string) (int, []byte, error) {
	o.add("hook " + cmd[0])
	switch cmd[0] {
	case "proxy-drain":
		close(o.sidecarHookRan)
	case "drain":
		select {
		case <-o.sidecarHookRan:
		case <-ctx.Done():
			o.add("drain cut short")
		}
	}
	return 0, nil, nil
}

func (o *orderRecorder) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	o.add("stop " + o.ContainerConfig(id).Name)
	return o.Fake.StopContainer(ctx, id, grace)
}

// TestHTTPSHookFallbackIsAWarning: an HTTPS httpGet postStart hook that a
// plain HTTP server answers passes over HTTP, and, as in the kubelet, the
// pod gets a LifecycleHTTPFallback warning and the fallback is counted.
func TestHTTPSHookFallbackIsAWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	events := &eventLog{}
	h := start(t, newFake(t), func(c *runner.Config) { c.Events, c.Metrics = events, runner.NewMetrics(reg) })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
		Host: host, Port: intstr.FromInt32(int32(n)), Scheme: v1.URISchemeHTTPS}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	events.wait(t, h, "default/p-node1  Warning LifecycleHTTPFallback: request to HTTPS lifecycle hook "+
		srv.Listener.Addr().String()+" got HTTP response, retry with HTTP succeeded")
	if got := counterValue(t, reg, "podrun_lifecycle_handler_http_fallbacks_total"); got != 1 {
		t.Errorf("podrun_lifecycle_handler_http_fallbacks_total %v, want 1", got)
	}
}

// counterValue is the value of the unlabelled counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
