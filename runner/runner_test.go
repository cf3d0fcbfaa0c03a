package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

const image = "img:1"

func newPod(uid, name string, policy v1.RestartPolicy, cmds map[string][]string) *v1.Pod {
	p := &v1.Pod{}
	p.UID = types.UID(uid)
	p.Name, p.Namespace = name, "default"
	p.Spec.RestartPolicy = policy
	grace := int64(1)
	p.Spec.TerminationGracePeriodSeconds = &grace
	for _, n := range sortedNames(cmds) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: image, Command: cmds[n],
			ImagePullPolicy: v1.PullIfNotPresent})
	}
	return p
}

func sortedNames(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// harness runs a Runner on a fake until the test ends. The runner, the
// fake's stamps and the prober all keep the time of the fake's fake clock
// (clockOf): time passes only when the test steps it.
type harness struct {
	t       testing.TB
	fake    *enginetest.Fake
	clk     *testingclock.FakeClock
	r       *runner.Runner
	updates chan runner.PodUpdate
	cancel  context.CancelFunc
	done    chan struct{}
	// tickers is how many waiters of clk are tickers, which stay for
	// good (a fake ticker's Stop does not take it off the clock): the
	// rest are timers still to fire (see timers).
	tickers int
}

// runTickers is how many waiters Run keeps on the clock: the tickers of
// resync, housekeeping and the back-off GC, and the relist's timer (made
// again after every relist).
const runTickers = 4

// relistPeriod and housekeepingPeriod are the harness's, so that a step
// of the clock by one period relists and looks for unknown pods.
const (
	relistPeriod       = 20 * time.Millisecond
	housekeepingPeriod = 20 * time.Millisecond
)

func start(t testing.TB, fake *enginetest.Fake, tune func(*runner.Config)) *harness {
	t.Helper()
	clk := clockOf(t, fake)
	cfg := runner.Config{
		Runtime: fake, RuntimeName: "fake", NodeName: fake.NodeName(), RootDir: t.TempDir(),
		InfraImage: "pause:1", HostIP: "192.0.2.10", RelistPeriod: relistPeriod,
		HousekeepingPeriod: housekeepingPeriod, Clock: clk,
		Log: slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tune != nil {
		tune(&cfg)
	}
	h := &harness{t: t, fake: fake, clk: clk, r: runner.New(cfg), updates: make(chan runner.PodUpdate, 4), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	// Nothing else waits on the clock now (an earlier runner on the fake
	// has stopped, and with it its timers).
	h.tickers = clk.Waiters() + runTickers
	go func() {
		defer close(h.done)
		h.r.Run(ctx, h.updates)
	}()
	t.Cleanup(h.stop)
	// A step of the clock before Run made its tickers would be lost to
	// them.
	waitUntil(t, "the runner's tickers", func() bool { return clk.Waiters() >= h.tickers })
	return h
}

// timers is how many timers wait on the harness's clock: pod workers
// waiting for a retry or the end of a back-off, and probes waiting for
// their next period.
func (h *harness) timers() int {
	return h.clk.Waiters() - h.tickers
}

// step moves the clock by d.
func (h *harness) step(d time.Duration) {
	h.clk.Step(d)
}

// waitUntil waits until cond holds, polling, for at most 10 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// epoch is when the tests' fake clocks start.
var epoch = time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)

// clocks holds each fake's clock (see newFake), by fake.
var clocks sync.Map

// clockOf returns the fake clock of a fake made by newFake: every runner
// started on the fake keeps its time, and the fake stamps times with it.
func clockOf(t testing.TB, fake *enginetest.Fake) *testingclock.FakeClock {
	t.Helper()
	clk, ok := clocks.Load(fake)
	if !ok {
		t.Fatal("a fake not made by newFake")
	}
	return clk.(*testingclock.FakeClock)
}

func (h *harness) stop() {
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.t.Fatal("runner did not stop")
	}
}

// newFake returns a fake on a fake clock of its own (clockOf), at epoch.
func newFake(t testing.TB) *enginetest.Fake {
	f := enginetest.NewFake("node1")
	clk := testingclock.NewFakeClock(epoch)
	f.SetClock(clk.Now)
	clocks.Store(f, clk)
	t.Cleanup(func() { clocks.Delete(f) })
	f.AddImage(image)
	f.AddImage("pause:1")
	return f
}

// waitStatus waits until the pod's status satisfies cond.
func (h *harness) waitStatus(uid string, what string, cond func(*v1.Pod) bool) *v1.Pod {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := h.r.Changed()
		if p, ok := h.r.Pod(uid); ok && cond(p) {
			return p
		}
		select {
		case <-changed:
		case <-deadline:
			p, _ := h.r.Pod(uid)
			h.t.Fatalf("timed out waiting for %s; last status: %+v", what, p)
		}
	}
}

