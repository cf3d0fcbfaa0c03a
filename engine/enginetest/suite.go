// Package enginetest holds the conformance suite that states the
// engine.Runtime contract, run against every implementation (engine/docker
// against a real engine, and Fake), and Fake itself: the in-memory runtime
// the sync core's unit tests use. Because the fake passes the same suite as
// Docker, it cannot drift from what Docker really does where the sync core
// can tell.
package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podrun/podrun/engine"
)

// Process names a behaviour the suite needs of a container's process.
type Process int

const (
	// ProcessRun runs until stopped, and exits promptly on SIGTERM.
	ProcessRun Process = iota
	// ProcessIgnoreTerm runs until killed: it ignores SIGTERM.
	ProcessIgnoreTerm
	// ProcessExitEnv exits at once with the code in its env var CODE.
	ProcessExitEnv
	// ProcessEcho writes "hello" and a newline to stdout and exits 0.
	ProcessEcho
	// ProcessOOM allocates well beyond an 8 MiB memory limit at once.
	ProcessOOM
	// ProcessStartFails cannot start (say, its executable does not exist).
	ProcessStartFails
	// ProcessEchoStderr writes "oops" and a newline to stderr and exits 0.
	ProcessEchoStderr
	// ProcessCat copies its stdin to its stdout and exits 0 at its end.
	ProcessCat
)

// Env is what the suite needs to know of an implementation.
type Env struct {
	// Image is a local image containers are made from. It must have no
	// entrypoint (a command line may be given as args alone).
	Image string
	// InfraImage is a local image sandboxes are made from.
	InfraImage string
	// Argv returns the command line of a process that behaves as p.
	Argv func(p Process) []string
	// CreateSandboxOnly makes, without starting it, the sandbox RunSandbox
	// would make for cfg, as a podrun killed between the two steps leaves
	// it. nil skips the test of adopting one.
	CreateSandboxOnly func(t *testing.T, rt engine.Runtime, cfg *engine.SandboxConfig) string
	// NoOOM skips the test that a container killed for memory reports
	// OOMKilled.
	NoOOM bool
	// MakeImage makes a new local image, of its own ID, under the tags refs
	// (at least one), removed at the end of the test, and returns its ID:
	// an image the ImageService tests may remove. nil skips those parts.
	MakeImage func(t *testing.T, refs ...string) string
	// NoSandboxRestart says the engine cannot start a stopped sandbox again
	// (CRI): RunSandbox of a stopped sandbox's identity is then an error,
	// makes nothing, and the caller makes a new attempt.
	NoSandboxRestart bool
	// SandboxRemovalRemovesContainers says that removing a sandbox removes
	// its containers too (CRI's RemovePodSandbox).
	SandboxRemovalRemovesContainers bool
	// NoHostPortCheck says the engine does not refuse a host port another
	// sandbox maps (CRI with CNI's portmap): the test of a sandbox whose
	// start fails on a taken port is skipped.
	NoHostPortCheck bool
	// Timeout bounds each wait for a state; 0 means 30 s.
	Timeout time.Duration
}

// ShellArgv is Env.Argv for an image with busybox's sh, sleep, echo and dd
// (the tests' podrun/busybox:test).
func ShellArgv(p Process) []string {
	return map[Process][]string{
		ProcessRun:        {"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
		ProcessIgnoreTerm: {"sh", "-c", "trap '' TERM; sleep 3600 & wait"},
		ProcessExitEnv:    {"sh", "-c", "exit $CODE"},
		ProcessEcho:       {"echo", "hello"},
		// dd allocates its 64 MiB block and fills it.
		ProcessOOM:        {"dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"},
		ProcessStartFails: {"/no/such/executable"},
		ProcessEchoStderr: {"sh", "-c", "echo oops >&2"},
		ProcessCat:        {"cat"},
	}[p]
}

// FakeEnv is the Env of Fake: the images it needs are added by NewFakeForSuite.
func FakeEnv() Env {
	return Env{
		Image:      "fake.test/app:1",
		InfraImage: "fake.test/pause:1",
		Argv: func(p Process) []string {
			return map[Process][]string{
				ProcessRun:        {FakeScript, "run"},
				ProcessIgnoreTerm: {FakeScript, "ignore-term"},
				ProcessExitEnv:    {FakeScript, "exit", "$CODE"},
				ProcessEcho:       {FakeScript, "echo", "hello"},
				ProcessOOM:        {FakeScript, "oom"},
				ProcessStartFails: {FakeScript, "start-fails"},
				ProcessEchoStderr: {FakeScript, "echo-stderr", "oops"},
				ProcessCat:        {FakeScript, "cat"},
			}[p]
		},
		CreateSandboxOnly: func(t *testing.T, rt engine.Runtime, cfg *engine.SandboxConfig) string {
			t.Helper()
			id, err := rt.(*Fake).CreateSandboxOnly(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return id
		},
	}
}

// fakeMakeImage is FakeEnv's MakeImage for the fake engine of
// NewFakeForSuite.
func fakeMakeImage(fake *Fake) func(t *testing.T, refs ...string) string {
	return func(t *testing.T, refs ...string) string {
		id := "sha256:" + randHex(64)
		fake.PutImage(engine.Image{ID: id, RepoTags: refs, Size: 3 << 20, CreatedAt: time.Now()})
		return id
	}
}

// NewFakeForSuite returns the newRuntime function of Run for Fake: one fake
// engine (with FakeEnv's images) viewed per node.
func NewFakeForSuite() func(t *testing.T, nodeName string) engine.Runtime {
	rt, _ := NewFakeSuite()
	return rt
}

// NewFakeSuite returns the newRuntime function of Run for Fake, and the
// Env for it, with MakeImage set: one fake engine, viewed per node.
func NewFakeSuite() (func(t *testing.T, nodeName string) engine.Runtime, Env) {
	fake := NewFake("")
	env := FakeEnv()
	env.MakeImage = fakeMakeImage(fake)
	fake.AddImage(env.Image)
	fake.AddImage(env.InfraImage)
	return func(t *testing.T, nodeName string) engine.Runtime { return fake.ForNode(nodeName) }, env
}

// Run runs the conformance suite. newRuntime returns a runtime for a node;
// called twice with one name, it returns two runtimes over the same engine
// (as a restarted podrun). Each test uses node names of its own and removes
// what it made.
func Run(t *testing.T, newRuntime func(t *testing.T, nodeName string) engine.Runtime, env Env) {
	if env.Timeout == 0 {
		env.Timeout = 30 * time.Second
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *suite)
	}{
		{"SandboxLifecycle", testSandboxLifecycle},
		{"SandboxZeroGracePeriod", testSandboxZeroGracePeriod},
		{"SandboxIdempotent", testSandboxIdempotent},
		{"SandboxConcurrentRun", testSandboxConcurrentRun},
		{"SandboxAdoptCreated", testSandboxAdoptCreated},
		{"SandboxAttempts", testSandboxAttempts},
		{"ContainerLifecycle", testContainerLifecycle},
		{"ContainerIdempotent", testContainerIdempotent},
		{"ContainerIdentity", testContainerIdentity},
		{"ExitCode", testExitCode},
		{"StopGrace", testStopGrace},
		{"StartFails", testStartFails},
		{"StartInStoppedSandbox", testStartInStoppedSandbox},
		{"OOMKilled", testOOMKilled},
		{"NotFound", testNotFound},
		{"NodeIsolation", testNodeIsolation},
		{"Adoption", testAdoption},
		{"Images", testImages},
		{"ImageService", testImageService},
		{"Logs", testLogs},
		{"UpdateResources", testUpdateResources},
		{"Exec", testExec},
		{"ExecStream", testExecStream},
		{"Events", testEvents},
		{"ListPodObjects", testListPodObjects},
		{"SandboxStartFails", testSandboxStartFails},
		{"RuntimeHandlers", testRuntimeHandlers},
		{"ExportImageFilesystem", testExportImageFilesystem},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Docker's OOM report (State.OOMKilled, the oom event) races
			// with the exit under load: the OOM test runs alone.
			if tc.name != "OOMKilled" {
				t.Parallel()
			}
			s := &suite{env: env, newRuntime: newRuntime}
			tc.fn(t, s)
		})
	}
}

