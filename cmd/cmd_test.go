package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/runner"
)

// parse runs a command's flag parsing with the work function replaced.
func parse(t *testing.T, build func(*globalOptions) *cobra.Command, args ...string) error {
	t.Helper()
	g := &globalOptions{NodeName: "n", In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	return parseWith(g, build, args...)
}

// parseWith is parse into g, whose values are the flags' defaults.
func parseWith(g *globalOptions, build func(*globalOptions) *cobra.Command, args ...string) error {
	root := &cobra.Command{Use: "podrun", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&g.NodeName, "node-name", g.NodeName, "")
	root.AddCommand(build(g))
	root.SetArgs(args)
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	return root.ExecuteContext(context.Background())
}

func TestOnceFlags(t *testing.T) {
	var got *onceOptions
	build := func(g *globalOptions) *cobra.Command {
		return newOnceCmd(g, func(_ context.Context, o *onceOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "once", "a.yaml", "dir/", "--wait", "complete", "--timeout", "90s", "-o", "json", "--rm"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Paths, ",") != "a.yaml,dir/" || got.Wait != waitComplete || got.Timeout != 90*time.Second ||
		got.Output != "json" || !got.Remove {
		t.Fatalf("options: %+v", got)
	}
	for _, bad := range [][]string{
		{"once", "a.yaml", "--wait", "forever"},
		{"once", "a.yaml", "-o", "xml"},
		{"once", "a.yaml", "--rm"},
	} {
		err := parse(t, build, bad...)
		if exitCode(err) != exitBadInput {
			t.Errorf("%v: want bad input, got %v", bad, err)
		}
	}
}

func TestDownFlags(t *testing.T) {
	var got *downOptions
	build := func(g *globalOptions) *cobra.Command {
		return newDownCmd(g, func(_ context.Context, o *downOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "down", "--all", "--grace-period", "3s"); err != nil {
		t.Fatal(err)
	}
	if !got.All || got.Grace != 3*time.Second {
		t.Fatalf("options: %+v", got)
	}
	for _, bad := range [][]string{{"down"}, {"down", "--all", "x.yaml"}} {
		if err := parse(t, build, bad...); exitCode(err) != exitBadInput {
			t.Errorf("%v: want bad input, got %v", bad, err)
		}
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[error]int{
		nil:                         exitOK,
		errors.New("x"):             exitPodFailed,
		podsFailed(errors.New("")):  exitPodFailed,
		badInputf("x"):              exitBadInput,
		unreachable(errors.New("")): exitUnreachable,
	}
	for err, want := range cases {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// TestWrongArgumentsAreBadInput: a missing or extra argument is exit
// status 2, as a wrong flag is, for every command: never 1, which plan
// answers when something would change and once when a pod failed.
func TestWrongArgumentsAreBadInput(t *testing.T) {
	for _, args := range [][]string{{"once"}, {"validate"}, {"plan"}, {"logs"}, {"ps", "x"}, {"watch", "x"}, {"version", "x"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(args, "--config", "", "--node-name", "n1"), strings.NewReader(""), &out, &errOut)
		if code != exitBadInput || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, exitBadInput, errOut.String())
		}
	}
}

// TestManifestCommandsSayTheyTakeURLs: every command that reads manifest
// arguments fetches an http(s) one (readArgs), and its usage says so, as
// the README's does: a user reading --help alone would not know.
func TestManifestCommandsSayTheyTakeURLs(t *testing.T) {
	for _, name := range []string{"once", "validate", "plan", "down"} {
		var out, errOut bytes.Buffer
		run(context.Background(), []string{name, "--help"}, strings.NewReader(""), &out, &errOut)
		if !strings.Contains(out.String(), "podrun "+name+" PATH|URL|- ...") {
			t.Errorf("podrun %s --help does not name URLs in its usage:\n%s", name, out.String())
		}
	}
}

// TestValidateReportsFileLineField runs the real command end to end without
// Docker: a bad manifest is exit 2 with its file, line and field.
func TestValidateReportsFileLineField(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pod.yaml")
	os.WriteFile(p, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n    bogus: 1\n"), 0o600)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"validate", "--config", "", "--node-name", "n1", "--strict", p}, strings.NewReader(""), &out, &errOut)
	if code != exitBadInput {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), p+":9") || !strings.Contains(errOut.String(), "bogus") {
		t.Fatalf("error does not name file:line and field:\n%s", errOut.String())
	}

	// Without --strict the unknown field is dropped, as the kubelet drops
	// it, and the report says so.
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"validate", "--config", "", "--node-name", "n1", p}, strings.NewReader(""), &out, &errOut)
	if want := "warning: " + p + ":9: spec.containers[0].bogus: unknown field, ignored"; code != exitOK || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 0 and %q; stdout:\n%s\nstderr:\n%s", code, want, out.String(), errOut.String())
	}

	out.Reset()
	errOut.Reset()
	good := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: busybox:1\n"
	code = run(context.Background(), []string{"validate", "--config", "", "--node-name", "n1", "-"}, strings.NewReader(good), &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "default/x-n1") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
}

// TestConfigPrecedence: flag > PODRUN_* > config file > default.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("node-name: from-file\nroot-dir: /from/file\nlog-level: debug\n"), 0o600)
	t.Setenv("PODRUN_ROOT_DIR", "/from/env")

	var got *validateOptions
	g := &globalOptions{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	root := newRootCmd(g)
	for _, c := range root.Commands() {
		if c.Name() == "validate" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newValidateCmd(g, func(_ context.Context, o *validateOptions) error { got = o; return nil }))
	root.SetArgs([]string{"validate", "--config", cfg, "--log-level", "warn", "x.yaml"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.NodeName != "from-file" || got.RootDir != "/from/env" || got.LogLevel != "warn" {
		t.Fatalf("node %q root %q level %q", got.NodeName, got.RootDir, got.LogLevel)
	}
}

func TestConditionMet(t *testing.T) {
	pod := func(phase v1.PodPhase, policy v1.RestartPolicy, states ...v1.ContainerState) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.RestartPolicy = policy
		p.Status.Phase = phase
		for _, s := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{State: s})
		}
		return p
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	done := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	cases := []struct {
		name        string
		pods        []*v1.Pod
		cond        string
		met, failed bool
	}{
		{"all running", []*v1.Pod{pod(v1.PodRunning, v1.RestartPolicyAlways, running, running)}, waitRunning, true, false},
		{"one container waiting", []*v1.Pod{pod(v1.PodRunning, v1.RestartPolicyAlways, running, waiting)}, waitRunning, false, false},
		{"pending", []*v1.Pod{pod(v1.PodPending, v1.RestartPolicyAlways)}, waitRunning, false, false},
		{"job finished counts as up", []*v1.Pod{pod(v1.PodSucceeded, v1.RestartPolicyNever, done)}, waitRunning, true, false},
		{"a container its own policy Never does not restart counts as up", []*v1.Pod{containerNever(pod(v1.PodRunning, v1.RestartPolicyAlways, running,
			v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}))}, waitRunning, true, false},
		{"a container its pod's policy Always restarts is not up", []*v1.Pod{pod(v1.PodRunning, v1.RestartPolicyAlways, running,
			v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}})}, waitRunning, false, false},
		{"running is not complete", []*v1.Pod{pod(v1.PodRunning, v1.RestartPolicyAlways, running)}, waitComplete, false, false},
		{"complete", []*v1.Pod{pod(v1.PodSucceeded, v1.RestartPolicyNever, done)}, waitComplete, true, false},
		{"running but not ready", []*v1.Pod{pod(v1.PodRunning, v1.RestartPolicyAlways, running)}, waitReady, false, false},
		{"ready", []*v1.Pod{withReady(pod(v1.PodRunning, v1.RestartPolicyAlways, running))}, waitReady, true, false},
		{"failed ends the wait", []*v1.Pod{pod(v1.PodFailed, v1.RestartPolicyNever), pod(v1.PodPending, v1.RestartPolicyAlways)}, waitComplete, false, true},
		{"refused its host ports: the others are waited for", []*v1.Pod{nodePorts(pod(v1.PodFailed, v1.RestartPolicyAlways)),
			pod(v1.PodPending, v1.RestartPolicyAlways)}, waitRunning, false, false},
		{"refused its host ports: the others are up", []*v1.Pod{nodePorts(pod(v1.PodFailed, v1.RestartPolicyAlways)),
			pod(v1.PodRunning, v1.RestartPolicyAlways, running)}, waitRunning, true, false},
		{"refused a sysctl: the others are waited for", []*v1.Pod{withReason(pod(v1.PodFailed, v1.RestartPolicyAlways), "SysctlForbidden"),
			pod(v1.PodPending, v1.RestartPolicyAlways)}, waitRunning, false, false},
		{"refused its name: the others are up", []*v1.Pod{withReason(pod(v1.PodFailed, v1.RestartPolicyAlways), "NameConflict"),
			pod(v1.PodRunning, v1.RestartPolicyAlways, running)}, waitRunning, true, false},
		{"refused its OS: the others are waited for", []*v1.Pod{withReason(pod(v1.PodFailed, v1.RestartPolicyAlways), "PodOSNotSupported"),
			pod(v1.PodPending, v1.RestartPolicyAlways)}, waitReady, false, false},
		{"failed for another reason ends the wait", []*v1.Pod{withReason(pod(v1.PodFailed, v1.RestartPolicyAlways), "DeadlineExceeded"),
			pod(v1.PodPending, v1.RestartPolicyAlways)}, waitRunning, false, true},
	}
	for _, c := range cases {
		met, failed := conditionMet(c.pods, c.cond)
		if met != c.met || failed != c.failed {
			t.Errorf("%s: met %v failed %v, want %v %v", c.name, met, failed, c.met, c.failed)
		}
	}
}