func (h *harness) containers(uid string) []*engine.Container {
	h.t.Helper()
	cs, err := h.fake.ListContainers(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*engine.Container
	for _, c := range cs {
		if c.Pod.UID == uid {
			out = append(out, c)
		}
	}
	return out
}

func allRunning(p *v1.Pod) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

func TestBringUpResolvesEnvAndCommand(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve", "$(GREETING)", "$(POD)"}})
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "NODE_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && allRunning(p) })
	if p.Status.HostIP != "192.0.2.10" {
		t.Errorf("hostIP %q", p.Status.HostIP)
	}
	cs := h.containers("u1")
	if len(cs) != 1 {
		t.Fatalf("want 1 container, got %d", len(cs))
	}
	cfg := fake.ContainerConfig(cs[0].ID)
	if got := strings.Join(cfg.Command, " "); got != "serve hello web-node1" {
		t.Errorf("command %q", got)
	}
	env := map[string]string{}
	for _, e := range cfg.Env {
		env[e.Name] = e.Value
	}
	if env["NODE_IP"] != "192.0.2.10" || env["POD"] != "web-node1" {
		t.Errorf("env %v", env)
	}
}

func TestCrashedContainerIsRestarted(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	if err := fake.Exit(first.ID, 1); err != nil {
		t.Fatal(err)
	}
	p := h.waitStatus("u1", "a restart", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Fatalf("lastState %+v", last)
	}
	// The second crash is held back by the crash-loop back-off.
	for _, c := range h.containers("u1") {
		if c.State == engine.StateRunning {
			fake.Exit(c.ID, 2)
		}
	}
	h.waitStatus("u1", "CrashLoopBackOff", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
}

func TestNeverPodCompletes(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "job-node1", v1.RestartPolicyNever, map[string][]string{"job": {enginetest.FakeScript, "exit", "3"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if t3 := p.Status.ContainerStatuses[0].State.Terminated; t3 == nil || t3.ExitCode != 3 {
		t.Fatalf("state %+v", p.Status.ContainerStatuses[0].State)
	}
	if n := len(h.containers("u1")); n != 1 {
		t.Fatalf("a Never pod was restarted: %d containers", n)
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	fake := newFake(t)
	// Every stamp a microsecond after the one before, although the clock
	// stands still: the order of the stamps is the order of the events.
	clk := clockOf(t, fake)
	var stamps atomic.Int64
	fake.SetClock(func() time.Time { return clk.Now().Add(time.Duration(stamps.Add(1)) * time.Microsecond) })
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	pod.Spec.InitContainers = []v1.Container{
		{Name: "i1", Image: image, Command: []string{enginetest.FakeScript, "exit", "0"}},
		{Name: "i2", Image: image, Command: []string{enginetest.FakeScript, "exit", "0"}},
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "running", allRunning)
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodInitialized && cond.Status != v1.ConditionTrue {
			t.Errorf("Initialized is %s", cond.Status)
		}
	}
	byName := map[string]*engine.Container{}
	for _, c := range h.containers("u1") {
		byName[c.Name] = c
	}
	if !byName["i1"].FinishedAt.Before(byName["i2"].CreatedAt) {
		t.Errorf("i2 made before i1 finished")
	}
	if !byName["i2"].FinishedAt.Before(byName["app"].CreatedAt) {
		t.Errorf("app started before i2 finished")
	}
}

func TestUpdateReplacesOnlyTheChangedContainer(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}, "b": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	ids := map[string]string{}
	for _, c := range h.containers("u1") {
		ids[c.Name] = c.ID
	}
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "2"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitStatus("u1", "a replaced", func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].ContainerID != "fake://"+ids["a"]
	})
	for _, c := range h.containers("u1") {
		if c.Name == "b" && c.ID != ids["b"] {
			t.Fatalf("b was replaced")
		}
	}
	if n := fake.Calls("RunSandbox"); n != 1 {
		t.Fatalf("sandbox made %d times", n)
	}
}

// byName returns the pod's containers of name, oldest attempt first, by
// state.
func (h *harness) byName(uid, name string) []engine.State {
	var out []engine.State
	cs := h.containers(uid)
	slices.SortFunc(cs, func(a, b *engine.Container) int { return a.Attempt - b.Attempt })
	for _, c := range cs {
		if c.Name == name {
			out = append(out, c.State)
		}
	}
	return out
}

// TestEditCreatesWhileTheOldContainerStops: an edited container's
// successor is created while the old one stops (an edit costs the longer
// of the two, not their sum) and started only once the old one has
// stopped: the two never run together.
func TestEditCreatesWhileTheOldContainerStops(t *testing.T) {
	fake := newFake(t)
	slow := holdStops(fake)
	h := start(t, fake, func(c *runner.Config) { c.Runtime = slow })
	release := sync.OnceFunc(func() { close(slow.release) })
	t.Cleanup(release) // before the harness stops
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}, "b": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	starts := fake.Calls("StartContainer")

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "2"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	select {
	case <-slow.entered:
	case <-time.After(time.Minute):
		t.Fatal("the edited container was never stopped")
	}
	waitUntil(t, "a's successor created while a stops", func() bool {
		return slices.Equal(h.byName("u1", "a"), []engine.State{engine.StateRunning, engine.StateCreated})
	})
	if n := fake.Calls("StartContainer"); n != starts {
		t.Fatalf("%d starts while the old container was stopping", n-starts)
	}
	release()
	h.waitStatus("u1", "a replaced", func(p *v1.Pod) bool {
		return allRunning(p) && slices.Equal(h.byName("u1", "a"), []engine.State{engine.StateExited, engine.StateRunning})
	})
	if got := h.byName("u1", "b"); !slices.Equal(got, []engine.State{engine.StateRunning}) {
		t.Fatalf("b: %v, want it running, untouched", got)
	}
}

// stopControl is a fake engine whose container stops a test controls:
// held until released (holdStops), or failing a number of times for one
// container (stubborn), which it watches for a start of any container
// while it runs.
type stopControl struct {
	*enginetest.Fake
	entered chan string   // when held: the IDs of the first stops begun (as many as it holds)
	release chan struct{} // when held: closed to let the stops go on

	mu      sync.Mutex
	id      string // the stubborn container
	fails   int
	tries   int // stops of id asked
	overlap bool
}

// holdStops is a stopControl whose stops wait until release is closed.
func holdStops(fake *enginetest.Fake) *stopControl {
	return &stopControl{Fake: fake, entered: make(chan string, 4), release: make(chan struct{})}
}

// stubborn makes the next n stops of container id fail.
func (s *stopControl) stubborn(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.fails = id, n
}

func (s *stopControl) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	s.mu.Lock()
	if id == s.id {
		s.tries++
	}
	fail := id == s.id && s.fails > 0
	if fail {
		s.fails--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("engine busy")
	}
	if s.release != nil {
		select {
		case s.entered <- id:
		default:
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Fake.StopContainer(ctx, id, grace)
}

func (s *stopControl) StartContainer(ctx context.Context, id string) error {
	s.mu.Lock()
	stubborn := s.id
	s.mu.Unlock()
	cs, err := s.Fake.ListContainers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.ID == stubborn && c.State == engine.StateRunning {
			s.mu.Lock()
			s.overlap = true
			s.mu.Unlock()
		}
	}
	return s.Fake.StartContainer(ctx, id)
}

func (s *stopControl) stopsAsked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries
}

func (s *stopControl) startedBeside() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlap
}

// idOf is the ID of the pod's running container name.
func (h *harness) idOf(uid, name string) string {
	for _, c := range h.containers(uid) {
		if c.Name == name && c.State == engine.StateRunning {
			return c.ID
		}
	}
	h.t.Fatalf("no running %s", name)
	return ""
}