type suite struct {
	env        Env
	newRuntime func(t *testing.T, nodeName string) engine.Runtime
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:n]
}

// runtime returns a runtime for a new node, cleaned at the end of the test.
func (s *suite) runtime(t *testing.T) (engine.Runtime, string) {
	t.Helper()
	node := "rt-" + randHex(8)
	rt := s.newRuntime(t, node)
	s.cleanup(t, rt)
	return rt, node
}

// cleanup removes, at the end of the test, everything rt's node has.
func (s *suite) cleanup(t *testing.T, rt engine.Runtime) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := rt.ListContainers(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, c := range cs {
			if err := rt.RemoveContainer(ctx, c.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		sbs, err := rt.ListSandboxes(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, sb := range sbs {
			if err := rt.RemoveSandbox(ctx, sb.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sandboxConfig is a sandbox of a new pod.
func (s *suite) sandboxConfig(name string) *engine.SandboxConfig {
	return &engine.SandboxConfig{
		Pod:      engine.PodRef{UID: randHex(8) + "-" + randHex(4) + "-" + randHex(4) + "-" + randHex(4) + "-" + randHex(12), Name: name, Namespace: "default"},
		Attempt:  0,
		Hash:     "sb-" + randHex(6),
		Image:    s.env.InfraImage,
		Hostname: name,
		Labels:   map[string]string{"app": name},
		Source:   "/etc/podrun/manifests/" + name + ".yaml",
		// A grace period kept with the sandbox.
		GracePeriod: 45 * time.Second,
		QOSClass:    "Burstable",
	}
}

// containerConfig is a container running p.
func (s *suite) containerConfig(name string, p Process) *engine.ContainerConfig {
	argv := s.env.Argv(p)
	return &engine.ContainerConfig{
		Name:          name,
		Type:          engine.ContainerTypeApp,
		Hash:          "c-" + randHex(6),
		ResourcesHash: "r-" + randHex(6),
		Image:         s.env.Image,
		Command:       argv[:1],
		Args:          argv[1:],
	}
}

func (s *suite) runSandbox(t *testing.T, rt engine.Runtime, cfg *engine.SandboxConfig) string {
	t.Helper()
	id, err := rt.RunSandbox(ctxFor(t), cfg)
	if err != nil {
		t.Fatalf("RunSandbox: %v", err)
	}
	return id
}

func (s *suite) create(t *testing.T, rt engine.Runtime, sbID string, sb *engine.SandboxConfig, cfg *engine.ContainerConfig) string {
	t.Helper()
	id, err := rt.CreateContainer(ctxFor(t), sbID, sb, cfg)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", cfg.Name, err)
	}
	return id
}

func (s *suite) start(t *testing.T, rt engine.Runtime, id string) {
	t.Helper()
	if err := rt.StartContainer(ctxFor(t), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

func findSandbox(t *testing.T, rt engine.Runtime, id string) *engine.Sandbox {
	t.Helper()
	sbs, err := rt.ListSandboxes(ctxFor(t))
	if err != nil {
		t.Fatalf("ListSandboxes: %v", err)
	}
	for _, sb := range sbs {
		if sb.ID == id {
			return sb
		}
	}
	return nil
}

func findContainer(t *testing.T, rt engine.Runtime, id string) *engine.Container {
	t.Helper()
	cs, err := rt.ListContainers(ctxFor(t))
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	for _, c := range cs {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// waitContainer polls the list until id satisfies ok, and returns it.
func (s *suite) waitContainer(t *testing.T, rt engine.Runtime, id, what string, ok func(*engine.Container) bool) *engine.Container {
	t.Helper()
	deadline := time.Now().Add(s.env.Timeout)
	for {
		c := findContainer(t, rt, id)
		if c != nil && ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %.12s: not %s within %s; last seen: %+v", id, what, s.env.Timeout, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exited(c *engine.Container) bool { return c.State == engine.StateExited }

// A grace period of zero is one (the pod's containers are killed at once),
// not an unknown one: a podrun without the manifest must not stop such a
// pod with the 30 s default.
func testSandboxZeroGracePeriod(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	cfg := s.sandboxConfig("nograce")
	cfg.GracePeriod = 0
	id := s.runSandbox(t, rt, cfg)
	sb := findSandbox(t, rt, id)
	if sb == nil {
		t.Fatalf("sandbox %s not listed", id)
	}
	if sb.GracePeriod == nil || *sb.GracePeriod != 0 {
		t.Errorf("listed grace period %v, want 0s recorded", sb.GracePeriod)
	}
}

func testSandboxLifecycle(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	cfg := s.sandboxConfig("life")
	before := time.Now().Add(-2 * time.Second) // some runtimes stamp whole seconds
	id := s.runSandbox(t, rt, cfg)

	sb := findSandbox(t, rt, id)
	if sb == nil {
		t.Fatalf("sandbox %s not listed", id)
	}
	if sb.Pod != cfg.Pod || sb.Attempt != cfg.Attempt || sb.Hash != cfg.Hash {
		t.Errorf("listed identity = %+v/%d/%q, want %+v/%d/%q", sb.Pod, sb.Attempt, sb.Hash, cfg.Pod, cfg.Attempt, cfg.Hash)
	}
	if sb.Source != cfg.Source || sb.GracePeriod == nil || *sb.GracePeriod != cfg.GracePeriod || sb.QOSClass != cfg.QOSClass {
		t.Errorf("listed source %q, grace period %v, QoS class %q; want %q, %s, %q",
			sb.Source, sb.GracePeriod, sb.QOSClass, cfg.Source, cfg.GracePeriod, cfg.QOSClass)
	}
	if sb.State != engine.StateRunning {
		t.Errorf("state = %s, want running", sb.State)
	}
	if sb.IP == "" {
		t.Errorf("a running sandbox on its own network has no IP")
	}
	// An engine that reads one sandbox's IP by its ID (the runner's
	// sandboxIPReader) reads the one its list shows.
	if ir, ok := rt.(interface {
		SandboxIP(context.Context, string) (string, error)
	}); ok {
		if ip, err := ir.SandboxIP(ctx, id); err != nil || ip != sb.IP {
			t.Errorf("SandboxIP = %q, %v; want the listed %q", ip, err, sb.IP)
		}
	}
	if sb.CreatedAt.Before(before) || sb.CreatedAt.After(time.Now().Add(2*time.Second)) {
		t.Errorf("CreatedAt = %v, want about now", sb.CreatedAt)
	}

	if err := rt.StopSandbox(ctx, id, 10*time.Second); err != nil {
		t.Fatalf("StopSandbox: %v", err)
	}
	if sb := findSandbox(t, rt, id); sb == nil || sb.State != engine.StateExited {
		t.Fatalf("after stop: %+v, want exited", sb)
	}
	if err := rt.StopSandbox(ctx, id, 10*time.Second); err != nil {
		t.Errorf("stopping a stopped sandbox: %v, want nil", err)
	}

	if s.env.NoSandboxRestart {
		// Running it again is an error that makes nothing.
		if again, err := rt.RunSandbox(ctx, cfg); err == nil {
			t.Errorf("RunSandbox of a stopped sandbox on an engine that cannot restart one = %s, nil; want an error", again)
		}
		if sbs, err := rt.ListSandboxes(ctx); err != nil || len(sbs) != 1 || sbs[0].ID != id || sbs[0].State != engine.StateExited {
			t.Errorf("after RunSandbox of a stopped sandbox: %+v, %v; want only the stopped one", sbs, err)
		}
	} else {
		// Running it again adopts and restarts the stopped one.
		again := s.runSandbox(t, rt, cfg)
		if again != id {
			t.Errorf("RunSandbox after stop = %s, want the same sandbox %s", again, id)
		}
		if sb := findSandbox(t, rt, id); sb == nil || sb.State != engine.StateRunning {
			t.Errorf("after RunSandbox of a stopped sandbox: %+v, want running", sb)
		}
	}

	if err := rt.RemoveSandbox(ctx, id); err != nil {
		t.Fatalf("RemoveSandbox: %v", err)
	}
	if sb := findSandbox(t, rt, id); sb != nil {
		t.Fatalf("removed sandbox still listed: %+v", sb)
	}
	if err := rt.RemoveSandbox(ctx, id); err != nil {
		t.Errorf("removing a removed sandbox: %v, want nil", err)
	}
	if err := rt.StopSandbox(ctx, id, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("stopping a removed sandbox: %v, want ErrNotFound", err)
	}
}

func testSandboxIdempotent(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	cfg := s.sandboxConfig("idem")
	id1 := s.runSandbox(t, rt, cfg)
	id2 := s.runSandbox(t, rt, cfg)
	if id1 != id2 {
		t.Errorf("RunSandbox twice = %s, %s, want one sandbox", id1, id2)
	}
	sbs, err := rt.ListSandboxes(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 {
		t.Errorf("listed %d sandboxes, want 1", len(sbs))
	}
}

func testSandboxConcurrentRun(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	cfg := s.sandboxConfig("race")
	const n = 4
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = rt.RunSandbox(ctxFor(t), cfg)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("RunSandbox %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("concurrent RunSandbox returned %s and %s", ids[0], ids[i])
		}
	}
	sbs, err := rt.ListSandboxes(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].State != engine.StateRunning {
		t.Errorf("after concurrent RunSandbox: %d sandboxes (%+v), want 1 running", len(sbs), sbs)
	}
}

func testSandboxAdoptCreated(t *testing.T, s *suite) {
	if s.env.CreateSandboxOnly == nil {
		t.Skip("the implementation has no way to make a created-only sandbox")
	}
	rt, _ := s.runtime(t)
	cfg := s.sandboxConfig("adopt")
	created := s.env.CreateSandboxOnly(t, rt, cfg)
	if sb := findSandbox(t, rt, created); sb == nil || sb.State != engine.StateCreated {
		t.Fatalf("created-only sandbox: %+v, want state created", sb)
	}
	id := s.runSandbox(t, rt, cfg)
	if id != created {
		t.Errorf("RunSandbox = %s, want the created sandbox %s adopted", id, created)
	}
	sbs, err := rt.ListSandboxes(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].State != engine.StateRunning {
		t.Errorf("after adoption: %+v, want one running sandbox", sbs)
	}
}

func testSandboxAttempts(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	cfg0 := s.sandboxConfig("attempts")
	cfg1 := *cfg0
	cfg1.Attempt = 1
	id0 := s.runSandbox(t, rt, cfg0)
	id1 := s.runSandbox(t, rt, &cfg1)
	if id0 == id1 {
		t.Fatalf("attempts 0 and 1 gave one sandbox %s", id0)
	}
	for id, attempt := range map[string]int{id0: 0, id1: 1} {
		sb := findSandbox(t, rt, id)
		if sb == nil || sb.Attempt != attempt {
			t.Errorf("sandbox %s: %+v, want attempt %d", id, sb, attempt)
		}
	}
}

func testContainerLifecycle(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	sb := s.sandboxConfig("ctr")
	sbID := s.runSandbox(t, rt, sb)
	id := s.create(t, rt, sbID, sb, s.containerConfig("app", ProcessRun))

	c := findContainer(t, rt, id)
	if c == nil || c.State != engine.StateCreated {
		t.Fatalf("after create: %+v, want created", c)
	}
	if !c.StartedAt.IsZero() || !c.FinishedAt.IsZero() {
		t.Errorf("created container has StartedAt %v, FinishedAt %v; want zero", c.StartedAt, c.FinishedAt)
	}
	if findSandbox(t, rt, id) != nil {
		t.Errorf("a container is listed as a sandbox")
	}
	if findContainer(t, rt, sbID) != nil {
		t.Errorf("a sandbox is listed as a container")
	}

	before := time.Now().Add(-time.Second)
	s.start(t, rt, id)
	c = findContainer(t, rt, id)
	if c == nil || c.State != engine.StateRunning {
		t.Fatalf("after start: %+v, want running", c)
	}
	if c.StartedAt.Before(before) {
		t.Errorf("StartedAt = %v, want after %v", c.StartedAt, before)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Errorf("starting a running container: %v, want nil", err)
	}

	if err := rt.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	c = findContainer(t, rt, id)
	if c == nil || c.State != engine.StateExited {
		t.Fatalf("after stop: %+v, want exited", c)
	}
	if c.FinishedAt.IsZero() || c.FinishedAt.Before(c.StartedAt) {
		t.Errorf("FinishedAt = %v, StartedAt = %v", c.FinishedAt, c.StartedAt)
	}
	if err := rt.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Errorf("stopping a stopped container: %v, want nil", err)
	}

	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if c := findContainer(t, rt, id); c != nil {
		t.Fatalf("removed container still listed: %+v", c)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Errorf("removing a removed container: %v, want nil", err)
	}
	if err := rt.StartContainer(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("starting a removed container: %v, want ErrNotFound", err)
	}

	// A running container is removed too (killed first).
	id2 := s.create(t, rt, sbID, sb, s.containerConfig("app2", ProcessRun))
	s.start(t, rt, id2)
	if err := rt.RemoveContainer(ctx, id2); err != nil {
		t.Fatalf("RemoveContainer of a running container: %v", err)
	}
	if c := findContainer(t, rt, id2); c != nil {
		t.Fatalf("removed running container still listed: %+v", c)
	}

	// A created container that never ran can be stopped (a no-op).
	id3 := s.create(t, rt, sbID, sb, s.containerConfig("app3", ProcessRun))
	if err := rt.StopContainer(ctx, id3, time.Second); err != nil {
		t.Errorf("stopping a created container: %v, want nil", err)
	}
}

func testContainerIdempotent(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	sb := s.sandboxConfig("cidem")
	sbID := s.runSandbox(t, rt, sb)
	cfg := s.containerConfig("app", ProcessRun)
	id1 := s.create(t, rt, sbID, sb, cfg)
	id2 := s.create(t, rt, sbID, sb, cfg)
	if id1 != id2 {
		t.Errorf("CreateContainer twice = %s, %s, want one container", id1, id2)
	}
	// Concurrent creates of one identity make one container too.
	cfg2 := s.containerConfig("racer", ProcessRun)
	const n = 4
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = rt.CreateContainer(ctxFor(t), sbID, sb, cfg2)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("CreateContainer %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("concurrent CreateContainer returned %s and %s", ids[0], ids[i])
		}
	}
	// A new attempt is a new container.
	cfg3 := *cfg
	cfg3.Attempt = 1
	id3 := s.create(t, rt, sbID, sb, &cfg3)
	if id3 == id1 {
		t.Errorf("attempt 1 returned attempt 0's container")
	}
	cs, err := rt.ListContainers(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Errorf("listed %d containers, want 3 (app#0, app#1, racer#0)", len(cs))
	}
}

func testContainerIdentity(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	sb := s.sandboxConfig("ident")
	sbID := s.runSandbox(t, rt, sb)
	initCfg := s.containerConfig("setup", ProcessRun)
	initCfg.Type = engine.ContainerTypeInit
	initCfg.Attempt = 2
	appCfg := s.containerConfig("web", ProcessRun)
	appCfg.Attempt = 5
	appCfg.Labels = map[string]string{"example.com/extra": "yes"}
	for _, cfg := range []*engine.ContainerConfig{initCfg, appCfg} {
		id := s.create(t, rt, sbID, sb, cfg)
		c := findContainer(t, rt, id)
		if c == nil {
			t.Fatalf("container %s not listed", id)
		}
		want := engine.Container{
			ID: id, SandboxID: sbID, Pod: sb.Pod, Name: cfg.Name, Type: cfg.Type,
			Attempt: cfg.Attempt, Hash: cfg.Hash, ResourcesHash: cfg.ResourcesHash, Image: cfg.Image,
		}
		got := engine.Container{
			ID: c.ID, SandboxID: c.SandboxID, Pod: c.Pod, Name: c.Name, Type: c.Type,
			Attempt: c.Attempt, Hash: c.Hash, ResourcesHash: c.ResourcesHash, Image: c.Image,
		}
		if got != want {
			t.Errorf("listed identity:\n got %+v\nwant %+v", got, want)
		}
		if c.ImageID == "" {
			t.Errorf("ImageID is empty")
		}
		if c.CreatedAt.IsZero() {
			t.Errorf("CreatedAt is zero")
		}
	}
}

func testExitCode(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	sb := s.sandboxConfig("exit")
	sbID := s.runSandbox(t, rt, sb)
	argv := s.env.Argv(ProcessExitEnv)
	// The command line as command+args, command alone, and args alone.
	splits := []struct {
		name          string
		command, args []string
	}{
		{"command-args", argv[:1], argv[1:]},
		{"command", argv, nil},
		{"args", nil, argv},
	}
	for i, sp := range splits {
		for _, code := range []int{0, 3} {
			cfg := s.containerConfig(fmt.Sprintf("exit%d-%d", i, code), ProcessExitEnv)
			cfg.Command, cfg.Args = sp.command, sp.args
			cfg.Env = []engine.EnvVar{{Name: "OTHER", Value: "1"}, {Name: "CODE", Value: fmt.Sprint(code)}}
			id := s.create(t, rt, sbID, sb, cfg)
			s.start(t, rt, id)
			c := s.waitContainer(t, rt, id, "exited", exited)
			if c.ExitCode != code {
				t.Errorf("%s: exit code %d, want %d", sp.name, c.ExitCode, code)
			}
			if c.FinishedAt.IsZero() || c.StartedAt.IsZero() || c.FinishedAt.Before(c.StartedAt) {
				t.Errorf("%s: StartedAt %v, FinishedAt %v", sp.name, c.StartedAt, c.FinishedAt)
			}
			if c.OOMKilled {
				t.Errorf("%s: OOMKilled", sp.name)
			}
		}
	}
}

func testStopGrace(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	sb := s.sandboxConfig("grace")
	sbID := s.runSandbox(t, rt, sb)

	stubborn := s.create(t, rt, sbID, sb, s.containerConfig("stubborn", ProcessIgnoreTerm))
	polite := s.create(t, rt, sbID, sb, s.containerConfig("polite", ProcessRun))
	s.start(t, rt, stubborn)
	s.start(t, rt, polite)

	const grace = 2 * time.Second
	before := time.Now()
	if err := rt.StopContainer(ctx, stubborn, grace); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	c := s.waitContainer(t, rt, stubborn, "exited", exited)
	if took := c.FinishedAt.Sub(before); took < grace-200*time.Millisecond {
		t.Errorf("a process ignoring SIGTERM was stopped after %s, before the grace period %s", took, grace)
	}
	if c.ExitCode != 137 {
		t.Errorf("a process killed after grace: exit code %d, want 137 (SIGKILL)", c.ExitCode)
	}

	before = time.Now()
	if err := rt.StopContainer(ctx, polite, 30*time.Second); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	c = s.waitContainer(t, rt, polite, "exited", exited)
	if took := c.FinishedAt.Sub(before); took > 10*time.Second {
		t.Errorf("a process exiting on SIGTERM took %s to stop", took)
	}
}

func testStartFails(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	sb := s.sandboxConfig("fails")
	sbID := s.runSandbox(t, rt, sb)
	id := s.create(t, rt, sbID, sb, s.containerConfig("broken", ProcessStartFails))
	if err := rt.StartContainer(ctxFor(t), id); err == nil {
		t.Fatalf("StartContainer of a container that cannot start: nil error")
	}
	c := findContainer(t, rt, id)
	if c == nil || c.State != engine.StateExited || c.ExitCode == 0 || c.Message == "" {
		t.Fatalf("after a failed start: %+v, want exited with a non-zero code and a message", c)
	}
	if c.FinishedAt.IsZero() {
		t.Errorf("after a failed start: FinishedAt is zero")
	}
}

func testStartInStoppedSandbox(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	sb := s.sandboxConfig("orphan")
	sbID := s.runSandbox(t, rt, sb)
	id := s.create(t, rt, sbID, sb, s.containerConfig("app", ProcessRun))
	if err := rt.StopSandbox(ctxFor(t), sbID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctxFor(t), id); err == nil {
		t.Fatalf("a container started in a stopped sandbox")
	}
	if c := findContainer(t, rt, id); c == nil || c.State == engine.StateRunning {
		t.Errorf("after starting in a stopped sandbox: %+v, want not running", c)
	}
	if s.env.SandboxRemovalRemovesContainers {
		// Removing the sandbox removes the container with it.
		if err := rt.RemoveSandbox(ctxFor(t), sbID); err != nil {
			t.Fatal(err)
		}
		if c := findContainer(t, rt, id); c != nil {
			t.Errorf("after removing its sandbox: %+v, want the container removed with it", c)
		}
		if err := rt.StartContainer(ctxFor(t), id); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("starting a container removed with its sandbox = %v, want ErrNotFound", err)
		}
		return
	}
	// In a removed sandbox: an error, but not ErrNotFound, which would say
	// the container itself is gone.
	id2 := s.create(t, rt, sbID, sb, s.containerConfig("app2", ProcessRun))
	if err := rt.RemoveSandbox(ctxFor(t), sbID); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctxFor(t), id2); err == nil || errors.Is(err, engine.ErrNotFound) {
		t.Errorf("starting a container whose sandbox is removed = %v, want an error other than ErrNotFound", err)
	}
	if c := findContainer(t, rt, id2); c == nil || c.State == engine.StateRunning {
		t.Errorf("after starting in a removed sandbox: %+v, want listed, not running", c)
	}
}

func testOOMKilled(t *testing.T, s *suite) {
	if s.env.NoOOM {
		t.Skip("the implementation cannot report OOM kills here")
	}
	// Docker 20.10 on cgroup v2 sometimes misses an OOM kill under load
	// (exit 137, OOMKilled false): then the engine had nothing to report,
	// and the kill is tried again. An implementation that never reports
	// OOMKilled fails every try.
	const tries = 3
	rt, _ := s.runtime(t)
	for try := 1; try <= tries; try++ {
		sb := s.sandboxConfig(fmt.Sprintf("oom%d", try))
		sbID := s.runSandbox(t, rt, sb)
		cfg := s.containerConfig("hog", ProcessOOM)
		cfg.Resources.MemoryLimit = 8 << 20
		id := s.create(t, rt, sbID, sb, cfg)
		s.start(t, rt, id)
		c := s.waitContainer(t, rt, id, "exited", exited)
		if c.ExitCode != 137 {
			t.Fatalf("a container over its memory limit: exit code %d, want 137", c.ExitCode)
		}
		if c.OOMKilled {
			return
		}
		t.Logf("try %d: killed (137) but not reported OOMKilled; again", try)
	}
	t.Errorf("a container over its memory limit: never reported OOMKilled in %d tries", tries)
}

func testNotFound(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	missing := randHex(64)
	sb := s.sandboxConfig("nf")

	if err := rt.StartContainer(ctx, missing); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("StartContainer(missing) = %v, want ErrNotFound", err)
	}
	if err := rt.StopContainer(ctx, missing, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("StopContainer(missing) = %v, want ErrNotFound", err)
	}
	if err := rt.StopSandbox(ctx, missing, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("StopSandbox(missing) = %v, want ErrNotFound", err)
	}
	if err := rt.RemoveContainer(ctx, missing); err != nil {
		t.Errorf("RemoveContainer(missing) = %v, want nil", err)
	}
	if err := rt.RemoveSandbox(ctx, missing); err != nil {
		t.Errorf("RemoveSandbox(missing) = %v, want nil", err)
	}
	if _, err := rt.CreateContainer(ctx, missing, sb, s.containerConfig("x", ProcessRun)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("CreateContainer(missing sandbox) = %v, want ErrNotFound", err)
	}
	if u, ok := rt.(engine.ResourceUpdater); ok {
		if err := u.UpdateContainerResources(ctx, missing, &engine.Resources{}); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("UpdateContainerResources(missing) = %v, want ErrNotFound", err)
		}
	}
	if l, ok := rt.(engine.LogReader); ok {
		if err := l.ContainerLogs(ctx, missing, engine.LogOptions{Tail: -1}, nil, nil); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("ContainerLogs(missing) = %v, want ErrNotFound", err)
		}
	}

	// A missing image.
	noImage := *sb
	noImage.Image = "podrun.invalid/no-such-image:" + randHex(6)
	if _, err := rt.RunSandbox(ctx, &noImage); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RunSandbox(missing image) = %v, want ErrNotFound", err)
	}
	sbID := s.runSandbox(t, rt, sb)
	cfg := s.containerConfig("noimage", ProcessRun)
	cfg.Image = noImage.Image
	if _, err := rt.CreateContainer(ctx, sbID, sb, cfg); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("CreateContainer(missing image) = %v, want ErrNotFound", err)
	}

	// A sandbox ID is no container ID, and the reverse.
	id := s.create(t, rt, sbID, sb, s.containerConfig("app", ProcessRun))
	if err := rt.StartContainer(ctx, sbID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("StartContainer(a sandbox) = %v, want ErrNotFound", err)
	}
	if err := rt.StopSandbox(ctx, id, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("StopSandbox(a container) = %v, want ErrNotFound", err)
	}
	if _, err := rt.CreateContainer(ctx, id, sb, s.containerConfig("x", ProcessRun)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("CreateContainer(in a container) = %v, want ErrNotFound", err)
	}
}

func testNodeIsolation(t *testing.T, s *suite) {
	rtA, _ := s.runtime(t)
	rtB, _ := s.runtime(t)
	ctx := ctxFor(t)
	sb := s.sandboxConfig("iso")
	sbID := s.runSandbox(t, rtA, sb)
	id := s.create(t, rtA, sbID, sb, s.containerConfig("app", ProcessRun))
	s.start(t, rtA, id)

	if sbs, err := rtB.ListSandboxes(ctx); err != nil || len(sbs) != 0 {
		t.Errorf("node B lists sandboxes %+v (%v), want none", sbs, err)
	}
	if cs, err := rtB.ListContainers(ctx); err != nil || len(cs) != 0 {
		t.Errorf("node B lists containers %+v (%v), want none", cs, err)
	}
	if err := rtB.StopSandbox(ctx, sbID, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("node B stops node A's sandbox: %v, want ErrNotFound", err)
	}
	if err := rtB.StopContainer(ctx, id, time.Second); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("node B stops node A's container: %v, want ErrNotFound", err)
	}
	if err := rtB.StartContainer(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("node B starts node A's container: %v, want ErrNotFound", err)
	}
	if _, err := rtB.CreateContainer(ctx, sbID, sb, s.containerConfig("intruder", ProcessRun)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("node B creates in node A's sandbox: %v, want ErrNotFound", err)
	}
	// Removing what B cannot see is "already gone" for B, and leaves A's.
	if err := rtB.RemoveContainer(ctx, id); err != nil {
		t.Errorf("node B removes node A's container: %v, want nil (not found)", err)
	}
	if err := rtB.RemoveSandbox(ctx, sbID); err != nil {
		t.Errorf("node B removes node A's sandbox: %v, want nil (not found)", err)
	}
	if c := findContainer(t, rtA, id); c == nil || c.State != engine.StateRunning {
		t.Errorf("node A's container after node B's calls: %+v, want running", c)
	}
	if sb := findSandbox(t, rtA, sbID); sb == nil || sb.State != engine.StateRunning {
		t.Errorf("node A's sandbox after node B's calls: %+v, want running", sb)
	}
	// An identity held by another node is an error, neither adopted nor
	// duplicated.
	if got, err := rtB.RunSandbox(ctx, sb); err == nil {
		t.Errorf("node B's RunSandbox of node A's pod identity = %s, want an error", got)
	}
	if sbs, _ := rtA.ListSandboxes(ctx); len(sbs) != 1 {
		t.Errorf("node A has %d sandboxes, want 1", len(sbs))
	}
}

func testAdoption(t *testing.T, s *suite) {
	rt, node := s.runtime(t)
	ctx := ctxFor(t)
	sb := s.sandboxConfig("adopt")
	sbID := s.runSandbox(t, rt, sb)
	cfg := s.containerConfig("app", ProcessRun)
	id := s.create(t, rt, sbID, sb, cfg)
	s.start(t, rt, id)

	// A restarted podrun: a new runtime for the same node, over the same
	// engine, with nothing but what it lists.
	rt2 := s.newRuntime(t, node)
	c := findContainer(t, rt2, id)
	if c == nil || c.State != engine.StateRunning || c.Name != cfg.Name || c.Hash != cfg.Hash || c.SandboxID != sbID {
		t.Fatalf("new runtime lists %+v, want the running container", c)
	}
	if got := s.runSandbox(t, rt2, sb); got != sbID {
		t.Errorf("new runtime's RunSandbox = %s, want the existing %s", got, sbID)
	}
	if got := s.create(t, rt2, sbID, sb, cfg); got != id {
		t.Errorf("new runtime's CreateContainer = %s, want the existing %s", got, id)
	}
	if c := findContainer(t, rt2, id); c == nil || c.State != engine.StateRunning {
		t.Errorf("adopted container: %+v, want still running", c)
	}
	if err := rt2.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Errorf("new runtime stops the adopted container: %v", err)
	}
}

