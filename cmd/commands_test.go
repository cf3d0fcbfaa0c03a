package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/source"
)

// webPod runs until stopped and reads the host's facts from its env.
func webPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: img:1
    env:
    - name: HOST_IP
      valueFrom: {fieldRef: {fieldPath: status.hostIP}}
    - name: MEMORY
      valueFrom: {resourceFieldRef: {resource: limits.memory}}
`, name)
}

// jobPod runs a fake script once (enginetest.FakeScript).
func jobPod(name string, script ...string) string {
	var quoted []string
	for _, w := range append([]string{enginetest.FakeScript}, script...) {
		quoted = append(quoted, strconv.Quote(w))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  containers:
  - name: job
    image: img:1
    command: [%s]
`, name, strings.Join(quoted, ", "))
}

func privilegedPod(name string) string {
	return webPod(name) + "    securityContext: {privileged: true}\n"
}

func TestOnceRunStartsPodsOnTheEngine(t *testing.T) {
	e := newCmdEnv(t)
	p := e.write("web.yaml", webPod("web"))
	if err := e.once(p, "--timeout", "10s"); err != nil {
		t.Fatalf("once: %v\nlog:\n%s", err, e.log)
	}
	c := e.running("web-node1")
	if c == nil {
		t.Fatal("the pod's container does not run")
	}
	if !strings.Contains(e.out.String(), "web-node1") || !strings.Contains(e.out.String(), "Running") {
		t.Errorf("report:\n%s", e.out)
	}
	// The host's facts are the options' (Host), not the machine's.
	if env := e.env(c); env["HOST_IP"] != testHost.IP || env["MEMORY"] != fmt.Sprint(testHost.MemoryBytes) {
		t.Errorf("env = %v, want the host facts of %+v", env, testHost)
	}
	if e.eng.closed.Load() != 1 {
		t.Errorf("engine closed %d times", e.eng.closed.Load())
	}

	// Again on the same manifest: adopted, nothing made.
	creates := e.fake.Calls("CreateContainer") + e.fake.Calls("RunSandbox")
	e.reset()
	if err := e.once(p, "--timeout", "10s"); err != nil {
		t.Fatalf("once again: %v", err)
	}
	if now := e.fake.Calls("CreateContainer") + e.fake.Calls("RunSandbox"); now != creates {
		t.Errorf("once again made %d objects", now-creates)
	}
}