// TestEditWhoseStopFailsStartsNothing: when the old container cannot be
// stopped, its successor (made meanwhile) is not started beside it, nor
// on a retry whose stop fails again; the sync after a stop that worked
// starts the one made, without making another, and runs its postStart
// hook.
func TestEditWhoseStopFailsStartsNothing(t *testing.T) {
	fake := newFake(t)
	var hooks atomic.Int32
	fake.SetExecHandler(func(id string, cmd []string) (int, []byte, error) {
		if slices.Equal(cmd, []string{"setup"}) {
			hooks.Add(1)
		}
		return 0, nil, nil
	})
	rt := &stopControl{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	creates, starts := fake.Calls("CreateContainer"), fake.Calls("StartContainer")

	rt.stubborn(h.idOf("u1", "a"), 2)
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Command = []string{"run", "2"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	waitUntil(t, "the failed stop, and the successor made", func() bool {
		return rt.stopsAsked() >= 1 && slices.Equal(h.byName("u1", "a"), []engine.State{engine.StateRunning, engine.StateCreated})
	})
	// The failed sync is retried after the worker's back-off: the stop
	// fails once more, then works.
	h.stepUntilStatus("u1", "a replaced", time.Second, func(p *v1.Pod) bool {
		return allRunning(p) && slices.Equal(h.byName("u1", "a"), []engine.State{engine.StateExited, engine.StateRunning})
	})
	if rt.startedBeside() {
		t.Fatal("the successor started beside a container that would not stop")
	}
	if n := rt.stopsAsked(); n != 3 {
		t.Fatalf("%d stops, want the two that failed and one that worked", n)
	}
	if n := fake.Calls("CreateContainer"); n != creates+1 {
		t.Fatalf("%d containers made for one edit, want 1", n-creates)
	}
	if n := fake.Calls("StartContainer"); n != starts+1 {
		t.Fatalf("%d starts for one edit, want 1", n-starts)
	}
	waitUntil(t, "the successor's postStart hook", func() bool { return hooks.Load() == 2 })
}

// TestEditDuringAFailedReplacement: a second edit while the first one's
// successor waits, created, for an old container that would not stop
// makes a third attempt, which also waits for the old one: no two
// attempts run together.
func TestEditDuringAFailedReplacement(t *testing.T) {
	fake := newFake(t)
	rt := &stopControl{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run", "1"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	rt.stubborn(h.idOf("u1", "a"), 2)
	edit := func(arg string) {
		edited := pod.DeepCopy()
		edited.Spec.Containers[0].Command = []string{"run", arg}
		h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	}
	edit("2")
	waitUntil(t, "the failed stop, and the successor made", func() bool {
		return slices.Equal(h.byName("u1", "a"), []engine.State{engine.StateRunning, engine.StateCreated})
	})
	edit("3")
	h.stepUntilStatus("u1", "the second edit running", time.Second, func(p *v1.Pod) bool {
		for _, c := range h.containers("u1") {
			if c.State == engine.StateRunning && strings.Join(fake.ContainerConfig(c.ID).Command, " ") == "run 3" {
				return allRunning(p)
			}
		}
		return false
	})
	if rt.startedBeside() {
		t.Fatalf("an attempt started beside the old container: %v", h.byName("u1", "a"))
	}
}

// TestSidecarEditWhoseStopFailsStartsNothing: the same holds for a
// sidecar (an init container that runs beside the app) whose spec changed.
func TestSidecarEditWhoseStopFailsStartsNothing(t *testing.T) {
	fake := newFake(t)
	rt := &stopControl{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: image, Command: []string{"run", "1"}, RestartPolicy: &always}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	rt.stubborn(h.idOf("u1", "proxy"), 1)
	edited := pod.DeepCopy()
	edited.Spec.InitContainers[0].Command = []string{"run", "2"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.stepUntilStatus("u1", "the sidecar replaced", time.Second, func(p *v1.Pod) bool {
		return slices.Equal(h.byName("u1", "proxy"), []engine.State{engine.StateExited, engine.StateRunning})
	})
	if rt.startedBeside() {
		t.Fatal("the new sidecar started beside the old one")
	}
}

// stubbornInOlderSandbox makes pod's state a killed podrun's late start
// can leave: container a running in sandbox attempt 0, and a running
// sandbox attempt 1 without it; the engine it returns fails the next
// fails stops of that a (whose ID it returns).
func stubbornInOlderSandbox(t *testing.T, fake *enginetest.Fake, pod *v1.Pod, fails int) (string, *stopControl) {
	t.Helper()
	d := duplicates{t: t, fake: fake, pod: pod}
	a0 := d.container(d.sandbox(0, true), 0, "a", 0, true)
	d.sandbox(1, true)
	rt := &stopControl{Fake: fake}
	rt.stubborn(a0, fails)
	return a0, rt
}

// TestOlderSandboxContainerThatWouldNotStopHoldsItsSuccessor: a
// container that runs in an older sandbox (a killed podrun's late start)
// and fails to stop keeps its name from starting in the latest sandbox
// until a stop of it works: the two never run together.
func TestOlderSandboxContainerThatWouldNotStopHoldsItsSuccessor(t *testing.T) {
	fake := newFake(t)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	a0, rt := stubbornInOlderSandbox(t, fake, pod, 2)

	h := start(t, fake, func(c *runner.Config) { c.Runtime = rt })
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.stepUntilStatus("u1", "a running in the latest sandbox, the older a stopped", time.Second, func(p *v1.Pod) bool {
		_, containers := h.objects("u1")
		return allRunning(p) && containers[a0] != engine.StateRunning && len(containers) > 0
	})
	if rt.startedBeside() {
		t.Fatal("a started in the latest sandbox beside the older sandbox's a, which would not stop")
	}
	if n := rt.stopsAsked(); n != 3 {
		t.Fatalf("%d stops of the older a, want the two that failed and one that worked", n)
	}
}

// TestFailedStopReportedWhenALaterStepFails: a stop that failed is in the
// sync's error also when a later step (here the volumes) ends the sync
// early.
func TestFailedStopReportedWhenALaterStepFails(t *testing.T) {
	fake := newFake(t)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{
		ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}}}}}
	_, rt := stubbornInOlderSandbox(t, fake, pod, 1)
	log := &runner.LockedBuffer{}
	h := start(t, fake, func(c *runner.Config) {
		c.Runtime = rt
		c.Log = slog.New(slog.NewTextHandler(log, nil))
	})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	waitUntil(t, "a sync error naming the failed stop and the volumes", func() bool {
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, "sync pod") && strings.Contains(line, "stop a: engine busy") && strings.Contains(line, "prepare volumes") {
				return true
			}
		}
		return false
	})
}

func TestRemoveTearsDown(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	// The status goes when the whole teardown is done, which is after the
	// runtime's objects are gone (the pod directory goes last).
	waitUntil(t, "the pod's removal and its status's", func() bool {
		_, hasStatus := h.r.Pod("u1")
		return !hasStatus
	})
	sbs, _ := fake.ListSandboxes(context.Background())
	if n := len(h.containers("u1")); n != 0 || len(sbs) != 0 {
		t.Fatalf("status gone, %d containers and %d sandboxes left", n, len(sbs))
	}
}

// TestRestartAdoptsWithoutChanges: a second runner over the same runtime
// adopts the running pod: it creates and stops nothing.
func TestRestartAdoptsWithoutChanges(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	fake.ResetCalls()
	h2 := start(t, fake, nil)
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod.DeepCopy()}}
	h2.waitStatus("u1", "running", allRunning)
	for _, m := range []string{"RunSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer"} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("adoption called %s %d times", m, n)
		}
	}
}

// TestHousekeepingWaitsForSources: a pod in the runtime that no source
// defines is removed only once sources are ready, and never when its source
// is to be kept.
func TestHousekeepingWaitsForSources(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Annotations = map[string]string{"podrun.io/source": "/etc/pods/p.yaml"}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	var ready, keep atomic.Bool
	keep.Store(true)
	// asked counts the housekeeping rounds (each asks SourcesReady once);
	// kept the pods kept for their source.
	var asked, kept atomic.Int32
	h2 := start(t, fake, func(c *runner.Config) {
		c.RelistMaxPeriod = relistPeriod // a relist every round
		c.SourcesReady = func() bool { asked.Add(1); return ready.Load() }
		c.KeepSource = func(s string) bool {
			k := s == "/etc/pods/p.yaml" && keep.Load()
			if k {
				kept.Add(1)
			}
			return k
		}
	})
	// round moves the clock by a period of relist and housekeeping, and
	// waits until both began. A relist begins once the one before ended,
	// so from the third round on housekeeping sees the pod.
	round := func() {
		t.Helper()
		// The relist's timer is made again after each relist: a step
		// before would be lost to it.
		waitUntil(t, "the relist's timer", func() bool { return h2.clk.Waiters() >= h2.tickers })
		lists, rounds := fake.Calls("ListPodObjects"), asked.Load()
		h2.step(housekeepingPeriod)
		waitUntil(t, "a relist and a housekeeping round", func() bool {
			return fake.Calls("ListPodObjects") > lists && asked.Load() > rounds
		})
	}
	for range 10 {
		round()
	}
	if len(h.containers("u1")) != 1 {
		t.Fatal("removed before sources were ready")
	}
	ready.Store(true)
	for range 3 {
		before := kept.Load()
		round()
		waitUntil(t, "the pod kept for its source", func() bool { return kept.Load() > before })
	}
	if len(h.containers("u1")) != 1 {
		t.Fatal("removed a pod of a source to keep")
	}
	keep.Store(false)
	round()
	waitUntil(t, "the unknown pod's removal once sources were ready", func() bool { return len(h.containers("u1")) == 0 })
}

func TestResourcesOnlyUpdateIsInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	id := h.containers("u1")[0].ID

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("96Mi")}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	waitUntil(t, "the memory limit's update", func() bool {
		return fake.ContainerConfig(id).Resources.MemoryLimit == 96<<20
	})
	// Updated once, not on every sync: the container records the new
	// hash. Three resyncs, each a sync that publishes the pod's status
	// once it has done what it had to.
	for range 3 {
		changed := h.r.Changed()
		h.step(time.Minute)
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no sync after a resync")
		}
		if n := fake.Calls("UpdateContainerResources"); n != 1 {
			t.Fatalf("UpdateContainerResources called %d times", n)
		}
	}
	if cs := h.containers("u1"); len(cs) != 1 || cs[0].ID != id {
		t.Fatalf("the container was replaced")
	}
}

func testLogOut() io.Writer {
	if os.Getenv("PODRUN_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// TestProbesDriveReadinessAndRestarts: a readiness probe flips Ready both
// ways; a liveness probe that fails kills the container and it is
// restarted.
func TestProbesDriveReadinessAndRestarts(t *testing.T) {
	fake := newFake(t)
	var mu sync.Mutex
	healthy, ready := true, false
	fake.SetExecHandler(func(id string, cmd []string) (int, []byte, error) {
		mu.Lock()
		defer mu.Unlock()
		ok := healthy
		if cmd[0] == "ready" {
			ok = ready
		}
		if ok {
			return 0, nil, nil
		}
		return 1, []byte("no"), nil
	})
	events := &eventLog{}
	h := start(t, fake, func(c *runner.Config) { c.Events = events })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].ReadinessProbe = everySecond("ready")
	pod.Spec.Containers[0].LivenessProbe = everySecond("live")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running, not ready", func(p *v1.Pod) bool { return allRunning(p) && !isPodReady(p) })
	mu.Lock()
	ready = true
	mu.Unlock()
	h.stepUntilStatus("u1", "ready", time.Second, isPodReady)
	mu.Lock()
	ready = false
	mu.Unlock()
	h.stepUntilStatus("u1", "not ready again", time.Second, func(p *v1.Pod) bool { return !isPodReady(p) })

	mu.Lock()
	healthy = false
	mu.Unlock()
	h.stepUntilStatus("u1", "a liveness restart", time.Second, func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	// The kubelet's Killing message, which the conformance specs match
	// ("failed liveness probe").
	events.wait(t, h, "default/p-node1 spec.containers{a} Normal Killing: Container a failed liveness probe, will be restarted")
}

// TestLivenessKillUnderOnFailureRestarts: under OnFailure a container killed
// for a failed liveness probe runs again even though it exits 0 on the stop
// signal, as in the kubelet, which decides the restart when it kills; the
// pod stays Running, not Succeeded.
func TestLivenessKillUnderOnFailureRestarts(t *testing.T) {
	fake := newFake(t)
	var mu sync.Mutex
	healthy := true
	fake.SetExecHandler(func(id string, cmd []string) (int, []byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return 0, nil, nil
		}
		return 1, []byte("no"), nil
	})
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyOnFailure,
		map[string][]string{"a": {enginetest.FakeScript, "exit-on-term"}})
	pod.Spec.Containers[0].LivenessProbe = everySecond("live")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	mu.Lock()
	healthy = false
	mu.Unlock()
	h.stepUntilStatus("u1", "a restart after the liveness kill", time.Second, func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase != v1.PodRunning || cs[0].RestartCount >= 1
	})
	p, _ := h.r.Pod("u1")
	cs := p.Status.ContainerStatuses[0]
	if p.Status.Phase != v1.PodRunning || cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil ||
		cs.LastTerminationState.Terminated.ExitCode != 0 {
		t.Fatalf("after the liveness kill: phase %s, restarts %d, last state %+v; want Running, restarted, exit 0",
			p.Status.Phase, cs.RestartCount, cs.LastTerminationState)
	}
}

// everySecond is an exec probe of cmd run every second, acting on one
// result.
func everySecond(cmd string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
}

func isPodReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// waitGone waits until the runner has forgotten the pod (its teardown is
// over).
func (h *harness) waitGone(uid string) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := h.r.Changed()
		if _, ok := h.r.Pod(uid); !ok {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			h.t.Fatalf("pod %s still there", uid)
		}
	}
}

// stepUntilStatus steps the clock by d (a probe's period) until the pod's
// status satisfies cond. One step is one more run of each probe; a probe
// whose run ends after the step skips a period, so it may take two.
func (h *harness) stepUntilStatus(uid, what string, d time.Duration, cond func(*v1.Pod) bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		changed := h.r.Changed()
		if p, ok := h.r.Pod(uid); ok && cond(p) {
			return
		}
		if time.Now().After(deadline) {
			p, _ := h.r.Pod(uid)
			h.t.Fatalf("timed out waiting for %s; last status: %+v", what, p)
		}
		h.step(d)
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestFailedPostStartKillsTheContainer: as in the kubelet, a postStart hook
// that fails kills the container, which is then restarted under its policy.
func TestFailedPostStartKillsTheContainer(t *testing.T) {
	fake := newFake(t)
	fake.SetExecHandler(func(id string, cmd []string) (int, []byte, error) { return 3, []byte("hook broke"), nil })
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "PostStartHookError", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && (w.Reason == "PostStartHookError" || w.Reason == "CrashLoopBackOff")
	})
	for _, c := range h.containers("u1") {
		if c.State == engine.StateRunning {
			t.Fatalf("container %s still runs after its postStart hook failed (%+v)", c.ID, p.Status.ContainerStatuses[0])
		}
	}
}

// duplicates sets up, on the fake, what podrun runs leave behind when they
// are killed mid-bring-up: sandboxes and containers of pod (with apps a and
// b) made directly, as a killed podrun's requests would have made them.
type duplicates struct {
	t    *testing.T
	fake *enginetest.Fake
	pod  *v1.Pod
}