// testSandboxStartFails: a sandbox whose start fails (its host port is
// taken by another sandbox) is an error of RunSandbox, and is listed as
// exited: dead, not waiting to be started. Running it again (adoption)
// fails again and makes no second object.
func testSandboxStartFails(t *testing.T, s *suite) {
	if s.env.NoHostPortCheck {
		t.Skip("the engine does not refuse a host port another sandbox maps")
	}
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	port := freePort(t)
	holder := s.sandboxConfig("port-holder")
	holder.Ports = []engine.PortMapping{{Protocol: "TCP", ContainerPort: 80, HostPort: port, HostIP: "127.0.0.1"}}
	s.runSandbox(t, rt, holder)

	sb := s.sandboxConfig("port-taker")
	sb.Ports = []engine.PortMapping{{Protocol: "TCP", ContainerPort: 80, HostPort: port, HostIP: "127.0.0.1"}}
	if id, err := rt.RunSandbox(ctx, sb); err == nil {
		t.Fatalf("RunSandbox with a taken host port = %s, want an error", id)
	}
	if _, err := rt.RunSandbox(ctx, sb); err == nil {
		t.Fatalf("RunSandbox again with a taken host port: want an error")
	}
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []*engine.Sandbox
	for _, x := range sbs {
		if x.Pod.UID == sb.Pod.UID {
			mine = append(mine, x)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d sandboxes of the pod, want 1: %+v", len(mine), mine)
	}
	if mine[0].State != engine.StateExited {
		t.Errorf("a sandbox whose start failed is listed %s, want %s", mine[0].State, engine.StateExited)
	}
	if pl, ok := rt.(engine.PodObjectLister); ok {
		sbs, _, err := pl.ListPodObjects(ctx, sb.Pod.UID)
		if err != nil || len(sbs) != 1 || sbs[0].State != engine.StateExited {
			t.Errorf("ListPodObjects: %+v, %v; want the one sandbox, exited", sbs, err)
		}
	}
}

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// testListPodObjects: one pod's objects, or all of the node's, in one call,
// as ListSandboxes and ListContainers report them; never another node's.
func testListPodObjects(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	pl, ok := rt.(engine.PodObjectLister)
	if !ok {
		t.Skip("not a PodObjectLister")
	}
	other, _ := s.runtime(t)
	ctx := ctxFor(t)
	sbA := s.sandboxConfig("list-a")
	sbAID := s.runSandbox(t, rt, sbA)
	a1 := s.create(t, rt, sbAID, sbA, s.containerConfig("one", ProcessRun))
	s.start(t, rt, a1)
	a2 := s.create(t, rt, sbAID, sbA, s.containerConfig("two", ProcessRun)) // created, never started
	sbB := s.sandboxConfig("list-b")
	sbBID := s.runSandbox(t, rt, sbB)
	b1 := s.create(t, rt, sbBID, sbB, s.containerConfig("one", ProcessRun))
	s.start(t, rt, b1)
	// Another node's pod shows in neither list.
	osb := s.sandboxConfig("list-other")
	oID := s.runSandbox(t, other, osb)

	ids := func(sbs []*engine.Sandbox, cs []*engine.Container) map[string]bool {
		out := map[string]bool{}
		for _, sb := range sbs {
			out["sb:"+sb.ID] = true
		}
		for _, c := range cs {
			out["c:"+c.ID] = true
		}
		return out
	}
	sbs, cs, err := pl.ListPodObjects(ctx, sbA.Pod.UID)
	if err != nil {
		t.Fatalf("ListPodObjects(A): %v", err)
	}
	want := map[string]bool{"sb:" + sbAID: true, "c:" + a1: true, "c:" + a2: true}
	if got := ids(sbs, cs); !reflect.DeepEqual(got, want) {
		t.Errorf("ListPodObjects(A) = %v, want %v", got, want)
	}
	for _, c := range cs {
		full := findContainer(t, rt, c.ID)
		if full == nil {
			t.Fatalf("ListContainers misses %s", c.ID)
		}
		if !reflect.DeepEqual(c, full) {
			t.Errorf("ListPodObjects reports %+v, ListContainers %+v", c, full)
		}
	}
	for _, sb := range sbs {
		if full := findSandbox(t, rt, sb.ID); !reflect.DeepEqual(sb, full) {
			t.Errorf("ListPodObjects reports %+v, ListSandboxes %+v", sb, full)
		}
	}

	sbs, cs, err = pl.ListPodObjects(ctx, "")
	if err != nil {
		t.Fatalf("ListPodObjects(all): %v", err)
	}
	want = map[string]bool{"sb:" + sbAID: true, "c:" + a1: true, "c:" + a2: true, "sb:" + sbBID: true, "c:" + b1: true}
	if got := ids(sbs, cs); !reflect.DeepEqual(got, want) {
		t.Errorf("ListPodObjects(all) = %v, want %v", got, want)
	}

	if got := ids(sbs, cs); got["sb:"+oID] {
		t.Errorf("ListPodObjects(all) lists another node's sandbox")
	}
	if sl, ok := rt.(engine.PodSummaryLister); ok {
		ssbs, scs, err := sl.ListPodSummaries(ctx)
		if err != nil {
			t.Fatalf("ListPodSummaries: %v", err)
		}
		if got := ids(ssbs, scs); !reflect.DeepEqual(got, want) {
			t.Errorf("ListPodSummaries = %v, want %v", got, want)
		}
		summarize := func(c *engine.Container) engine.Container {
			out := *c
			out.StartedAt, out.FinishedAt, out.ExitCode, out.OOMKilled, out.Message = time.Time{}, time.Time{}, 0, false, ""
			return out
		}
		full := map[string]*engine.Container{}
		for _, c := range cs {
			full[c.ID] = c
		}
		for _, c := range scs {
			if f := full[c.ID]; f == nil || summarize(c) != summarize(f) {
				t.Errorf("ListPodSummaries reports %+v, ListPodObjects %+v", c, f)
			}
		}
		fullSB := map[string]*engine.Sandbox{}
		for _, sb := range sbs {
			fullSB[sb.ID] = sb
		}
		for _, sb := range ssbs {
			if !reflect.DeepEqual(sb, fullSB[sb.ID]) {
				t.Errorf("ListPodSummaries reports %+v, ListPodObjects %+v", sb, fullSB[sb.ID])
			}
		}
	}
	sbs, cs, err = pl.ListPodObjects(ctx, "no-such-pod-"+randHex(6))
	if err != nil || len(sbs) != 0 || len(cs) != 0 {
		t.Errorf("ListPodObjects(unknown) = %v, %v, %v; want nothing and no error", sbs, cs, err)
	}
	if opl, ok := other.(engine.PodObjectLister); ok {
		sbs, cs, err := opl.ListPodObjects(ctx, sbB.Pod.UID)
		if err != nil || len(sbs) != 0 || len(cs) != 0 {
			t.Errorf("another node lists %v, %v (%v) of this node's pod, want nothing", sbs, cs, err)
		}
	}
}

func testImages(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ctx := ctxFor(t)
	img, err := rt.ImageStatus(ctx, s.env.Image)
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", s.env.Image, err)
	}
	if img.ID == "" {
		t.Errorf("ImageStatus(%s): empty ID", s.env.Image)
	}
	if _, err := rt.ImageStatus(ctx, "podrun.invalid/no-such-image:"+randHex(6)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ImageStatus(missing) = %v, want ErrNotFound", err)
	}
}