func TestOnceRunExitCodes(t *testing.T) {
	unavailable := fmt.Errorf("pull pause:1: %w", engine.ErrUnavailable)
	cases := []struct {
		name     string
		manifest string
		args     []string
		setup    func(*cmdEnv)
		code     int
		says     []string
		// started: whether anything was started on the engine.
		started bool
	}{
		{name: "job succeeded", manifest: jobPod("job", "exit", "0"), args: []string{"--wait", "complete"},
			code: exitOK, started: true},
		{name: "job failed", manifest: jobPod("job", "exit", "3"), args: []string{"--wait", "complete"},
			code: exitPodFailed, says: []string{"pods failed: [default/job-node1]"}, started: true},
		{name: "timed out", manifest: strings.Replace(webPod("web"), "img:1", "missing:1", 1), args: []string{"--timeout", "300ms"},
			setup: func(e *cmdEnv) { e.fake.SetPullError("missing:1", errors.New("no such image")) },
			code:  exitPodFailed, says: []string{"timed out after 300ms waiting for pods to be running"}, started: true},
		{name: "invalid manifest", manifest: webPod("web") + "    bogus: 1\n", setup: func(e *cmdEnv) { e.g.Strict = true },
			code: exitBadInput, says: []string{"web.yaml:15: spec.containers[0].bogus: unknown field"}},
		{name: "privileged refused", manifest: privilegedPod("web"),
			code: exitBadInput, says: []string{"web.yaml:15: spec.containers[0].securityContext.privileged: container app is privileged; pass --allow-privileged"}},
		{name: "privileged allowed", manifest: privilegedPod("web"), args: []string{"--allow-privileged", "--timeout", "10s"},
			code: exitOK, started: true},
		{name: "no pods", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n", code: exitOK},
		{name: "engine unreachable", manifest: webPod("web"), setup: func(e *cmdEnv) { e.down = true },
			code: exitUnreachable, says: []string{"cannot reach the Docker Engine"}},
		{name: "invalid manifest, engine unreachable", manifest: webPod("web") + "    bogus: 1\n",
			setup: func(e *cmdEnv) { e.g.Strict = true; e.down = true },
			code:  exitBadInput, says: []string{"web.yaml:15: spec.containers[0].bogus: unknown field"}},
		{name: "engine gone while ensuring the infra image", manifest: webPod("web"),
			setup: func(e *cmdEnv) { e.eng.infraErr = unavailable },
			code:  exitUnreachable, says: []string{"runtime unavailable"}},
		{name: "infra image fails", manifest: webPod("web"),
			setup: func(e *cmdEnv) { e.eng.infraErr = errors.New("no space left on device") },
			code:  exitPodFailed, says: []string{"infra image: no space left on device"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newCmdEnv(t)
			if c.setup != nil {
				c.setup(e)
			}
			p := e.write("web.yaml", c.manifest)
			err := e.once(append([]string{p}, c.args...)...)
			wantExit(t, "once", err, c.code, c.says...)
			// The engine is reached while the manifests are read; one
			// reached is closed whatever the outcome.
			if reached, closed := e.connects.Load(), e.eng.closed.Load(); !e.down && closed != reached {
				t.Errorf("engine reached %d times, closed %d", reached, closed)
			}
			if started := e.sandboxes() > 0; started != c.started {
				t.Errorf("started: %v, want %v", started, c.started)
			}
		})
	}
}

// watch runs watchRun with args until stop says so, then cancels it
// and returns its error.
func (e *cmdEnv) watch(args []string, until func() bool) error {
	e.t.Helper()
	return e.watchWith(engineOf[watchEngine](e), args, until)
}

// watchWith is watch with an engine of the test's.
func (e *cmdEnv) watchWith(eng func(context.Context) (watchEngine, error), args []string, until func() bool) error {
	e.t.Helper()
	var opts *watchOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newWatchCmd(g, func(_ context.Context, o *watchOptions) error { opts = o; return nil })
	}, append([]string{"watch", "--healthz-port", "0"}, args...)...)
	opts.Engine = eng
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- watchRun(ctx, opts) }()
	deadline := time.After(10 * time.Second)
	for !until() {
		select {
		case err := <-errc:
			return err
		case <-deadline:
			cancel()
			<-errc
			e.t.Fatalf("watch: timed out waiting for its pods\nlog:\n%s", e.log)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	return <-errc
}

func TestWatchRunKeepsPodsUp(t *testing.T) {
	e := newCmdEnv(t)
	e.write("web.yaml", webPod("web"))
	e.write("priv.yaml", privilegedPod("priv"))
	err := e.watch([]string{"--path", e.dir}, func() bool { return e.running("web-node1") != nil })
	wantExit(t, "watch", err, exitOK)
	// Pods keep running when podrun exits.
	if e.running("web-node1") == nil {
		t.Error("the pod stopped with podrun")
	}
	// The privileged pod is refused, with a logged error, and not started.
	if len(e.containers("priv-node1")) != 0 {
		t.Error("a privileged pod was started without --allow-privileged")
	}
	refused := e.log.find("pod refused")
	if len(refused) != 1 || !strings.Contains(refused[0].attrs["err"], "pod default/priv-node1: container app is privileged") {
		t.Errorf("refusals logged: %+v", refused)
	}
	if e.eng.closed.Load() != 1 {
		t.Errorf("engine closed %d times", e.eng.closed.Load())
	}

	// --stop-pods-on-exit: gone when watch returns.
	e = newCmdEnv(t)
	e.write("web.yaml", webPod("web"))
	err = e.watch([]string{"--path", e.dir, "--stop-pods-on-exit"}, func() bool { return e.running("web-node1") != nil })
	wantExit(t, "watch --stop-pods-on-exit", err, exitOK)
	if n := len(e.containers("web-node1")); n != 0 || e.sandboxes() != 0 {
		t.Errorf("after --stop-pods-on-exit: %d containers, %d sandboxes", n, e.sandboxes())
	}
}

func TestWatchRunExitCodes(t *testing.T) {
	never := func() bool { return false }
	t.Run("bad input", func(t *testing.T) {
		e := newCmdEnv(t)
		e.g.URLHeaders = []string{"no colon"}
		err := e.watch([]string{"--url", "http://127.0.0.1:1/pods.yaml"}, never)
		wantExit(t, "watch", err, exitBadInput, "manifest URL header")
		if e.connects.Load() != 0 {
			t.Error("the engine was asked for")
		}
	})
	t.Run("engine unreachable", func(t *testing.T) {
		e := newCmdEnv(t)
		e.down = true
		wantExit(t, "watch", e.watch([]string{"--path", e.dir}, never), exitUnreachable, "cannot reach")
	})
	t.Run("infra image fails", func(t *testing.T) {
		e := newCmdEnv(t)
		e.eng.infraErr = errors.New("build failed")
		wantExit(t, "watch", e.watch([]string{"--path", e.dir}, never), exitPodFailed, "infra image: build failed")
	})
}

// runDown runs downRun as `podrun down args...` would, with the fake engine.
func (e *cmdEnv) runDown(args ...string) error {
	e.t.Helper()
	var opts *downOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newDownCmd(g, func(_ context.Context, o *downOptions) error { opts = o; return nil })
	}, append([]string{"down"}, args...)...)
	opts.Engine = engineOf[baseEngine](e)
	return downRun(context.Background(), opts)
}

