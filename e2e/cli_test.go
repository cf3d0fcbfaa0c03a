package e2e

// The CLI's views of the runtime (ps, logs) and its exit codes, through the
// real binary against real Docker.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// psRows is the NAMESPACE/NAME column pairs of a ps table, and each row's
// fields by pod name.
func psRows(t *testing.T, out string) (names []string, rows map[string][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NAMESPACE") {
		t.Fatalf("ps: no header:\n%s", out)
	}
	rows = map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 || strings.Contains(f[0], ":") {
			continue // messages under the table
		}
		names = append(names, f[0]+"/"+f[1])
		rows[f[1]] = f
	}
	slices.Sort(names)
	return names, rows
}

// TestCLIPsOutputsAndNamespaces: ps as a table, wide, JSON and YAML, of
// one namespace (-n) or all (-A, and the default), read from Docker.
func TestCLIPsOutputsAndNamespaces(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", sleepPod("a", 1))
	e.write("b.yaml", strings.Replace(sleepPod("b", 2), "  name: b\n", "  name: b\n  namespace: other\n", 1))
	if r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	a, b := "default/a-"+e.node, "other/b-"+e.node
	// Docker only: no podrun watch of another test may answer.
	ps := func(args ...string) string {
		t.Helper()
		r := e.podrun(time.Minute, "ps", append([]string{"--daemon=false"}, args...)...)
		if r.code != 0 {
			t.Fatalf("ps %v: exit %d\n%s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{a, b}},
		{[]string{"-A"}, []string{a, b}},
		{[]string{"-n", "other"}, []string{b}},
		{[]string{"--namespace", "default"}, []string{a}},
		{[]string{"-n", "other", "-A"}, []string{a, b}},
		{[]string{"-n", "nowhere"}, nil},
	} {
		out := ps(c.args...)
		if names, _ := psRows(t, out); !slices.Equal(names, c.want) {
			t.Errorf("ps %v: pods %v, want %v\n%s", c.args, names, c.want, out)
		}
	}
	_, rows := psRows(t, ps())
	if r := rows["b-"+e.node]; len(r) < 6 || r[2] != "2/2" || r[3] != "Running" || r[4] != "0" {
		t.Errorf("ps row of b: %v, want READY 2/2, STATUS Running, RESTARTS 0", r)
	}

	_, rows = psRows(t, ps("-o", "wide"))
	for pod, ctrs := range map[string]string{"a-" + e.node: "c0", "b-" + e.node: "c0,c1"} {
		r := rows[pod]
		if len(r) != 8 || net.ParseIP(r[6]) == nil || r[7] != ctrs {
			t.Errorf("ps -o wide row of %s: %v, want an IP and containers %s", pod, r, ctrs)
		}
	}

	var list v1.PodList
	if err := json.Unmarshal([]byte(ps("-o", "json")), &list); err != nil {
		t.Fatalf("ps -o json: %v", err)
	}
	if list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("ps -o json: kind %q, %d items, want a List of 2", list.Kind, len(list.Items))
	}
	for _, p := range list.Items {
		if p.Kind != "Pod" || p.Status.Phase != v1.PodRunning || net.ParseIP(p.Status.PodIP) == nil || p.Spec.NodeName != e.node {
			t.Errorf("ps -o json: %s/%s kind %q phase %s podIP %q node %q", p.Namespace, p.Name, p.Kind,
				p.Status.Phase, p.Status.PodIP, p.Spec.NodeName)
		}
	}

	list = v1.PodList{}
	if err := yaml.Unmarshal([]byte(ps("-o", "yaml", "-n", "other")), &list); err != nil {
		t.Fatalf("ps -o yaml: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Namespace+"/"+list.Items[0].Name != b || len(list.Items[0].Status.ContainerStatuses) != 2 {
		t.Fatalf("ps -o yaml -n other: %+v, want %s with 2 container statuses", list.Items, b)
	}
}

// TestCLILogsFollowTailTimestamps: logs --tail, --timestamps and -f (alone
// and with --tail) of a container that prints three lines, waits for a
// file, then prints one more.
func TestCLILogsFollowTailTimestamps(t *testing.T) {
	e := newEnv(t)
	trig := t.TempDir()
	e.write("talk.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: talk, namespace: chat}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo line1; echo line2; echo line3; while [ ! -f /trig/go ]; do sleep 0.1; done; echo after; exec sleep 3600"]
    volumeMounts: [{name: trig, mountPath: /trig}]
  volumes:
  - name: trig
    hostPath: {path: %s, type: Directory}
`, testImage, trig))
	if r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	logs := func(args ...string) result {
		t.Helper()
		return e.podrun(30*time.Second, "logs", append([]string{"-n", "chat", "talk"}, args...)...)
	}
	waitFor(t, "the first three lines", time.Minute, func() bool { return logs().stdout == "line1\nline2\nline3\n" })

	if r := logs("--tail", "2"); r.code != 0 || r.stdout != "line2\nline3\n" {
		t.Errorf("logs --tail 2: exit %d %q, want the last two lines\n%s", r.code, r.stdout, r.stderr)
	}
	r := logs("--timestamps")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("logs --timestamps: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	var last time.Time
	for i, l := range lines {
		ts, text, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || text != fmt.Sprintf("line%d", i+1) || at.Before(last) {
			t.Errorf("logs --timestamps line %d: %q (%v)", i+1, l, err)
		}
		last = at
	}
	if r := logs("-f", "--previous"); r.code != 2 {
		t.Errorf("logs -f --previous: exit %d, want 2 (bad input)", r.code)
	}

	// Two followers, one from the start and one of the last line only.
	follow := func(args ...string) chan string {
		cmd := exec.Command(podrunBin, e.args("logs", append([]string{"-n", "chat", "talk", "-f"}, args...)...)...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		return lines
	}
	next := func(what string, lines chan string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: logs -f ended", what)
			}
			return l
		case <-time.After(time.Minute):
			t.Fatalf("%s: no line within a minute", what)
		}
		return ""
	}
	all := follow()
	tail := follow("--tail", "1")
	for i := 1; i <= 3; i++ {
		if l := next("logs -f", all); l != fmt.Sprintf("line%d", i) {
			t.Fatalf("logs -f: line %d is %q", i, l)
		}
	}
	if l := next("logs -f --tail 1", tail); l != "line3" {
		t.Fatalf("logs -f --tail 1: first line %q, want line3", l)
	}
	if err := os.WriteFile(filepath.Join(trig, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for what, lines := range map[string]chan string{"logs -f": all, "logs -f --tail 1": tail} {
		if l := next(what, lines); l != "after" {
			t.Errorf("%s: after the trigger %q, want after", what, l)
		}
	}
}

// TestCLIRuntimeUnreachableExit3: exit code 3 means the container runtime
// cannot be reached; every command that needs it says so, and validate,
// which does not, still works.
func TestCLIRuntimeUnreachableExit3(t *testing.T) {
	e := newEnv(t)
	e.extra = []string{"--docker-host", "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")}
	p := e.write("s.yaml", sleepPod("s", 1))
	for _, args := range [][]string{
		{"once", p},
		{"once", "--wait", "complete", e.dir},
		{"down", p},
		{"down", "--all"},
		{"ps", "--daemon=false"},
		{"logs", "s"},
		{"plan", p},
	} {
		r := e.podrun(time.Minute, args[0], args[1:]...)
		if r.code != 3 {
			t.Errorf("%v with no Docker: exit %d, want 3\n%s", args, r.code, r.stderr)
			continue
		}
		contains(t, fmt.Sprintf("%v stderr", args), r.stderr, "cannot reach the Docker Engine")
	}
	if r := e.podrun(time.Minute, "validate", p); r.code != 0 {
		t.Errorf("validate needs no Docker: exit %d\n%s", r.code, r.stderr)
	}
	// Bad input is said before the runtime is asked for.
	bad := e.write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: []}\n")
	if r := e.podrun(time.Minute, "once", bad); r.code != 2 {
		t.Errorf("once of bad input with no Docker: exit %d, want 2\n%s", r.code, r.stderr)
	}
}