func testLogs(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	l, ok := rt.(engine.LogReader)
	if !ok {
		t.Skip("not a LogReader")
	}
	ctx := ctxFor(t)
	sb := s.sandboxConfig("logs")
	sbID := s.runSandbox(t, rt, sb)
	id := s.create(t, rt, sbID, sb, s.containerConfig("talker", ProcessEcho))
	s.start(t, rt, id)
	s.waitContainer(t, rt, id, "exited", exited)

	var out, errOut bytes.Buffer
	if err := l.ContainerLogs(ctx, id, engine.LogOptions{Tail: -1}, &out, &errOut); err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	if out.String() != "hello\n" || errOut.Len() != 0 {
		t.Errorf("logs: stdout %q, stderr %q; want \"hello\\n\", nothing", out.String(), errOut.String())
	}
	out.Reset()
	if err := l.ContainerLogs(ctx, id, engine.LogOptions{Tail: -1, Timestamps: true}, &out, nil); err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	if ts, rest, _ := strings.Cut(out.String(), " "); rest != "hello\n" || !strings.HasPrefix(ts, "20") {
		t.Errorf("logs with timestamps: %q", out.String())
	}
	out.Reset()
	if err := l.ContainerLogs(ctx, id, engine.LogOptions{Tail: 0}, &out, nil); err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("logs with tail 0: %q, want nothing", out.String())
	}
	// Following a container that has exited returns.
	out.Reset()
	if err := l.ContainerLogs(ctx, id, engine.LogOptions{Tail: -1, Follow: true}, &out, nil); err != nil {
		t.Fatalf("ContainerLogs follow: %v", err)
	}
	if out.String() != "hello\n" {
		t.Errorf("followed logs: %q", out.String())
	}
}