func (d duplicates) sandboxConfig(attempt int) *engine.SandboxConfig {
	return &engine.SandboxConfig{
		Pod:     engine.PodRef{UID: string(d.pod.UID), Name: d.pod.Name, Namespace: d.pod.Namespace},
		Attempt: attempt, Hash: runner.SandboxHash(d.pod), Image: "pause:1", GracePeriod: time.Second,
	}
}

func (d duplicates) sandbox(attempt int, run bool) string {
	d.t.Helper()
	var id string
	var err error
	if run {
		id, err = d.fake.RunSandbox(context.Background(), d.sandboxConfig(attempt))
	} else {
		id, err = d.fake.CreateSandboxOnly(d.sandboxConfig(attempt))
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return id
}

// container makes container name (a or b) of attempt in sandbox sbID, and
// starts it when start is set.
func (d duplicates) container(sbID string, sbAttempt int, name string, attempt int, start bool) string {
	d.t.Helper()
	var spec *v1.Container
	for i := range d.pod.Spec.Containers {
		if d.pod.Spec.Containers[i].Name == name {
			spec = &d.pod.Spec.Containers[i]
		}
	}
	cfg := &engine.ContainerConfig{Name: name, Type: engine.ContainerTypeApp, Attempt: attempt,
		Hash: runner.ContainerHash(spec), ResourcesHash: runner.ResourcesHash(spec), Image: spec.Image, Command: spec.Command}
	ctx := context.Background()
	id, err := d.fake.CreateContainer(ctx, sbID, d.sandboxConfig(sbAttempt), cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	if start {
		if err := d.fake.StartContainer(ctx, id); err != nil {
			d.t.Fatal(err)
		}
	}
	return id
}

// diedAfterCreates makes sandbox attempt 0 with a and b created in it,
// never started, and stops it: a bring-up whose sandbox died under it.
func (d duplicates) diedAfterCreates() (sb, a, b string) {
	d.t.Helper()
	sb = d.sandbox(0, true)
	a = d.container(sb, 0, "a", 0, false)
	b = d.container(sb, 0, "b", 0, false)
	if err := d.fake.StopSandbox(context.Background(), sb, time.Second); err != nil {
		d.t.Fatal(err)
	}
	return sb, a, b
}

// objects returns the fake's sandboxes and containers of uid, as
// "ID state" sets.
func (h *harness) objects(uid string) (sandboxes, containers map[string]engine.State) {
	h.t.Helper()
	sbs, cs, err := h.fake.ListPodObjects(context.Background(), uid)
	if err != nil {
		h.t.Fatal(err)
	}
	sandboxes, containers = map[string]engine.State{}, map[string]engine.State{}
	for _, sb := range sbs {
		sandboxes[sb.ID] = sb.State
	}
	for _, c := range cs {
		containers[c.ID] = c.State
	}
	return sandboxes, containers
}

func (h *harness) waitConverged(uid string) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := h.r.Changed()
		if p, converged, ok := h.r.SyncedPod(uid); ok && converged && allRunning(p) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			p, converged, _ := h.r.SyncedPod(uid)
			h.t.Fatalf("timed out waiting for the pod to converge; converged %v, last status: %+v", converged, p)
		}
	}
}

// TestDuplicateSandboxesConverge: a pod with three sandboxes - one
// stopped, one an older attempt that runs (a killed podrun's start that
// completed late), the latest running - and containers created, running
// and exited in each, is brought to its latest sandbox and the containers
// in it, untouched, with nothing else left; and it is not reported
// converged before.
func TestDuplicateSandboxesConverge(t *testing.T) {
	fake := newFake(t)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	d := duplicates{t: t, fake: fake, pod: pod}
	ctx := context.Background()

	sb0 := d.sandbox(0, true)
	a0 := d.container(sb0, 0, "a", 0, true)
	d.container(sb0, 0, "b", 0, false)
	if err := fake.StopContainer(ctx, a0, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := fake.StopSandbox(ctx, sb0, time.Second); err != nil {
		t.Fatal(err)
	}
	sb1 := d.sandbox(1, true)
	d.container(sb1, 1, "a", 1, true)
	d.container(sb1, 1, "b", 1, false)
	sb2 := d.sandbox(2, true)
	a2 := d.container(sb2, 2, "a", 2, true)
	b2 := d.container(sb2, 2, "b", 2, true)
	fake.ResetCalls()
	// The podrun that finds them comes later: a1, which it stops, ran
	// beside a2, so it is no run before a2 to keep for its lastState.
	clockOf(t, fake).Step(time.Second)

	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitConverged("u1")

	sandboxes, containers := h.objects("u1")
	if len(sandboxes) != 1 || sandboxes[sb2] != engine.StateRunning {
		t.Errorf("sandboxes %v, want only the latest, %s, running", sandboxes, sb2[:12])
	}
	if len(containers) != 2 || containers[a2] != engine.StateRunning || containers[b2] != engine.StateRunning {
		t.Errorf("containers %v, want only a and b of the latest sandbox, running", containers)
	}
	for _, m := range []string{"RunSandbox", "CreateContainer", "StartContainer"} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times: the latest sandbox's pod must be kept as it is", m, n)
		}
	}
	if n := fake.Calls("StopSandbox"); n != 1 {
		t.Errorf("StopSandbox called %d times, want 1 (the older sandbox that ran)", n)
	}
}

// TestCreatedLatestSandboxIsAdopted: the latest sandbox was made but never
// started (podrun killed between the two) while an older one runs: the pod
// is made again in the latest one, adopted, not in a third; the older
// sandbox's containers, stopped before the new ones start, are kept, dead,
// as the runs before (lastState, logs --previous), with their sandbox.
func TestCreatedLatestSandboxIsAdopted(t *testing.T) {
	fake := newFake(t)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	d := duplicates{t: t, fake: fake, pod: pod}
	sb0 := d.sandbox(0, true)
	d.container(sb0, 0, "a", 0, true)
	d.container(sb0, 0, "b", 0, true)
	sb1 := d.sandbox(1, false)
	fake.ResetCalls()

	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitConverged("u1")

	// Only sb0 is stopped: a stop of sb1, about to be started, would race
	// a start a killed podrun may have sent it.
	if n := fake.Calls("StopSandbox"); n != 1 {
		t.Errorf("StopSandbox called %d times, want 1 (the older sandbox)", n)
	}

	sandboxes, containers := h.objects("u1")
	if len(sandboxes) != 2 || sandboxes[sb1] != engine.StateRunning || sandboxes[sb0] != engine.StateExited {
		t.Errorf("sandboxes %v, want the adopted %s, running, and %s exited", sandboxes, sb1[:12], sb0[:12])
	}
	if len(containers) != 4 {
		t.Errorf("containers %v, want a and b, and their runs before", containers)
	}
	for _, c := range h.containers("u1") {
		running := c.SandboxID == sb1 && c.State == engine.StateRunning && c.Attempt == 1
		before := c.SandboxID == sb0 && c.State == engine.StateExited && c.Attempt == 0
		if !running && !before {
			t.Errorf("container %s: sandbox %.12s, %s, attempt %d; want running in %.12s, attempt 1, or exited in %.12s, attempt 0",
				c.Name, c.SandboxID, c.State, c.Attempt, sb1, sb0)
		}
	}
}