// containerNever names p's containers c0, c1, ... in its spec and status,
// the last with its own restartPolicy Never.
func containerNever(p *v1.Pod) *v1.Pod {
	never := v1.ContainerRestartPolicyNever
	for i := range p.Status.ContainerStatuses {
		name := fmt.Sprintf("c%d", i)
		p.Status.ContainerStatuses[i].Name = name
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name})
	}
	p.Spec.Containers[len(p.Spec.Containers)-1].RestartPolicy = &never
	return p
}

// nodePorts makes p a pod refused its host ports.
func nodePorts(p *v1.Pod) *v1.Pod {
	return withReason(p, "NodePorts")
}

func withReason(p *v1.Pod, reason string) *v1.Pod {
	p.Status.Reason = reason
	return p
}

func withReady(p *v1.Pod) *v1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
	return p
}

func TestReportTable(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-n", Namespace: "default"}}
	p.Status.Phase = v1.PodFailed
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", RestartCount: 2,
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	var b bytes.Buffer
	if err := writeReport(&b, "table", []*v1.Pod{p}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NAMESPACE  POD    PHASE   CONTAINER    STATE                   RESTARTS  EXIT CODE",
		"default    job-n  Failed  init (init)  Terminated (Completed)  0         0",
		"default    job-n  Failed  main         Terminated (Error)      2         3",
	}
	if got := strings.TrimSpace(b.String()); got != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	b.Reset()
	if err := writeReport(&b, "yaml", []*v1.Pod{p}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kind: List", "kind: Pod", "phase: Failed", "exitCode: 3"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("yaml report lacks %q:\n%s", s, b.String())
		}
	}
}