// TestEmptyFileWarnedByOnceAndDown: a file that holds no document is a
// warning naming it for once and down as for validate (the README's
// promise), also when it is all once or down is given: "the manifests
// define no pods" alone does not say which file was empty.
func TestEmptyFileWarnedByOnceAndDown(t *testing.T) {
	e := newCmdEnv(t)
	empty := e.write("empty.yaml", "# to do\n")
	warning := "warning: " + empty + ": empty: no YAML or JSON document (blank, or only comments), so it defines nothing\n"
	wantExit(t, "once of an empty file", e.once(empty), exitOK)
	if !strings.Contains(e.errOut.String(), warning) {
		t.Errorf("once of an empty file: stderr %q, want %q", e.errOut, warning)
	}
	e.reset()
	wantExit(t, "down of an empty file", e.runDown(empty), exitOK)
	if !strings.Contains(e.errOut.String(), warning) {
		t.Errorf("down of an empty file: stderr %q, want %q", e.errOut, warning)
	}
}

func TestDownRun(t *testing.T) {
	down := (*cmdEnv).runDown
	e := newCmdEnv(t)
	web, db := e.write("web.yaml", webPod("web")), e.write("db.yaml", webPod("db"))
	if err := e.once(web, db, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	e.reset()
	wantExit(t, "down web.yaml", down(e, web), exitOK)
	if e.out.String() != "pod default/web-node1 removed\n" || len(e.containers("web-node1")) != 0 || e.running("db-node1") == nil {
		t.Fatalf("down web.yaml: %q; web containers %d", e.out, len(e.containers("web-node1")))
	}
	e.reset()
	wantExit(t, "down --all", down(e, "--all"), exitOK)
	if e.out.String() != "pod default/db-node1 removed\n" || e.sandboxes() != 0 {
		t.Fatalf("down --all: %q; %d sandboxes left", e.out, e.sandboxes())
	}

	// A ConfigMap defined twice does not matter to down; a pod does, as to once.
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"
	a, b := e.write("a.yaml", cm), e.write("b.yaml", cm)
	wantExit(t, "down of a ConfigMap defined twice", down(e, a, b), exitOK)
	web2 := e.write("web2.yaml", webPod("web"))
	connects := e.connects.Load()
	wantExit(t, "down of a pod defined twice", down(e, web, web2), exitBadInput,
		"pod default/web conflicts with the one defined at "+web+":4 (source "+web+" comes first)")
	wantExit(t, "down of an invalid manifest", down(e, e.write("bad.yaml", "kind: [\n")), exitBadInput, "bad.yaml")
	if e.connects.Load() != connects {
		t.Error("down of bad input asked for the engine")
	}

	if err := e.once(web, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	e.fake.FailNext("ListPodSummaries", enginetest.ErrInjected)
	wantExit(t, "down with a failing engine", down(e, web), exitPodFailed, "remove default/web-node1: injected failure")
	e.down = true
	wantExit(t, "down with the engine unreachable", down(e, web), exitUnreachable)
}

// TestRootDirOfOneNodeName: once records its node name in a new root dir;
// once, watch, down and plan refuse a root dir another node name recorded,
// as bad input, before anything is started or removed.
func TestRootDirOfOneNodeName(t *testing.T) {
	t.Run("first use records", func(t *testing.T) {
		e := newCmdEnv(t)
		e.g.RootDir = filepath.Join(e.g.RootDir, "new")
		wantExit(t, "once", e.once(e.write("web.yaml", webPod("web")), "--timeout", "10s"), exitOK)
		if b, err := os.ReadFile(filepath.Join(e.g.RootDir, "node-name")); err != nil || string(b) != "node1\n" {
			t.Errorf("record %q (%v), want %q", b, err, "node1\n")
		}
	})
	t.Run("another node's refused", func(t *testing.T) {
		e := newCmdEnv(t)
		record := filepath.Join(e.g.RootDir, "node-name")
		other := filepath.Join(e.g.RootDir, "pods", "uid-of-other", "volumes", "kubernetes.io~empty-dir", "data", "f")
		for p, data := range map[string]string{record: "other\n", other: "kept"} {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		web := e.write("web.yaml", webPod("web"))
		says := []string{"root dir " + e.g.RootDir + ` belongs to node "other", not "node1"`, "--root-dir of its own", "--node-name other"}
		never := func() bool { return false }
		for what, err := range map[string]func() error{
			"once":       func() error { return e.once(web, "--timeout", "10s") },
			"watch":      func() error { return e.watch([]string{"--path", e.dir}, never) },
			"down":       func() error { return e.runDown(web) },
			"down --all": func() error { return e.runDown("--all") },
			"plan":       func() error { return e.plan(web) },
		} {
			wantExit(t, what, err(), exitBadInput, says...)
		}
		if n := e.sandboxes(); n != 0 {
			t.Errorf("%d sandboxes started", n)
		}
		for p, want := range map[string]string{record: "other\n", other: "kept"} {
			if b, err := os.ReadFile(p); err != nil || string(b) != want {
				t.Errorf("%s: %q (%v), want %q", p, b, err, want)
			}
		}
	})
}

// runPs runs psRun as `podrun ps --daemon=false args...` would: from the
// fake engine.
func (e *cmdEnv) runPs(args ...string) error {
	e.t.Helper()
	var opts *psOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newPsCmd(g, func(_ context.Context, o *psOptions) error { opts = o; return nil })
	}, append([]string{"ps", "--daemon=false"}, args...)...)
	opts.Engine = engineOf[baseEngine](e)
	return psRun(context.Background(), opts)
}

// TestPsFromTheRuntimeOfAFinishedJob: read from the engine, where the
// restart policy is not known, a pod that ran to completion (its sandbox
// stopped, its container exited 0) is Succeeded, not Failed, and no
// restart policy is made up for it.
func TestPsFromTheRuntimeOfAFinishedJob(t *testing.T) {
	e := newCmdEnv(t)
	// One at a time: a failed pod ends the wait of the others.
	if err := e.once(e.write("job.yaml", jobPod("job", "echo", "hello")), "--wait", "complete", "--timeout", "10s"); err != nil {
		t.Fatalf("once: %v\nlog:\n%s", err, e.log)
	}
	if err := e.once(e.write("fail.yaml", jobPod("fail", "exit", "3")), "--wait", "complete", "--timeout", "10s"); exitCode(err) != exitPodFailed {
		t.Fatalf("once: %v\nlog:\n%s", err, e.log)
	}
	e.reset()
	wantExit(t, "ps -o json", e.runPs("-o", "json"), exitOK)
	var list v1.PodList
	if err := json.Unmarshal(e.out.Bytes(), &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("ps -o json: %v\n%s", err, e.out)
	}
	for i, want := range []v1.PodPhase{v1.PodFailed, v1.PodSucceeded} {
		p := list.Items[i]
		if p.Status.Phase != want || p.Spec.RestartPolicy != "" {
			t.Errorf("%s: phase %s, restartPolicy %q; want %s and none", p.Name, p.Status.Phase, p.Spec.RestartPolicy, want)
		}
	}
}

func TestPsRun(t *testing.T) {
	ps := (*cmdEnv).runPs
	e := newCmdEnv(t)
	t0 := time.Now().Truncate(time.Second)
	e.fake.SetClock(func() time.Time { return t0 })
	if err := e.once(e.write("web.yaml", webPod("web")), "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	e.g.Clock = testingclock.NewFakeClock(t0.Add(90 * time.Second))

	e.reset()
	wantExit(t, "ps", ps(e), exitOK)
	lines := strings.Split(strings.TrimSpace(e.out.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "default web-node1 1/1 Running 0 90s" {
		t.Errorf("ps:\n%s", e.out)
	}
	// A manifest's dropped fields are listed under the wide table.
	var buf bytes.Buffer
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1", Annotations: map[string]string{
		source.AnnotationManifestWarnings: "web.yaml:15: spec.containers[0].bogus: unknown field, ignored"}}}
	if err := writePodTable(&buf, []*v1.Pod{pod}, true, t0); err != nil {
		t.Fatal(err)
	}
	if want := "default/web-node1: warning: web.yaml:15: spec.containers[0].bogus: unknown field, ignored\n"; !strings.HasSuffix(buf.String(), want) {
		t.Errorf("ps -o wide:\n%s\nwant it to end with %q", buf.String(), want)
	}

	e.reset()
	wantExit(t, "ps -n other", ps(e, "-n", "other"), exitOK)
	if strings.Count(e.out.String(), "\n") != 1 {
		t.Errorf("ps -n other:\n%s", e.out)
	}
	e.reset()
	wantExit(t, "ps -o json", ps(e, "-o", "json"), exitOK)
	var list v1.PodList
	if err := json.Unmarshal(e.out.Bytes(), &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "web-node1" {
		t.Errorf("ps -o json: %v\n%s", err, e.out)
	} else if list.Items[0].Spec.NodeName != "node1" {
		t.Errorf("ps -o json from the runtime: spec.nodeName %q, want the node's, as the daemon's pods have it", list.Items[0].Spec.NodeName)
	}
	if err := parseWith(e.g, func(g *globalOptions) *cobra.Command { return newPsCmd(g, nil) }, "ps", "-o", "xml"); exitCode(err) != exitBadInput {
		t.Errorf("ps -o xml: %v", err)
	}
	e.fake.FailNext("ListSandboxes", enginetest.ErrInjected)
	wantExit(t, "ps with a failing engine", ps(e), exitPodFailed, "list pods: injected failure")
	e.down = true
	wantExit(t, "ps with the engine unreachable", ps(e), exitUnreachable)
}

func TestLogsRun(t *testing.T) {
	logs := func(e *cmdEnv, args ...string) error { return e.logs(nil, args...) }
	e := newCmdEnv(t)
	if err := e.once(e.write("job.yaml", jobPod("job", "echo", "hello")), "--wait", "complete", "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"job", "job-node1"} {
		e.reset()
		wantExit(t, "logs "+name, logs(e, name), exitOK)
		if e.out.String() != "hello\n" {
			t.Errorf("logs %s: %q", name, e.out)
		}
	}
	wantExit(t, "logs of no pod", logs(e, "nope"), exitBadInput, "no pod default/nope on node node1")
	wantExit(t, "logs of no container", logs(e, "job", "-c", "x"), exitBadInput, `pod job has no container "x"; it has: job`)
	if err := parseWith(e.g, func(g *globalOptions) *cobra.Command { return newLogsCmd(g, nil) }, "logs", "job", "-f", "-p"); exitCode(err) != exitBadInput {
		t.Errorf("logs -f -p: %v", err)
	}
	e.fake.FailNext("ListContainers", enginetest.ErrInjected)
	wantExit(t, "logs with a failing engine", logs(e, "job"), exitPodFailed, "list containers: injected failure")
	e.down = true
	wantExit(t, "logs with the engine unreachable", logs(e, "job"), exitUnreachable)
}

// TestLogsOfTheOneAppContainer: a pod with one app container and an init
// container (the bundled web example) needs no -c, as with kubectl; a pod
// with two app containers still does.
func TestLogsOfTheOneAppContainer(t *testing.T) {
	e := newCmdEnv(t)
	script := func(words ...string) string {
		var quoted []string
		for _, w := range append([]string{enginetest.FakeScript}, words...) {
			quoted = append(quoted, strconv.Quote(w))
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  restartPolicy: Never
  initContainers:
  - {name: render, image: img:1, command: ` + script("echo", "rendered") + `}
  containers:
  - {name: httpd, image: img:1, command: ` + script("echo", "served") + `}
`
	two := strings.Replace(pod, "  initContainers:\n", "  containers:\n", 1)
	two = strings.Replace(two, "  containers:\n  - {name: httpd", "  - {name: httpd", 1)
	if err := e.once(e.write("web.yaml", pod), e.write("two.yaml", strings.Replace(two, "name: web", "name: two", 1)),
		"--wait", "complete", "--timeout", "10s"); err != nil {
		t.Fatalf("once: %v\nlog:\n%s", err, e.log)
	}
	e.reset()
	logs := func(args ...string) error { return e.logs(nil, args...) }
	wantExit(t, "logs web", logs("web"), exitOK)
	if e.out.String() != "served\n" {
		t.Errorf("logs web: %q, want the app container's", e.out)
	}
	e.reset()
	wantExit(t, "logs web -c render", logs("web", "-c", "render"), exitOK)
	if e.out.String() != "rendered\n" {
		t.Errorf("logs web -c render: %q", e.out)
	}
	wantExit(t, "logs of two app containers", logs("two"), exitBadInput, "pod two has several containers; choose one with -c: httpd, render")
}

// twoStreams is a logEngine whose one container wrote a line to stdout,
// then one to stderr.
type twoStreams struct{ logEngine }

func (twoStreams) ListContainers(context.Context) ([]*engine.Container, error) {
	return []*engine.Container{{ID: "c1", Name: "app", Type: engine.ContainerTypeApp,
		Pod: engine.PodRef{Namespace: "default", Name: "web-node1"}}}, nil
}

func (twoStreams) ContainerLogs(_ context.Context, _ string, _ engine.LogOptions, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "to stdout")
	fmt.Fprintln(stderr, "to stderr")
	return nil
}

func (twoStreams) Close() error { return nil }

// TestLogsPrintsBothStreamsToStdout: as kubectl logs, a container's stdout
// and stderr both go to standard output, in order, so that a pipe sees
// them all (busybox httpd -v, the web example, logs on stderr).
func TestLogsPrintsBothStreamsToStdout(t *testing.T) {
	e := newCmdEnv(t)
	var opts *logsOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newLogsCmd(g, func(_ context.Context, o *logsOptions) error { opts = o; return nil })
	}, "logs", "web")
	opts.Engine = func(context.Context) (logEngine, error) { return twoStreams{}, nil }
	wantExit(t, "logs web", logsRun(context.Background(), opts), exitOK)
	if e.out.String() != "to stdout\nto stderr\n" || e.errOut.Len() != 0 {
		t.Errorf("logs web: stdout %q, stderr %q; want both lines on stdout", e.out, e.errOut)
	}
}

// TestConflictReportedAlikeByOnceAndWatch: a ConfigMap defined in two
// arguments of once, or two --path of watch, is the same conflict, in the
// same words, with the same winner (the first). watch runs the pod with
// the first definition and logs the conflict; once refuses it as bad
// input before starting anything, as it refuses any manifest problem, and
// validate says the same.
func TestConflictReportedAlikeByOnceAndWatch(t *testing.T) {
	e := newCmdEnv(t)
	cm := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  k: " + value + "\n"
	}
	a := e.write("a.yaml", cm("from-a")+`---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: img:1
    env:
    - name: K
      valueFrom: {configMapKeyRef: {name: cfg, key: k}}
`)
	b := e.write("b.yaml", "# the same ConfigMap, later\n"+cm("from-b"))
	want := b + ":5: metadata.name: ConfigMap default/cfg conflicts with the one defined at " + a +
		":4 (source " + a + " comes first); the first one is kept"

	onceErr := e.once(a, b, "--timeout", "10s")
	wantExit(t, "once", onceErr, exitBadInput)
	if onceErr.Error() != want {
		t.Errorf("once says:\n%v\nwant:\n%s", onceErr, want)
	}
	if e.sandboxes() != 0 {
		t.Error("once started something")
	}
	var vopts *validateOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newValidateCmd(g, func(_ context.Context, o *validateOptions) error { vopts = o; return nil })
	}, "validate", a, b)
	if err := validateRun(context.Background(), vopts); exitCode(err) != exitBadInput || err.Error() != want {
		t.Errorf("validate says: %v", err)
	}

	logged := func() []logRecord { return e.log.find("manifest conflict") }
	err := e.watch([]string{"--path", a, "--path", b}, func() bool { return e.running("web-node1") != nil && len(logged()) > 0 })
	wantExit(t, "watch", err, exitOK)
	if got := logged(); len(got) != 1 || got[0].attrs["error"] != want || got[0].attrs["source"] != b || got[0].level != slog.LevelWarn {
		t.Errorf("watch logged %+v\nwant error=%s", got, want)
	}
	if k := e.env(e.running("web-node1"))["K"]; k != "from-a" {
		t.Errorf("the pod got k=%s, want the first definition's", k)
	}
}

// --node-ip is the pods' hostIP, as the kubelet's flag: the node's address
// in the cluster, not the host's first interface.
func TestWatchNodeIPIsPodsHostIP(t *testing.T) {
	e := newCmdEnv(t)
	e.write("web.yaml", webPod("web"))
	err := e.watch([]string{"--path", e.dir, "--node-ip", "198.18.0.7"}, func() bool { return e.running("web-node1") != nil })
	wantExit(t, "watch", err, exitOK)
	if got := e.env(e.running("web-node1"))["HOST_IP"]; got != "198.18.0.7" {
		t.Errorf("HOST_IP %q, want --node-ip", got)
	}
}

// TestOnceReportsDroppedFields: without --strict an unknown field is dropped,
// as the kubelet drops it; the pod runs and once's report says what was
// dropped, where.
func TestOnceReportsDroppedFields(t *testing.T) {
	e := newCmdEnv(t)
	p := e.write("web.yaml", webPod("web")+"    bogus: 1\n")
	wantExit(t, "once", e.once(p, "--timeout", "10s"), exitOK)
	if want := "warning: " + p + ":15: spec.containers[0].bogus: unknown field, ignored\n"; !strings.Contains(e.out.String(), want) {
		t.Errorf("report:\n%s\nwant it to end with %q", e.out.String(), want)
	}
	if e.sandboxes() != 1 {
		t.Errorf("sandboxes = %d, want the pod running", e.sandboxes())
	}
}

// TestOnceEndsOnDeadlineExceeded: `once --wait complete` (or ready) on a
// pod that would run for ever but has activeDeadlineSeconds ends when the
// deadline fails the pod: exit 1, the report saying why, its container
// stopped and shown terminated (once waits for the stop).
func TestOnceEndsOnDeadlineExceeded(t *testing.T) {
	for _, wait := range []string{"complete", "ready"} {
		t.Run(wait, func(t *testing.T) {
			e := newCmdEnv(t)
			manifest := strings.Replace(jobPod("job", "run"), "spec:\n", "spec:\n  activeDeadlineSeconds: 1\n", 1)
			// Never ready: only the deadline ends a wait for ready.
			manifest += "    readinessProbe: {exec: {command: [fake, exit, \"1\"]}, periodSeconds: 1}\n"
			p := e.write("job.yaml", manifest)
			err := e.once(p, "--wait", wait, "--timeout", "1m", "-o", "json")
			wantExit(t, "once", err, exitPodFailed, "pods failed: [default/job-node1]")
			for _, want := range []string{`"phase": "Failed"`, `"reason": "DeadlineExceeded"`,
				`"message": "Pod was active on the node longer than the specified deadline"`, `"terminated"`} {
				if !strings.Contains(e.out.String(), want) {
					t.Errorf("report lacks %s:\n%s", want, e.out)
				}
			}
			if strings.Contains(e.out.String(), `"running": {`) {
				t.Errorf("report shows a container running:\n%s", e.out)
			}
			for _, c := range e.containers("job-node1") {
				if c.State == engine.StateRunning {
					t.Errorf("container %s still runs", c.Name)
				}
			}
		})
	}
}

// TestOnceOOMScoreAdj: where podrun may not lower oom_score_adj (the
// probe, made once per podrun, says so), a Guaranteed pod still starts,
// its container and sandbox at podrun's own score; the warning is said
// once; the report shows the pod's QoS class.
func TestOnceOOMScoreAdj(t *testing.T) {
	e := newCmdEnv(t)
	probes := 0
	e.g.OOM = probeOOMOnce(func() *slog.Logger { return e.g.Log }, func() node.OOMProtection {
		probes++
		return node.OOMProtection{Own: 7, Reason: "cannot lower oom_score_adj below its own 7 (no CAP_SYS_RESOURCE)"}
	})
	p := e.write("etcd.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: etcd
spec:
  priorityClassName: system-node-critical
  containers:
  - name: etcd
    image: img:1
    command: [sleep]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
`)
	for range 2 {
		e.reset()
		if err := e.once(p, "--timeout", "10s", "-o", "json"); err != nil {
			t.Fatalf("once: %v\nlog:\n%s", err, e.log)
		}
		if !strings.Contains(e.out.String(), `"qosClass": "Guaranteed"`) {
			t.Errorf("report lacks the QoS class:\n%s", e.out)
		}
	}
	c := e.running("etcd-node1")
	if c == nil {
		t.Fatal("the pod's container does not run")
	}
	if got := e.fake.ContainerConfig(c.ID).OOMScoreAdj; got != 7 {
		t.Errorf("container oom_score_adj %d, want podrun's own 7", got)
	}
	if got := e.fake.SandboxConfig(c.SandboxID).OOMScoreAdj; got != 7 {
		t.Errorf("sandbox oom_score_adj %d, want podrun's own 7", got)
	}
	if probes != 1 {
		t.Errorf("probed %d times, want once", probes)
	}
	var warned int
	for _, r := range e.log.root().records {
		if r.level == slog.LevelWarn && strings.Contains(r.msg, "may not lower oom_score_adj") {
			warned++
			if r.attrs["floor"] != "7" || !strings.Contains(r.attrs["reason"], "CAP_SYS_RESOURCE") {
				t.Errorf("warning attrs %v", r.attrs)
			}
		}
	}
	if warned != 1 {
		t.Errorf("warned %d times, want once:\n%s", warned, e.log)
	}
}

// onceWith runs onceRun as `podrun once args...` would, reaching the
// engine with engine.
func (e *cmdEnv) onceWith(engine func(context.Context) (podEngine, error), args ...string) error {
	e.t.Helper()
	var opts *onceOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newOnceCmd(g, func(_ context.Context, o *onceOptions) error { opts = o; return nil })
	}, append([]string{"once"}, args...)...)
	opts.Engine = engine
	return onceRun(context.Background(), opts)
}

// cgroupDriverAsked is the env's fake engine that says when its cgroup
// driver (docker info) is first asked.
type cgroupDriverAsked struct {
	*fakeEngine
	asked chan struct{}
	once  sync.Once
}

func (e *cgroupDriverAsked) CgroupDriver(ctx context.Context) (string, error) {
	e.once.Do(func() { close(e.asked) })
	return e.fakeEngine.CgroupDriver(ctx)
}

// TestOnceReachesTheEngineWhileReading: the engine is reached, and asked
// docker info, while the manifests are still being read (here standard
// input, not yet written): the two are not paid one after the other.
func TestOnceReachesTheEngineWhileReading(t *testing.T) {
	e := newCmdEnv(t)
	stdin, write := io.Pipe()
	e.g.In = stdin
	eng := &cgroupDriverAsked{fakeEngine: e.eng, asked: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- e.onceWith(func(context.Context) (podEngine, error) { return eng, nil }, "-", "--timeout", "10s")
	}()
	select {
	case <-eng.asked:
	case err := <-done:
		t.Fatalf("once ended before its input did: %v", err)
	case <-time.After(time.Minute):
		write.Close()
		t.Fatal("the engine was not asked while the manifests were read")
	}
	io.WriteString(write, webPod("web"))
	write.Close()
	select {
	case err := <-done:
		wantExit(t, "once", err, exitOK)
	case <-time.After(time.Minute):
		t.Fatal("once did not end")
	}
	if e.sandboxes() != 1 {
		t.Errorf("%d sandboxes, want the pod's one", e.sandboxes())
	}
}

// TestOnceBadInputDoesNotWaitForTheEngine: an engine slow to answer (a
// DOCKER_HOST that does not) does not hold up the report of bad input: its
// reach is cancelled, and once exits 2.
func TestOnceBadInputDoesNotWaitForTheEngine(t *testing.T) {
	e := newCmdEnv(t)
	e.g.Strict = true
	p := e.write("web.yaml", webPod("web")+"    bogus: 1\n")
	cancelled := make(chan struct{})
	slow := func(ctx context.Context) (podEngine, error) {
		<-ctx.Done() // answers only when given up on
		close(cancelled)
		return nil, unreachable(ctx.Err())
	}
	done := make(chan error, 1)
	go func() { done <- e.onceWith(slow, p) }()
	select {
	case err := <-done:
		wantExit(t, "once", err, exitBadInput, "spec.containers[0].bogus: unknown field")
	case <-time.After(time.Minute):
		t.Fatal("once waited for an engine that does not answer")
	}
	select {
	case <-cancelled:
	default:
		t.Error("the engine's reach was not cancelled")
	}
}

// TestOnceOutputShowsAURLWithoutCredentials: once -o yaml|json shows the
// pods (a terminal, a CI log): a manifest URL's userinfo and query stay
// on the node, as in plan and /pods.
func TestOnceOutputShowsAURLWithoutCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {name: app, image: img:1}\n")
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://deploy:S3CRET@", 1) + "/pods.yaml?sig=x"
	for _, format := range []string{"yaml", "json"} {
		e := newCmdEnv(t)
		if err := e.once(url, "-o", format); err != nil {
			t.Fatalf("once: %v (%s)", err, e.errOut)
		}
		out := e.out.String()
		if strings.Contains(out, "S3CRET") || strings.Contains(out, "sig=x") {
			t.Errorf("once -o %s shows the URL's credentials:\n%s", format, out)
		}
		if !strings.Contains(out, strings.TrimPrefix(srv.URL, "http://")+"/pods.yaml") {
			t.Errorf("once -o %s does not name the URL's host and path:\n%s", format, out)
		}
	}
}