// TestDeadSandboxLeftoversGo: the pod's latest sandbox died after
// containers were created in it and before they started (a killed
// podrun's bring-up, whose sandbox its successor stopped), and their
// starts, sent late, may have failed since. The pod is made anew in a new
// sandbox, and nothing of the dead one is left: no run there ever ran.
// The created containers go in the sync that makes the new sandbox,
// before it: `podrun once` may exit soon after, and nothing it leaves may
// look like a second sandbox of the pod.
func TestDeadSandboxLeftoversGo(t *testing.T) {
	for _, lateStart := range []bool{false, true} {
		t.Run(fmt.Sprintf("late start %v", lateStart), func(t *testing.T) {
			fake := newFake(t)
			pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
			d := duplicates{t: t, fake: fake, pod: pod}
			sb0, a0, b0 := d.diedAfterCreates()
			if lateStart {
				for _, id := range []string{a0, b0} {
					if err := fake.StartContainer(context.Background(), id); err == nil {
						t.Fatalf("start of %s in a stopped sandbox succeeded", id)
					}
				}
			}
			fake.ResetCalls()

			h := start(t, fake, nil)
			h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
			h.waitConverged("u1")

			sandboxes, _ := h.objects("u1")
			if len(sandboxes) != 1 || sandboxes[sb0] != "" {
				t.Errorf("sandboxes %v, want only the new one", sandboxes)
			}
			cs := h.containers("u1")
			for _, c := range cs {
				if c.SandboxID == sb0 || c.State != engine.StateRunning {
					t.Errorf("container %s: sandbox %.12s, %s; want running in the new sandbox", c.Name, c.SandboxID, c.State)
				}
			}
			if len(cs) != 2 {
				t.Errorf("%d containers, want a and b", len(cs))
			}
			if lateStart {
				return
			}
			order := fake.CallOrder()
			run := slices.Index(order, "RunSandbox")
			if run < 0 || slices.Contains(order[run:], "RemoveContainer") || slices.Contains(order[run:], "RemoveSandbox") ||
				fake.Calls("RemoveContainer") != 2 || fake.Calls("RemoveSandbox") != 1 {
				t.Errorf("calls %v: want the two created containers and their sandbox removed before the new sandbox is made", order)
			}
		})
	}
}

// TestFailingRemovalBacksOff: a leftover whose removal keeps failing is
// tried again with back-off, not in a loop, and does not keep the pod from
// being reported converged (it runs nothing).
func TestFailingRemovalBacksOff(t *testing.T) {
	fake := newFake(t)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	d := duplicates{t: t, fake: fake, pod: pod}
	sb0 := d.sandbox(0, true)
	d.container(sb0, 0, "a", 0, false)
	sb1 := d.sandbox(1, true)
	d.container(sb1, 1, "a", 1, true)
	d.container(sb1, 1, "b", 1, true)
	for range 1000 {
		fake.FailNext("RemoveContainer", errors.New("device or resource busy"))
	}

	h := startQuiet(t, fake, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	removals := calls(fake, "RemoveContainer")
	h.waitIdle("removals", removals, 1)
	// Tries at 0, +1 s, +2 s, +4 s: one removal each.
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		h.expectWait(d)
		h.waitIdle("removals", removals, i+2)
	}
	h.waitConverged("u1")
	if n := fake.Calls("RemoveSandbox"); n != 0 {
		t.Errorf("the older sandbox was removed (%d calls) while its container could not be", n)
	}
}

// TestNewSandboxEndsStartBackOff: a start the engine refused in a sandbox
// that then died is tried at once in the pod's new sandbox, not at the end
// of the 10 s back-off the refusal began (a podrun killed mid bring-up left
// such pods waiting 10 s).
func TestNewSandboxEndsStartBackOff(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	fake.FailNext("StartContainer", errors.New("cannot join the namespaces of the sandbox"))
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "RunContainerError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "RunContainerError"
	})
	sbs, err := fake.ListSandboxes(context.Background())
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v, %v", sbs, err)
	}
	failedAt := h.clk.Now()
	if err := fake.StopSandbox(context.Background(), sbs[0].ID, 0); err != nil {
		t.Fatal(err)
	}
	// The pod's sync failed, so its worker backs off a second; the start's
	// own back-off (10 s) must not hold the start in the new sandbox.
	h.stepUntilStatus("u1", "running in a new sandbox", 100*time.Millisecond, allRunning)
	if took := h.clk.Since(failedAt); took >= 10*time.Second {
		t.Errorf("started %s (on the fake clock) after the failure: held by the old sandbox's back-off", took)
	}
	if n := fake.Calls("RunSandbox"); n != 2 {
		t.Errorf("%d RunSandbox calls, want 2", n)
	}
}

// TestNeverPodRunsOnceAfterSandboxDies: a restartPolicy Never pod whose
// sandbox (its pause container) dies while its app runs is stopped, not
// made again, as by the kubelet (computePodActions: no new sandbox when
// the pod's restart policy is Never and it has run containers): the app
// runs once, and the pod ends Failed (the app was killed).
func TestNeverPodRunsOnceAfterSandboxDies(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyNever, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	sbs, err := fake.ListSandboxes(context.Background())
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v, %v", sbs, err)
	}
	if err := fake.StopSandbox(context.Background(), sbs[0].ID, 0); err != nil {
		t.Fatal(err)
	}
	h.stepUntilStatus("u1", "the pod to finish or the app to run again", 100*time.Millisecond, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded || len(h.byName("u1", "app")) > 1
	})
	// Let later syncs (relists, resyncs) run: none may make the pod again.
	for range 20 {
		h.step(relistPeriod)
		time.Sleep(5 * time.Millisecond)
	}
	p, _ := h.r.Pod("u1")
	if got := h.byName("u1", "app"); len(got) != 1 || got[0] != engine.StateExited || fake.Calls("RunSandbox") != 1 {
		t.Errorf("app runs %v, RunSandbox calls %d: want one run, stopped, in the one sandbox", got, fake.Calls("RunSandbox"))
	}
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", p.Status.Phase)
	}
}

// An update whose Op was never set is not taken for an add: the pod of a
// later, real add is the only one that runs.
func TestUpdateWithoutOpIsIgnored(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Pods: []*v1.Pod{newPod("u0", "zero-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})}}
	h.waitStatus("u1", "running", allRunning)
	if cs := h.containers("u0"); len(cs) != 0 {
		t.Fatalf("a pod of an update without an op got %d containers", len(cs))
	}
}

// graceRecorder records the grace periods containers are stopped with.
type graceRecorder struct {
	*enginetest.Fake
	mu     sync.Mutex
	graces []time.Duration
}

func (g *graceRecorder) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	g.mu.Lock()
	g.graces = append(g.graces, grace)
	g.mu.Unlock()
	return g.Fake.StopContainer(ctx, id, grace)
}

// recorded is the graces of the stops so far.
func (g *graceRecorder) recorded() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.graces)
}