func testUpdateResources(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	u, ok := rt.(engine.ResourceUpdater)
	if !ok {
		t.Skip("not a ResourceUpdater")
	}
	ctx := ctxFor(t)
	sb := s.sandboxConfig("update")
	sbID := s.runSandbox(t, rt, sb)
	cfg := s.containerConfig("app", ProcessRun)
	cfg.Resources = engine.Resources{CPUShares: 512, MemoryLimit: 64 << 20}
	id := s.create(t, rt, sbID, sb, cfg)
	s.start(t, rt, id)
	if err := u.UpdateContainerResources(ctx, id, &engine.Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 96 << 20}); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	if c := findContainer(t, rt, id); c == nil || c.State != engine.StateRunning {
		t.Errorf("after an update: %+v, want still running (in place)", c)
	}
	// What cannot change in place is an error, so that the caller replaces
	// the container: removing a memory limit.
	if err := u.UpdateContainerResources(ctx, id, &engine.Resources{CPUShares: 256}); err == nil {
		t.Errorf("removing a memory limit in place: nil error")
	}
}

func testExec(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ex, ok := rt.(engine.Execer)
	if !ok {
		t.Skip("not an Execer")
	}
	ctx := ctxFor(t)
	id := s.execTarget(t, rt, "exec")

	code, out, err := ex.Exec(ctx, id, s.env.Argv(ProcessEcho))
	if err != nil || code != 0 || string(out) != "hello\n" {
		t.Errorf("Exec(echo) = %d, %q, %v; want 0, \"hello\\n\", nil", code, out, err)
	}
	// The command gets the container's environment.
	code, _, err = ex.Exec(ctx, id, s.env.Argv(ProcessExitEnv))
	if err != nil || code != 3 {
		t.Errorf("Exec(exit $CODE) = %d, %v; want 3, nil", code, err)
	}
	if c := findContainer(t, rt, id); c == nil || c.State != engine.StateRunning {
		t.Errorf("after exec: %+v, want the container still running", c)
	}
	if _, _, err := ex.Exec(ctx, randHex(64), s.env.Argv(ProcessEcho)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Exec(missing) = %v, want ErrNotFound", err)
	}
	if err := rt.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ex.Exec(ctx, id, s.env.Argv(ProcessEcho)); err == nil {
		t.Errorf("Exec in a stopped container: nil error")
	}
}