// TestOneLineCutsOnARune: a long waiting message is cut to 120 runes,
// never inside a UTF-8 character, on one line.
func TestOneLineCutsOnARune(t *testing.T) {
	cases := []struct{ in, want string }{
		{"short\nmessage", "short message"},
		{strings.Repeat("a", 120), strings.Repeat("a", 120)},
		// 116 ASCII bytes then "é" (2 bytes): cut by bytes at 117, the
		// "é" would lose its second byte.
		{strings.Repeat("a", 116) + strings.Repeat("é", 10), strings.Repeat("a", 116) + "é..."},
		{strings.Repeat("日本", 70), strings.Repeat("日本", 58) + "日..."},
		{strings.Repeat("\xff", 130), strings.Repeat("\xff", 117) + "..."},
	}
	for _, c := range cases {
		got := oneLine(c.in)
		if got != c.want {
			t.Errorf("oneLine(%q) = %q, want %q", c.in, got, c.want)
		}
		if utf8.ValidString(c.in) && !utf8.ValidString(got) {
			t.Errorf("oneLine(%q) = %q: not UTF-8", c.in, got)
		}
		if n := utf8.RuneCountInString(got); n > maxLineRunes {
			t.Errorf("oneLine(%q) is %d runes", c.in, n)
		}
	}
	cs := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CreateContainerConfigError",
		Message: strings.Repeat("ü", 200)}}}
	if got := stateText(cs); !utf8.ValidString(got) || !strings.HasSuffix(got, "ü...)") {
		t.Errorf("stateText = %q", got)
	}
	// A container made but not started waits with no reason (the
	// kubelet's): no empty parentheses.
	cs = v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}
	if got := stateText(cs); got != "Waiting" {
		t.Errorf("stateText of a created container = %q, want Waiting", got)
	}
}