// TestDeletingPodStopsWithinDeletionGrace: a pod the apiserver is deleting
// (an update with deletionTimestamp) is stopped with its
// deletionGracePeriodSeconds, not its spec's grace, and removed; one that
// arrives already deleting is never started.
func TestDeletingPodStopsWithinDeletionGrace(t *testing.T) {
	fake := newFake(t)
	rec := &graceRecorder{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rec })
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	deleting := pod.DeepCopy()
	now := metav1.NewTime(time.Unix(1700000000, 0))
	grace := int64(7)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{deleting}}
	waitUntil(t, "the deleted pod's removal", func() bool {
		_, ok := h.r.Pod("u1")
		return !ok && len(h.containers("u1")) == 0
	})
	graces := rec.recorded()
	if !slices.Contains(graces, 7*time.Second) || slices.Contains(graces, time.Second) {
		t.Errorf("containers stopped with grace %v, want the deletion grace 7s (not the spec's 1s)", graces)
	}
	// Its last status says how its container really ended, for the
	// status manager to report before the API object goes.
	final, ok := h.r.FinalPod("u1")
	if !ok || len(final.Status.ContainerStatuses) != 1 {
		t.Fatalf("no final status of the deleted pod: %v", final)
	}
	if term := final.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 143 || term.Reason != "Error" ||
		term.FinishedAt.IsZero() || term.StartedAt.IsZero() || term.ContainerID == "" {
		t.Errorf("final container state %+v, want the engine's end (exit 143 of SIGTERM, started and finished times)", term)
	}
	if final.Status.Phase != v1.PodFailed {
		t.Errorf("final phase %s, want Failed", final.Status.Phase)
	}
	// Its source drops it once the API object is gone: so does FinalPod.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{deleting}}
	waitUntil(t, "the final status forgotten", func() bool {
		_, ok := h.r.FinalPod("u1")
		return !ok
	})

	// Already deleting when first seen (podrun restarted meanwhile):
	// nothing is started.
	gone := newPod("u2", "q", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	gone.DeletionTimestamp, gone.DeletionGracePeriodSeconds = &now, &grace
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{gone}}
	// A later pod's start shows the update was applied.
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{newPod("u3", "r", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})}}
	h.waitStatus("u3", "running", allRunning)
	if cs := h.containers("u2"); len(cs) != 0 {
		t.Errorf("a pod deleted before it started has containers: %v", cs)
	}
	if _, ok := h.r.Pod("u2"); ok {
		t.Error("a pod deleted before it started has a status")
	}
}

// blockingHooks is graceRecorder whose execs (preStop hooks) run until
// their context ends, as a hook that hangs in Docker; started hears of
// each.
type blockingHooks struct {
	*graceRecorder
	started chan struct{}
}

func (b *blockingHooks) Exec(ctx context.Context, _ string, _ []string) (int, []byte, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return -1, nil, ctx.Err()
}

// TestShorterDeletionGraceInterruptsTheStop: as the kubelet's pod worker,
// a second delete with a shorter grace period interrupts the stop under
// way (a preStop hook that hangs) and stops the pod again within the new
// grace: the hook is given at most the new grace, and the container is
// stopped with the least left after it, not with the first delete's hour.
func TestShorterDeletionGraceInterruptsTheStop(t *testing.T) {
	fake := newFake(t)
	rec := &blockingHooks{graceRecorder: &graceRecorder{Fake: fake}, started: make(chan struct{}, 2)}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rec })
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"hang"}}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)

	now := metav1.NewTime(time.Unix(1700000000, 0))
	long, short := int64(3600), int64(1)
	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &long
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{deleting}}
	select {
	case <-rec.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the preStop hook did not start")
	}
	again := deleting.DeepCopy()
	again.DeletionGracePeriodSeconds = &short
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{again}}
	waitUntil(t, "the pod's removal", func() bool {
		_, ok := h.r.Pod("u1")
		return !ok && len(h.containers("u1")) == 0
	})
	graces := rec.recorded()
	if len(graces) == 0 || slices.ContainsFunc(graces, func(g time.Duration) bool { return g > 2*time.Second }) {
		t.Errorf("containers stopped with grace %v, want the minimum 2s left after the second delete's 1s", graces)
	}
	if final, ok := h.r.FinalPod("u1"); !ok || final.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("no final status of the pod stopped again: %v", final)
	}
}

// TestRemovedPodStopsWithinDeletionGrace: a pod whose manifest carries
// metadata.deletionGracePeriodSeconds is stopped with it, not with its
// terminationGracePeriodSeconds, when its source removes it.
func TestRemovedPodStopsWithinDeletionGrace(t *testing.T) {
	fake := newFake(t)
	rec := &graceRecorder{Fake: fake}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = rec })
	pod := newPod("u1", "p", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	grace := int64(4)
	pod.DeletionGracePeriodSeconds = &grace
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	waitUntil(t, "the removed pod's teardown", func() bool {
		_, ok := h.r.Pod("u1")
		return !ok && len(h.containers("u1")) == 0
	})
	graces := rec.recorded()
	if len(graces) == 0 || slices.ContainsFunc(graces, func(g time.Duration) bool { return g != 4*time.Second }) {
		t.Errorf("containers stopped with grace %v, want the deletion grace 4s (not the spec's 1s)", graces)
	}
}

// TestResourcesUpdatedWhileAStartWaits: a container whose start waits out
// a back-off (its ConfigMap is missing) does not hold back an in-place
// resources update of its running sibling.
func TestResourcesUpdatedWhileAStartWaits(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}, "b": {"run"}})
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[1].Env = []v1.EnvVar{{Name: "K", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Key: "k"}}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	// A relist (20 ms of the clock) shows a running; b's back-off is
	// 10 s, far beyond the steps taken here.
	h.stepUntilStatus("u1", "a running, b waiting", relistPeriod, func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 2 && cs[0].State.Running != nil && cs[1].State.Waiting != nil &&
			cs[1].State.Waiting.Reason == "CreateContainerConfigError"
	})
	var id string
	for _, c := range h.containers("u1") {
		if c.Name == "a" {
			id = c.ID
		}
	}
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("96Mi")}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	// No step of the clock: b's back-off is not over.
	waitUntil(t, "a's memory limit updated while b waits", func() bool {
		return fake.ContainerConfig(id).Resources.MemoryLimit == 96<<20
	})
}

// TestNewSandboxAddressReadByID: a new sandbox's address, which its
// containers' status.podIP variables take, is read by the sandbox's ID in
// one call (as the kubelet's PodSandboxStatus after RunPodSandbox); a pod
// on the host's network has the node's and reads none.
func TestNewSandboxAddressReadByID(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	podIPEnv := []v1.EnvVar{{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	pod.Spec.Containers[0].Env = podIPEnv
	host := newPod("u2", "h-node1", v1.RestartPolicyAlways, map[string][]string{"a": {"run"}})
	host.Spec.HostNetwork = true
	host.Spec.Containers[0].Env = podIPEnv
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "running", allRunning)
	if n := fake.Calls("SandboxIP"); n != 1 {
		t.Errorf("SandboxIP called %d times for one new sandbox, want 1", n)
	}
	envOf := func(p *v1.Pod) map[string]string {
		env := map[string]string{}
		for _, e := range fake.ContainerConfig(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "fake://")).Env {
			env[e.Name] = e.Value
		}
		return env
	}
	if got := envOf(p)["POD_IP"]; got == "" || got != p.Status.PodIP {
		t.Errorf("POD_IP = %q, want the sandbox's %q", got, p.Status.PodIP)
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{host}}
	p = h.waitStatus("u2", "running", allRunning)
	if n := fake.Calls("SandboxIP"); n != 1 {
		t.Errorf("SandboxIP called for a pod on the host's network (%d calls in all)", n)
	}
	if got := envOf(p)["POD_IP"]; got != "192.0.2.10" {
		t.Errorf("host-network POD_IP = %q, want the node's 192.0.2.10", got)
	}
}

