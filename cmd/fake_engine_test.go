package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/node"
)

// The commands' logic run against the in-memory engine: no dockerd.

// fakeEngine is enginetest.Fake with what the commands need of Docker
// besides the runtime contract.
type fakeEngine struct {
	*enginetest.Fake
	// infraErr, when set, is what EnsureInfraImage returns.
	infraErr error
	closed   atomic.Int32
}

func (e *fakeEngine) Close() error {
	e.closed.Add(1)
	return nil
}

func (e *fakeEngine) EnsureInfraImage(_ context.Context, ref, _ string) (string, error) {
	if e.infraErr != nil {
		return "", e.infraErr
	}
	e.AddImage(ref)
	return ref, nil
}

func (e *fakeEngine) DataRoot(context.Context) (string, error) { return "/fake/docker", nil }

// CgroupDriver is none podrun makes pod cgroups under: a test of the fake
// engine never touches the host's cgroups.
func (e *fakeEngine) CgroupDriver(context.Context) (string, error) { return "fake", nil }

func (e *fakeEngine) RuntimeVersion(context.Context) (string, error) { return "fake://1.0", nil }

// testHost is the machine the tests' pods are told of.
var testHost = node.Host{IP: "10.0.0.9", MilliCPU: 2000, MemoryBytes: 1 << 30}

// cmdEnv is one test's podrun: its fake engine, streams, log and options.
type cmdEnv struct {
	t      *testing.T
	fake   *enginetest.Fake
	eng    *fakeEngine
	dir    string // for manifests
	out    *bytes.Buffer
	errOut *bytes.Buffer
	log    *logRecorder
	g      *globalOptions
	// connects counts the Engine calls; down, when set, makes them fail as
	// an unreachable engine does.
	connects atomic.Int32
	down     bool
}

func newCmdEnv(t *testing.T) *cmdEnv {
	t.Helper()
	fake := enginetest.NewFake("node1")
	fake.AddImage("img:1")
	e := &cmdEnv{t: t, fake: fake, eng: &fakeEngine{Fake: fake}, dir: t.TempDir(),
		out: &bytes.Buffer{}, errOut: &bytes.Buffer{}, log: &logRecorder{}}
	e.g = &globalOptions{
		NodeName: "node1", RootDir: t.TempDir(), InfraImage: "pause:1",
		In: strings.NewReader(""), Out: e.out, ErrOut: e.errOut, Log: slog.New(e.log),
		Clock: clock.RealClock{}, Host: func() node.Host { return testHost },
	}
	return e
}

// engine is the env's Engine dependency, for any command's interface.
func engineOf[E any](e *cmdEnv) func(context.Context) (E, error) {
	return func(context.Context) (E, error) {
		e.connects.Add(1)
		var none E
		if e.down {
			return none, unreachable(errors.New("cannot reach the Docker Engine: connection refused"))
		}
		return any(e.eng).(E), nil
	}
}

func (e *cmdEnv) write(name, data string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *cmdEnv) reset() {
	e.out.Reset()
	e.errOut.Reset()
}

// once runs onceRun as `podrun once args...` would, with the fake engine.
func (e *cmdEnv) once(args ...string) error {
	e.t.Helper()
	var opts *onceOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newOnceCmd(g, func(_ context.Context, o *onceOptions) error { opts = o; return nil })
	}, append([]string{"once"}, args...)...)
	opts.Engine = engineOf[podEngine](e)
	return onceRun(context.Background(), opts)
}

// parse runs a command's flag parsing into the env's options.
func (e *cmdEnv) parse(build func(*globalOptions) *cobra.Command, args ...string) {
	e.t.Helper()
	if err := parseWith(e.g, build, args...); err != nil {
		e.t.Fatalf("%v: %v", args, err)
	}
}

// containers returns the env's containers of pod (its name), running or not.
func (e *cmdEnv) containers(pod string) []*engine.Container {
	e.t.Helper()
	all, err := e.fake.ListContainers(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*engine.Container
	for _, c := range all {
		if c.Pod.Name == pod {
			out = append(out, c)
		}
	}
	return out
}

func (e *cmdEnv) running(pod string) *engine.Container {
	for _, c := range e.containers(pod) {
		if c.State == engine.StateRunning {
			return c
		}
	}
	return nil
}

func (e *cmdEnv) sandboxes() int {
	e.t.Helper()
	sbs, err := e.fake.ListSandboxes(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return len(sbs)
}

// env returns a container's environment as a map.
func (e *cmdEnv) env(c *engine.Container) map[string]string {
	out := map[string]string{}
	for _, v := range e.fake.ContainerConfig(c.ID).Env {
		out[v.Name] = v.Value
	}
	return out
}

// eventually waits (up to 10 s) until ok holds.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantExit(t *testing.T, what string, err error, code int, contains ...string) {
	t.Helper()
	if got := exitCode(err); got != code {
		t.Fatalf("%s: exit %d (%v), want %d", what, got, err, code)
	}
	for _, s := range contains {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %v does not say %q", what, err, s)
		}
	}
}

// logRecorder is a slog.Handler that keeps the records, for tests to read.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
	attrs   []slog.Attr // of a WithAttrs view
	parent  *logRecorder
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logRecorder) root() *logRecorder {
	if h.parent != nil {
		return h.parent
	}
	return h
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	root := h.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	root.records = append(root.records, rec)
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{parent: h.root(), attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the records with message msg.
func (h *logRecorder) find(msg string) []logRecord {
	root := h.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []logRecord
	for _, r := range root.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

func (h *logRecorder) String() string {
	root := h.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var b strings.Builder
	for _, r := range root.records {
		fmt.Fprintf(&b, "%s %s %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}