// parsePs parses `podrun ps args...` as podrun does, with config (none
// when "") as its config file, into the global options it returns.
func parsePs(t *testing.T, config string, args ...string) (*globalOptions, error) {
	t.Helper()
	file := ""
	if config != "" {
		file = filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g := &globalOptions{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	root := newRootCmd(g)
	for _, c := range root.Commands() {
		if c.Name() == "ps" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newPsCmd(g, func(context.Context, *psOptions) error { return nil }))
	root.SetArgs(append([]string{"ps", "--config", file}, args...))
	return g, root.ExecuteContext(context.Background())
}

// TestRuntimeRequestTimeoutFlag: --runtime-request-timeout, the kubelet's
// flag and default, is read from the command line, podrun's config file
// and a KubeletConfiguration (runtimeRequestTimeout), and reaches the
// Docker and CRI engines' call timeouts and the runner's relist bound. A
// value that is not positive is bad input.
func TestRuntimeRequestTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       time.Duration
	}{
		{"default", "", nil, 2 * time.Minute},
		{"flag", "", []string{"--runtime-request-timeout", "30s"}, 30 * time.Second},
		{"podrun file", "runtime-request-timeout: 45s\n", nil, 45 * time.Second},
		{"kubelet file", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nruntimeRequestTimeout: 3m\n", nil, 3 * time.Minute},
		{"kubelet default", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nruntimeRequestTimeout: 0s\n", nil, 2 * time.Minute},
		{"flag over file", "runtime-request-timeout: 45s\n", []string{"--runtime-request-timeout", "10s"}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parsePs(t, tc.file, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if g.RuntimeRequestTimeout != tc.want {
				t.Errorf("runtime request timeout %s, want %s", g.RuntimeRequestTimeout, tc.want)
			}
			if strings.Contains(g.ErrOut.(*bytes.Buffer).String(), "runtimeRequestTimeout") {
				t.Errorf("runtimeRequestTimeout reported as ignored: %s", g.ErrOut)
			}
		})
	}
	for _, bad := range []string{"0s", "-1m", "soon"} {
		if _, err := parsePs(t, "", "--runtime-request-timeout", bad); exitCode(err) != exitBadInput ||
			!strings.Contains(err.Error(), "runtime-request-timeout") {
			t.Errorf("--runtime-request-timeout %s: %v, want bad input naming the flag", bad, err)
		}
	}

	// What the flag feeds: both engines' call timeouts, the runner's
	// relist bound.
	e := newCmdEnv(t)
	e.g.RuntimeRequestTimeout = 42 * time.Second
	if d := e.g.dockerOptions(nil).CallTimeout; d != 42*time.Second {
		t.Errorf("docker call timeout %s, want 42s", d)
	}
	if d := e.g.criOptions("unix:///run/x.sock", nil).CallTimeout; d != 42*time.Second {
		t.Errorf("CRI call timeout %s, want 42s", d)
	}
	var relist time.Duration
	if _, err := newRunner(context.Background(), e.g, e.eng, false, func(c *runner.Config) { relist = c.RuntimeRequestTimeout }); err != nil {
		t.Fatal(err)
	}
	if relist != 42*time.Second {
		t.Errorf("runner's runtime request timeout %s, want 42s", relist)
	}
}

// watchOptionsOf runs `podrun watch args...` with a command that only
// keeps the options it was given, and returns them and the global options
// (ErrOut a *bytes.Buffer).
func watchOptionsOf(t *testing.T, args ...string) (*watchOptions, *globalOptions) {
	t.Helper()
	var got *watchOptions
	g := &globalOptions{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	root := newRootCmd(g)
	for _, c := range root.Commands() {
		if c.Name() == "watch" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newWatchCmd(g, func(_ context.Context, o *watchOptions) error { got = o; return nil }))
	root.SetArgs(append([]string{"watch"}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	return got, g
}