// TestOrphanedPodDirIsRemoved: a pod directory of no pod known (left by
// hand, or by a podrun that died mid-removal) is removed by housekeeping;
// while the pods known do not change, the pods directory is read only once
// a minute, not every round.
func TestOrphanedPodDirIsRemoved(t *testing.T) {
	fake := newFake(t)
	root := t.TempDir()
	var rounds atomic.Int32
	h := start(t, fake, func(c *runner.Config) {
		c.RootDir = root
		c.SourcesReady = func() bool { rounds.Add(1); return true }
	})
	round := func(d time.Duration) {
		t.Helper()
		before := rounds.Load()
		h.step(d)
		waitUntil(t, "a housekeeping round", func() bool { return rounds.Load() > before })
	}
	// The first round reads the (empty) directory; a second has begun
	// once it ended.
	round(housekeepingPeriod)
	round(housekeepingPeriod)
	stray := filepath.Join(root, "pods", "stray-uid")
	if err := os.MkdirAll(filepath.Join(stray, "volumes"), 0o750); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		round(housekeepingPeriod)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("the pods directory was read again although no pod came or went: %v", err)
	}
	round(time.Minute)
	waitUntil(t, "the orphaned directory's removal", func() bool {
		_, err := os.Stat(stray)
		return os.IsNotExist(err)
	})
}

// TestRunBeforeASandboxRecreateIsKept: when a pod's sandbox dies (dockerd
// restarted without live-restore, the box rebooted, the pause container
// killed) and the pod is made again, the app's run in the dead sandbox is
// the run before the new one: as in the kubelet's status, which reads every
// container of the pod's UID whatever its sandbox, it is the lastState, and
// it stays for `logs --previous` instead of being removed by the next sync.
func TestRunBeforeASandboxRecreateIsKept(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	sbs, err := fake.ListSandboxes(context.Background())
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v, %v", sbs, err)
	}
	if err := fake.StopSandbox(context.Background(), sbs[0].ID, 0); err != nil {
		t.Fatal(err)
	}
	h.stepUntilStatus("u1", "running in a new sandbox", 100*time.Millisecond, func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].ContainerID != "fake://"+first.ID
	})
	// Let later syncs (relists, resyncs) run: none may remove the run before.
	for range 20 {
		h.step(relistPeriod)
		time.Sleep(5 * time.Millisecond)
	}
	p, _ := h.r.Pod("u1")
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ContainerID != "fake://"+first.ID {
		t.Errorf("lastState %+v, want the run in the dead sandbox, %s", last, first.ID)
	}
	found := false
	for _, c := range h.containers("u1") {
		found = found || c.ID == first.ID
	}
	if !found {
		t.Errorf("the run in the dead sandbox was removed: logs --previous has nothing to show")
	}
}

// stopBlocker holds the first StopContainer until release is closed, so
// that a test can act while a pod is being stopped.
type stopBlocker struct {
	*enginetest.Fake
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *stopBlocker) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
	return b.Fake.StopContainer(ctx, id, grace)
}

// defineAgainWhileRemoved removes pod and, once its teardown is held
// (entered), defines it again, then lets the teardown go on (release).
func (h *harness) defineAgainWhileRemoved(pod *v1.Pod, entered, release chan struct{}) {
	h.t.Helper()
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{pod}}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the removal never reached the held step")
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	// The add is handed to the worker before the teardown goes on: with
	// the channel's buffer full of empty updates after it, the runner has
	// taken (and applied) the add and the one after it.
	for range cap(h.updates) + 1 {
		h.updates <- runner.PodUpdate{Op: runner.OpUpdate}
	}
	close(release)
}

// TestPodDefinedAgainWhileRemovedRunsAgain: a manifest deleted and written
// back while its pod is still stopping (rm, then cp, half a second apart)
// defines the pod again: once the stop is over the pod is made again, not
// left removed while its manifest is there.
func TestPodDefinedAgainWhileRemovedRunsAgain(t *testing.T) {
	fake := newFake(t)
	b := &stopBlocker{Fake: fake, entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = b })
	pod := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0].ID

	h.defineAgainWhileRemoved(pod, b.entered, b.release)

	h.stepUntilStatus("u1", "running again", 100*time.Millisecond, func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].ContainerID != "fake://"+first
	})
}

// TestRevertedEditStartsAtOnce: a container in crash-loop back-off is
// edited to an image that cannot be pulled, and the edit is put back: the
// spec that comes back starts at once, with a fresh back-off, as the
// kubelet's static pod does (each edit makes it a new pod), not when the
// back-off it had built before the edit ends.
func TestRevertedEditStartsAtOnce(t *testing.T) {
	fake := newFake(t)
	fake.SetPullError("nowhere/bad:1", errors.New("no such image"))
	h := start(t, fake, nil)
	good := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {enginetest.FakeScript, "exit", "1"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{good}}
	h.waitStatus("u1", "CrashLoopBackOff", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	runs := len(h.containers("u1"))

	bad := good.DeepCopy()
	bad.Spec.Containers[0].Image = "nowhere/bad:1"
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{bad}}
	h.waitStatus("u1", "the bad image's pull error", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff")
	})

	// The fake clock does not move: only a start at once passes.
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{good}}
	waitUntil(t, "the reverted spec to run again", func() bool { return len(h.containers("u1")) > runs })
}

// TestRenamedManifestStartsWhenTheOldPodIsGone: a manifest renamed (a new
// UID, the same pod name) while the old pod is still stopping: the new pod
// waits, and starts the moment the old one is removed, not when its
// back-off after the wait ends (the fake clock does not move here).
func TestRenamedManifestStartsWhenTheOldPodIsGone(t *testing.T) {
	fake := newFake(t)
	b := &stopBlocker{Fake: fake, entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = b })
	old := newPod("u1", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{old}}
	h.waitStatus("u1", "running", allRunning)
	// A relist, which the renamed pod's name check reads, sees it run.
	h.step(relistPeriod)
	time.Sleep(100 * time.Millisecond)

	renamed := newPod("u2", "p-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{old}}
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the removal never stopped the container")
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{renamed}}
	// Let the renamed pod find its namesake and wait for it.
	time.Sleep(200 * time.Millisecond)
	close(b.release)
	h.waitStatus("u2", "the renamed pod running", allRunning)
}
