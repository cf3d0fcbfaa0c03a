package cmd

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestParseRuntimeClasses(t *testing.T) {
	got, err := parseRuntimeClasses([]string{"fast=runc", "safe=runsc,kata = io.containerd.kata.v2", "fast=runc"})
	want := map[string]string{"fast": "runc", "safe": "runsc", "kata": "io.containerd.kata.v2"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []struct{ value, why string }{
		{"fast", "want NAME=RUNTIME"},
		{"=runc", "want NAME=RUNTIME"},
		{"fast=", "want NAME=RUNTIME"},
		{"Fast=runc", "not a valid RuntimeClass name"},
		{"a/b=runc", "not a valid RuntimeClass name"},
		{"fast=run c", "not a Docker runtime name"},
		{"fast=runc,fast=crun", "given twice"},
	} {
		if _, err := parseRuntimeClasses([]string{bad.value}); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%q: err %v, want %q", bad.value, err, bad.why)
		}
	}
}

// TestOnceRunsPodsWithTheirRuntimeClass: --runtime-class and RuntimeClass
// objects of the arguments both reach the runner; the flag wins a name
// both give.
func TestOnceRunsPodsWithTheirRuntimeClass(t *testing.T) {
	e := newCmdEnv(t)
	e.fake.SetRuntimeHandlers("runc", "runsc")
	withClass := func(name, class string) string {
		return strings.Replace(webPod(name), "spec:\n", "spec:\n  runtimeClassName: "+class+"\n", 1)
	}
	p := e.write("pods.yaml", withClass("fast", "fast")+"---\n"+withClass("safe", "safe")+`---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: safe
handler: runsc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: fast
handler: runsc
`)
	if err := e.once(p, "--runtime-class", "fast=runc", "--timeout", "10s"); err != nil {
		t.Fatalf("once: %v\nlog:\n%s", err, e.log)
	}
	sbs, err := e.fake.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sb := range sbs {
		got[sb.Pod.Name] = e.fake.SandboxConfig(sb.ID).Runtime
	}
	if want := map[string]string{"fast-node1": "runc", "safe-node1": "runsc"}; !maps.Equal(got, want) {
		t.Errorf("sandbox runtimes %v, want %v", got, want)
	}

	// A bad flag is bad input, before anything runs.
	err = parse(t, func(g *globalOptions) *cobra.Command {
		return newOnceCmd(g, func(context.Context, *onceOptions) error { return nil })
	}, "once", p, "--runtime-class", "fast")
	if exitCode(err) != exitBadInput {
		t.Errorf("--runtime-class fast: %v, want bad input", err)
	}
}

// TestRuntimeClassFromConfigFile: the config file's runtime-class list
// reaches watch as the flag does.
func TestRuntimeClassFromConfigFile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("runtime-class: [fast=runc, safe=runsc]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := watchOptionsOf(t, "--config", cfg, "--path", "/nonexistent")
	if want := map[string]string{"fast": "runc", "safe": "runsc"}; !maps.Equal(got.RuntimeClasses.Classes, want) {
		t.Errorf("classes %v, want %v", got.RuntimeClasses.Classes, want)
	}
}

// TestValidateRuntimeClasses: a runtimeClassName nobody declares is an
// error at its line, in validate as once's warning; --runtime-class or a
// RuntimeClass of the arguments declares it.
func TestValidateRuntimeClasses(t *testing.T) {
	e := newCmdEnv(t)
	p := e.write("pod.yaml", strings.Replace(webPod("web"), "spec:\n", "spec:\n  runtimeClassName: gvisor\n", 1))
	err := e.validate(p)
	if exitCode(err) != exitBadInput || !strings.Contains(err.Error(), p+`:6: spec.runtimeClassName: RuntimeClass "gvisor" not found: `+
		"declare it with --runtime-class gvisor=RUNTIME") || !strings.Contains(err.Error(), "until it is declared") {
		t.Fatalf("validate: %v", err)
	}
	if err := e.validate(p, "--runtime-class", "gvisor=runsc"); err != nil {
		t.Errorf("validate --runtime-class: %v", err)
	}
	e.write("rc.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n")
	if err := e.validate(e.dir); err != nil {
		t.Errorf("validate with a RuntimeClass: %v", err)
	}
}
