package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeBuildInfo is the build info of a binary built from a checkout with
// uncommitted changes.
func fakeBuildInfo() (*debug.BuildInfo, bool) {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/podrun/podrun", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "d6c19a1e5a0b3c4d5e6f708192a3b4c5d6e7f809"},
			{Key: "vcs.time", Value: "2026-11-30T10:11:12Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}, true
}

func runVersion(t *testing.T, buildInfo func() (*debug.BuildInfo, bool), args ...string) string {
	t.Helper()
	var out bytes.Buffer
	g := &globalOptions{Out: &out, ErrOut: &bytes.Buffer{}}
	cmd := newVersionCmd(g, func(_ context.Context, o *versionOptions) error {
		o.BuildInfo = buildInfo
		return versionRun(o)
	})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("version %v: %v", args, err)
	}
	return out.String()
}

func TestVersionTable(t *testing.T) {
	got := runVersion(t, fakeBuildInfo)
	want := "VERSION      (devel)\n" +
		"REVISION     d6c19a1e5a0b3c4d5e6f708192a3b4c5d6e7f809\n" +
		"MODIFIED     true\n" +
		"COMMIT TIME  2026-11-30T10:11:12Z\n" +
		"GO           go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if got != want {
		t.Errorf("version:\n%s\nwant:\n%s", got, want)
	}
}

// TestVersionStructured: -o json and -o yaml carry the same fields, the
// revision in full.
func TestVersionStructured(t *testing.T) {
	var v map[string]any
	if err := json.Unmarshal([]byte(runVersion(t, fakeBuildInfo, "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version": "(devel)", "revision": "d6c19a1e5a0b3c4d5e6f708192a3b4c5d6e7f809", "commitTime": "2026-11-30T10:11:12Z",
		"modified": true, "goVersion": "go1.26.8", "platform": runtime.GOOS + "/" + runtime.GOARCH,
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("json %s = %v, want %v", k, v[k], w)
		}
	}
	if len(v) != len(want) {
		t.Errorf("json has %d fields, want %d: %v", len(v), len(want), v)
	}
	y := runVersion(t, fakeBuildInfo, "-o", "yaml")
	for _, line := range []string{"revision: d6c19a1e5a0b3c4d5e6f708192a3b4c5d6e7f809", "modified: true", `commitTime: "2026-11-30T10:11:12Z"`} {
		if !strings.Contains(y, line+"\n") {
			t.Errorf("yaml lacks %q:\n%s", line, y)
		}
	}
}

// TestVersionWithoutVCS: a binary built without VCS information (or whose
// build info cannot be read) says so, and claims neither a clean nor a
// modified tree.
func TestVersionWithoutVCS(t *testing.T) {
	noVCS := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, true
	}
	got := runVersion(t, noVCS)
	for _, line := range []string{"VERSION      v1.2.3", "REVISION     <none>", "MODIFIED     <none>", "COMMIT TIME  <none>"} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("version lacks %q:\n%s", line, got)
		}
	}
	if j := runVersion(t, noVCS, "-o", "json"); strings.Contains(j, "modified") || strings.Contains(j, "revision") {
		t.Errorf("json names VCS fields it does not have:\n%s", j)
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	if got := runVersion(t, none); !strings.Contains(got, "VERSION      (devel)\n") || !strings.Contains(got, "GO           "+runtime.Version()) {
		t.Errorf("version without build info:\n%s", got)
	}
}

// TestVersionCommand runs `podrun version` as a user does, with the test
// binary's own build info.
func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version", "--config", "", "-o", "json"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if v.GoVersion != runtime.Version() {
		t.Errorf("goVersion = %q, want %q", v.GoVersion, runtime.Version())
	}
	var errOut2 bytes.Buffer
	if code := run(context.Background(), []string{"version", "--config", "", "-o", "xml"}, strings.NewReader(""), &bytes.Buffer{}, &errOut2); code != exitBadInput {
		t.Errorf("-o xml: exit %d, want %d (%s)", code, exitBadInput, errOut2.String())
	}
}