// execTarget runs a pod of one running container, with CODE=3 in its
// environment, for the exec tests, and returns the container's ID.
func (s *suite) execTarget(t *testing.T, rt engine.Runtime, pod string) string {
	t.Helper()
	sb := s.sandboxConfig(pod)
	sbID := s.runSandbox(t, rt, sb)
	cfg := s.containerConfig("app", ProcessRun)
	cfg.Env = []engine.EnvVar{{Name: "CODE", Value: "3"}}
	id := s.create(t, rt, sbID, sb, cfg)
	s.start(t, rt, id)
	return id
}

func testExecStream(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ex, ok := rt.(engine.ExecStreamer)
	if !ok {
		t.Skip("not an ExecStreamer")
	}
	ctx := ctxFor(t)
	id := s.execTarget(t, rt, "execstream")

	run := func(p Process, stdin io.Reader) (code int, stdout, stderr string, err error) {
		var o, e bytes.Buffer
		code, err = ex.ExecStream(ctx, id, s.env.Argv(p), engine.ExecStreams{Stdin: stdin, Stdout: &o, Stderr: &e})
		return code, o.String(), e.String(), err
	}
	if code, o, e, err := run(ProcessEcho, nil); err != nil || code != 0 || o != "hello\n" || e != "" {
		t.Errorf("ExecStream(echo) = %d, stdout %q, stderr %q, %v; want 0, \"hello\\n\", \"\", nil", code, o, e, err)
	}
	if code, o, e, err := run(ProcessEchoStderr, nil); err != nil || code != 0 || o != "" || e != "oops\n" {
		t.Errorf("ExecStream(echo >&2) = %d, stdout %q, stderr %q, %v; want 0, \"\", \"oops\\n\", nil", code, o, e, err)
	}
	// stdin reaches the command, and its end ends the command.
	if code, o, _, err := run(ProcessCat, strings.NewReader("from stdin\n")); err != nil || code != 0 || o != "from stdin\n" {
		t.Errorf("ExecStream(cat) = %d, stdout %q, %v; want 0, \"from stdin\\n\", nil", code, o, err)
	}
	if code, _, _, err := run(ProcessExitEnv, nil); err != nil || code != 3 {
		t.Errorf("ExecStream(exit $CODE) = %d, %v; want 3, nil", code, err)
	}
	// On a terminal, stdout and stderr are one stream, with the
	// terminal's line endings.
	var tty bytes.Buffer
	code, err := ex.ExecStream(ctx, id, s.env.Argv(ProcessEchoStderr), engine.ExecStreams{Stdout: &tty, Stderr: io.Discard, TTY: true})
	if err != nil || code != 0 || tty.String() != "oops\r\n" {
		t.Errorf("ExecStream(echo >&2) on a terminal = %d, %q, %v; want 0, \"oops\\r\\n\", nil", code, tty.String(), err)
	}
	if _, err := ex.ExecStream(ctx, randHex(64), s.env.Argv(ProcessEcho), engine.ExecStreams{Stdout: io.Discard}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ExecStream(missing) = %v, want ErrNotFound", err)
	}
	if err := rt.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.ExecStream(ctx, id, s.env.Argv(ProcessEcho), engine.ExecStreams{Stdout: io.Discard}); err == nil {
		t.Errorf("ExecStream in a stopped container: nil error")
	}
}

// eventLog collects events from a channel.
type eventLog struct {
	mu     sync.Mutex
	evs    []engine.Event
	closed chan struct{}
}

func collect(ch <-chan engine.Event) *eventLog {
	l := &eventLog{closed: make(chan struct{})}
	go func() {
		defer close(l.closed)
		for ev := range ch {
			l.mu.Lock()
			l.evs = append(l.evs, ev)
			l.mu.Unlock()
		}
	}()
	return l
}

// wait waits for an event of id with action (and the pod's UID).
func (l *eventLog) wait(t *testing.T, timeout time.Duration, podUID, id, action string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		for _, ev := range l.evs {
			if ev.ContainerID == id && ev.Action == action {
				l.mu.Unlock()
				if ev.PodUID != podUID {
					t.Errorf("event %s of %.12s: pod UID %q, want %q", action, id, ev.PodUID, podUID)
				}
				return
			}
		}
		evs := append([]engine.Event(nil), l.evs...)
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %.12s within %s; got %+v", action, id, timeout, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testEvents(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	es, ok := rt.(engine.EventSource)
	if !ok {
		t.Skip("not an EventSource")
	}
	other, _ := s.runtime(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	log := collect(es.Events(ctx))

	sb := s.sandboxConfig("events")
	uid := sb.Pod.UID
	sbID := s.runSandbox(t, rt, sb)
	log.wait(t, s.env.Timeout, uid, sbID, "start")

	cfg := s.containerConfig("app", ProcessExitEnv)
	cfg.Env = []engine.EnvVar{{Name: "CODE", Value: "3"}}
	id := s.create(t, rt, sbID, sb, cfg)
	s.start(t, rt, id)
	log.wait(t, s.env.Timeout, uid, id, "start")
	log.wait(t, s.env.Timeout, uid, id, "die")
	// A list made after the die event shows the exit (the sync core lists
	// a pod when an event names it, and restarts what it sees exited),
	// even where the engine's own list catches up later (Docker).
	if c := findContainer(t, rt, id); c == nil || c.State != engine.StateExited || c.ExitCode != 3 {
		t.Errorf("listed after its die event: %+v, want exited with code 3", c)
	}
	if l, ok := rt.(engine.PodObjectLister); ok {
		_, cs, err := l.ListPodObjects(ctxFor(t), uid)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].State != engine.StateExited || cs[0].ExitCode != 3 {
			t.Errorf("ListPodObjects after the die event: %+v, want it exited with code 3", cs)
		}
	}
	if err := rt.RemoveContainer(ctxFor(t), id); err != nil {
		t.Fatal(err)
	}
	log.wait(t, s.env.Timeout, uid, id, "destroy")

	// Another node's objects make no event here.
	osb := s.sandboxConfig("elsewhere")
	oid := s.runSandbox(t, other, osb)
	if err := rt.StopSandbox(ctxFor(t), sbID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	log.wait(t, s.env.Timeout, uid, sbID, "die")
	log.mu.Lock()
	for _, ev := range log.evs {
		if ev.ContainerID == oid || ev.PodUID == osb.Pod.UID {
			t.Errorf("an event of another node's sandbox: %+v", ev)
		}
	}
	log.mu.Unlock()

	cancel()
	select {
	case <-log.closed:
	case <-time.After(s.env.Timeout):
		t.Fatalf("the event channel was not closed after ctx ended")
	}
}

// RunImageService runs the ImageService part of the suite alone (Run runs it
// too), for an implementation tested with an Env whose MakeImage is set.
func RunImageService(t *testing.T, newRuntime func(t *testing.T, nodeName string) engine.Runtime, env Env) {
	if env.Timeout == 0 {
		env.Timeout = 30 * time.Second
	}
	testImageService(t, &suite{env: env, newRuntime: newRuntime})
}

func testImageService(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	is, ok := rt.(engine.ImageService)
	if !ok {
		t.Skip("not an ImageService")
	}
	ctx := ctxFor(t)
	listed := func(id string) *engine.Image {
		t.Helper()
		imgs, err := is.ListImages(ctx)
		if err != nil {
			t.Fatalf("ListImages: %v", err)
		}
		var found *engine.Image
		for _, img := range imgs {
			if img.ID == id {
				if found != nil {
					t.Errorf("ListImages: %s listed twice", id)
				}
				found = img
			}
		}
		return found
	}

	// The suite's image is listed once, under the ID ImageStatus gives,
	// with its tag and when it was made.
	st, err := rt.ImageStatus(ctx, s.env.Image)
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", s.env.Image, err)
	}
	img := listed(st.ID)
	if img == nil {
		t.Fatalf("ListImages: %s (%s) is not listed", s.env.Image, st.ID)
	}
	if !slicesContains(img.RepoTags, s.env.Image) {
		t.Errorf("ListImages: %s has tags %v, want %s among them", st.ID, img.RepoTags, s.env.Image)
	}
	if img.CreatedAt.IsZero() || img.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("ListImages: %s created at %v", st.ID, img.CreatedAt)
	}

	fs, err := is.ImageFsInfo(ctx)
	if err != nil {
		t.Fatalf("ImageFsInfo: %v", err)
	}
	if fs.CapacityBytes == 0 || fs.AvailableBytes > fs.CapacityBytes || fs.Path == "" {
		t.Errorf("ImageFsInfo = %+v, want a path, a capacity and no more available than that", fs)
	}

	// A missing image is already removed.
	if err := is.RemoveImage(ctx, "podrun.invalid/no-such-image:"+randHex(6)); err != nil {
		t.Errorf("RemoveImage(missing) = %v, want nil", err)
	}

	// A sandbox and a container (created, never started) put their images
	// in use.
	sb := s.sandboxConfig("images")
	sbID := s.runSandbox(t, rt, sb)
	id := s.create(t, rt, sbID, sb, s.containerConfig("app", ProcessRun))
	inUse, err := is.ImagesInUse(ctx)
	if err != nil {
		t.Fatalf("ImagesInUse: %v", err)
	}
	infra, err := rt.ImageStatus(ctx, s.env.InfraImage)
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", s.env.InfraImage, err)
	}
	if !inUse[st.ID] || !inUse[infra.ID] {
		t.Errorf("ImagesInUse = %v, want the container's %s and the sandbox's %s", inUse, st.ID, infra.ID)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	if s.env.MakeImage == nil {
		return
	}
	// An image of two tags, used by a container of another node that is
	// not even started: it cannot be removed.
	tag := "podrun.test/gc-" + randHex(8)
	made := s.env.MakeImage(t, tag+":a", tag+":b")
	if img := listed(made); img == nil || !slicesContains(img.RepoTags, tag+":a") || !slicesContains(img.RepoTags, tag+":b") {
		t.Fatalf("ListImages: made image %s listed as %+v, want both tags", made, img)
	}
	other, _ := s.runtime(t)
	osb := s.sandboxConfig("images-other")
	osbID := s.runSandbox(t, other, osb)
	cfg := s.containerConfig("user", ProcessRun)
	cfg.Image = tag + ":b"
	user := s.create(t, other, osbID, osb, cfg)
	inUse, err = is.ImagesInUse(ctx)
	if err != nil {
		t.Fatalf("ImagesInUse: %v", err)
	}
	if !inUse[made] {
		t.Errorf("ImagesInUse: %s, used by another node's container, is missing", made)
	}
	if err := is.RemoveImage(ctx, made); !errors.Is(err, engine.ErrImageInUse) {
		t.Errorf("RemoveImage(in use) = %v, want ErrImageInUse", err)
	}
	if _, err := rt.ImageStatus(ctx, tag+":a"); err != nil {
		t.Errorf("after a refused RemoveImage: ImageStatus(%s:a) = %v", tag, err)
	}

	// Once no container uses it, it goes with all its tags.
	if err := other.RemoveContainer(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := is.RemoveImage(ctx, made); err != nil {
		t.Fatalf("RemoveImage(%s): %v", made, err)
	}
	for _, ref := range []string{tag + ":a", tag + ":b", made} {
		if _, err := rt.ImageStatus(ctx, ref); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("after RemoveImage: ImageStatus(%s) = %v, want ErrNotFound", ref, err)
		}
	}
	if img := listed(made); img != nil {
		t.Errorf("after RemoveImage: still listed: %+v", img)
	}
	// The suite's own image is untouched.
	if _, err := rt.ImageStatus(ctx, s.env.Image); err != nil {
		t.Errorf("ImageStatus(%s) = %v after removing another image", s.env.Image, err)
	}
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// testRuntimeHandlers: a runtime that lists its runtimes runs a sandbox,
// and a container in it, with each of the first two it lists; RunSandbox
// with a runtime it does not have fails, and leaves no sandbox behind.
func testRuntimeHandlers(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	lister, ok := rt.(engine.RuntimeHandlerLister)
	if !ok {
		t.Fatal("the runtime does not implement engine.RuntimeHandlerLister")
	}
	ctx := ctxFor(t)
	handlers, err := lister.RuntimeHandlers(ctx)
	if err != nil || !slices.Contains(handlers, "runc") || !slices.IsSorted(handlers) {
		t.Fatalf("RuntimeHandlers = %v, %v; want runc among them, sorted", handlers, err)
	}
	if again, err := lister.RuntimeHandlers(ctx); err != nil || !slices.Equal(again, handlers) {
		t.Errorf("RuntimeHandlers again = %v, %v; want %v", again, err, handlers)
	}
	for _, h := range handlers[:min(2, len(handlers))] {
		sb := s.sandboxConfig("rth")
		sb.Runtime = h
		sbID := s.runSandbox(t, rt, sb)
		id := s.create(t, rt, sbID, sb, s.containerConfig("app", ProcessRun))
		s.start(t, rt, id)
		s.waitContainer(t, rt, id, "running with runtime "+h, func(c *engine.Container) bool { return c.State == engine.StateRunning })
	}
	sb := s.sandboxConfig("rth-missing")
	sb.Runtime = "podrun-no-such-runtime"
	if _, err := rt.RunSandbox(ctx, sb); err == nil {
		t.Fatal("RunSandbox with a runtime the engine lacks succeeded")
	}
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range sbs {
		if got.Pod.UID == sb.Pod.UID {
			t.Errorf("the failed RunSandbox left sandbox %.12s (%s)", got.ID, got.State)
		}
	}
}
