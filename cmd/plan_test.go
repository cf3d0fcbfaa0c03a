package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

func TestPlanFlags(t *testing.T) {
	var got *planOptions
	build := func(g *globalOptions) *cobra.Command {
		return newPlanCmd(g, func(_ context.Context, o *planOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "plan", "a.yaml", "dir/", "-o", "json", "--allow-privileged"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Paths, ",") != "a.yaml,dir/" || got.Output != "json" || !got.AllowPrivileged || got.Engine == nil {
		t.Fatalf("options: %+v", got)
	}
	if err := parse(t, build, "plan", "a.yaml"); err != nil || got.Output != "text" {
		t.Fatalf("default output %q (%v)", got.Output, err)
	}
	for _, bad := range [][]string{{"plan", "a.yaml", "-o", "table"}} {
		if err := parse(t, build, bad...); exitCode(err) != exitBadInput {
			t.Errorf("%v: want bad input, got %v", bad, err)
		}
	}
}

// pairPod has two containers, app and side; hostPort 0 publishes none.
func pairPod(name, sideImage string, hostPort int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: img:1
    env: [{name: MODE, value: a}]
    ports: [{containerPort: 80, hostPort: %d}]
  - name: side
    image: %s
`, name, hostPort, sideImage)
}

// plan runs planRun as `podrun plan args...` would, with the fake engine.
func (e *cmdEnv) plan(args ...string) error {
	e.t.Helper()
	var opts *planOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newPlanCmd(g, func(_ context.Context, o *planOptions) error { opts = o; return nil })
	}, append([]string{"plan"}, args...)...)
	opts.Engine = engineOf[baseEngine](e)
	return planRun(context.Background(), opts)
}

func TestPlanRun(t *testing.T) {
	e := newCmdEnv(t)
	e.fake.AddImage("img:2")
	p := e.write("pair.yaml", pairPod("pair", "img:1", 8080))
	wantExit(t, "plan before once", e.plan(p), exitChanges)
	if want := "pod default/pair-node1 (" + p + "): create\nplan: 1 create, 0 recreate, 0 update, 0 remove, 0 refuse, 0 unchanged\n"; e.out.String() != want {
		t.Fatalf("plan before once:\n%s\nwant:\n%s", e.out, want)
	}
	if err := e.once(p, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}

	e.reset()
	wantExit(t, "plan of what runs", e.plan(p), exitOK)
	if want := "pod default/pair-node1 (" + p + "): unchanged\nplan: 0 create, 0 recreate, 0 update, 0 remove, 0 refuse, 1 unchanged\n"; e.out.String() != want {
		t.Fatalf("plan of what runs:\n%s\nwant:\n%s", e.out, want)
	}

	// One container's image: that container, and nothing else.
	e.write("pair.yaml", pairPod("pair", "img:2", 8080))
	e.reset()
	wantExit(t, "plan after an edit", e.plan(p), exitChanges)
	want := "pod default/pair-node1 (" + p + "): update\n" +
		"  restart container side: container spec changed\n" +
		"      image: \"img:1\" -> \"img:2\"\n" +
		"plan: 0 create, 0 recreate, 1 update, 0 remove, 0 refuse, 0 unchanged\n"
	if e.out.String() != want {
		t.Fatalf("plan after an edit:\n%s\nwant:\n%s", e.out, want)
	}
	e.reset()
	wantExit(t, "plan -o json", e.plan(p, "-o", "json"), exitChanges)
	var doc struct {
		Pods    []runner.PodPlan
		Summary map[string]int
		Changed bool
	}
	if err := json.Unmarshal(e.out.Bytes(), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, e.out)
	}
	if len(doc.Pods) != 1 || !doc.Changed || doc.Summary["update"] != 1 || doc.Summary["unchanged"] != 0 {
		t.Fatalf("-o json: %+v", doc)
	}
	if s := doc.Pods[0].Steps; len(s) != 1 || s[0].Action != "restart" || s[0].Container != "side" ||
		len(s[0].Changes) != 1 || s[0].Changes[0].Field != "image" || string(s[0].Changes[0].New) != `"img:2"` {
		t.Fatalf("-o json steps: %+v", s)
	}
	// once does what plan said: side is replaced, app is not.
	running := func() map[string]string {
		ids := map[string]string{}
		for _, c := range e.containers("pair-node1") {
			if c.State == engine.StateRunning {
				ids[c.Name] = c.ID
			}
		}
		return ids
	}
	before := running()
	if err := e.once(p, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	if after := running(); after["app"] != before["app"] || after["side"] == before["side"] || after["side"] == "" {
		t.Errorf("once changed running containers %v to %v; plan named side only", before, after)
	}
	e.reset()
	wantExit(t, "plan after once applied the edit", e.plan(p), exitOK)

	// A hostPort is the sandbox's: the pod is made again.
	e.write("pair.yaml", pairPod("pair", "img:2", 8081))
	e.reset()
	wantExit(t, "plan after a port change", e.plan(p), exitChanges)
	want = "pod default/pair-node1 (" + p + "): recreate: sandbox spec changed\n" +
		"    ports[0].hostPort: 8080 -> 8081\n" +
		"plan: 0 create, 1 recreate, 0 update, 0 remove, 0 refuse, 0 unchanged\n"
	if e.out.String() != want {
		t.Fatalf("plan after a port change:\n%s\nwant:\n%s", e.out, want)
	}
}

// TestPlanRemove: a pod podrun runs from a file of the directory given,
// whose file is gone, is to be removed; given one file, the pods of the
// other files are not plan's business.
func TestPlanRemove(t *testing.T) {
	e := newCmdEnv(t)
	web := e.write("web.yaml", webPod("web"))
	db := e.write("db.yaml", webPod("db"))
	if err := e.once(e.dir, "--timeout", "10s"); err != nil {
		t.Fatal(err)
	}
	e.reset()
	wantExit(t, "plan of one file", e.plan(web), exitOK)
	if strings.Contains(e.out.String(), "db-node1") {
		t.Errorf("plan of web.yaml names db's pod:\n%s", e.out)
	}
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	e.reset()
	wantExit(t, "plan of the directory", e.plan(e.dir), exitChanges)
	want := "pod default/web-node1 (" + web + "): unchanged\n" +
		"pod default/db-node1 (" + db + "): remove: no manifest of its source defines it now\n" +
		"plan: 0 create, 0 recreate, 0 update, 1 remove, 0 refuse, 1 unchanged\n"
	if e.out.String() != want {
		t.Fatalf("plan of the directory:\n%s\nwant:\n%s", e.out, want)
	}
}

func TestPlanRunExitCodes(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		args     []string
		setup    func(*cmdEnv)
		code     int
		says     []string
		connects bool
	}{
		{name: "invalid manifest", manifest: webPod("web") + "    bogus: 1\n", setup: func(e *cmdEnv) { e.g.Strict = true },
			code: exitBadInput, says: []string{"web.yaml:15: spec.containers[0].bogus: unknown field"}},
		{name: "privileged refused, as once refuses it", manifest: privilegedPod("web"),
			code: exitBadInput, says: []string{"container app is privileged; pass --allow-privileged"}},
		{name: "privileged allowed", manifest: privilegedPod("web"), args: []string{"--allow-privileged"},
			code: exitChanges, connects: true},
		{name: "engine unreachable", manifest: webPod("web"), setup: func(e *cmdEnv) { e.down = true },
			code: exitUnreachable, says: []string{"cannot reach the Docker Engine"}, connects: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newCmdEnv(t)
			if c.setup != nil {
				c.setup(e)
			}
			p := e.write("web.yaml", c.manifest)
			wantExit(t, "plan", e.plan(append([]string{p}, c.args...)...), c.code, c.says...)
			if connected := e.connects.Load() > 0; connected != c.connects {
				t.Errorf("engine asked for: %v, want %v", connected, c.connects)
			}
			if e.sandboxes() != 0 {
				t.Error("plan started something")
			}
		})
	}
}

// TestWritePlanShowsAURLWithoutCredentials: a plan names a pod's URL
// source without its userinfo and query, in text and in JSON.
func TestWritePlanShowsAURLWithoutCredentials(t *testing.T) {
	plans := []runner.PodPlan{{Namespace: "default", Name: "a-n", Action: runner.PlanCreate,
		Source: "https://deploy:S3CRET@config.example/pods.yaml?sig=x"}}
	for _, format := range []string{"text", "json"} {
		var b strings.Builder
		if err := writePlan(&b, format, plans); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !strings.Contains(out, "https://config.example/pods.yaml") || strings.Contains(out, "S3CRET") || strings.Contains(out, "sig=x") {
			t.Errorf("%s plan:\n%s\nwant the URL without its credentials", format, out)
		}
	}
	if plans[0].Source != "https://deploy:S3CRET@config.example/pods.yaml?sig=x" {
		t.Errorf("writePlan changed the caller's plan: %q", plans[0].Source)
	}
}

// TestWritePlanText: every kind of pod plan and step, a diff cut short,
// values cut short, a spec without a record.
func TestWritePlanText(t *testing.T) {
	long := json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)
	var many []runner.FieldChange
	for i := 0; i < maxDiffLines+2; i++ {
		many = append(many, runner.FieldChange{Field: fmt.Sprintf("env[V%d].value", i), New: json.RawMessage(`"1"`)})
	}
	plans := []runner.PodPlan{
		{Namespace: "default", Name: "a-n", Source: "/m/a.yaml", Action: runner.PlanUpdate, Steps: []runner.PlanStep{
			{Action: runner.StepStart, Container: "init", Reason: "not created yet"},
			{Action: runner.StepRestart, Container: "app", Reason: "container spec changed", Diff: runner.Diff{Changes: many}},
			{Action: runner.StepUpdateResources, Container: "side", Reason: "resources changed", Diff: runner.Diff{
				Changes: []runner.FieldChange{{Field: "args", Old: long, New: json.RawMessage(`["x"]`)}}}},
			{Action: runner.StepStop, Container: "old", Reason: "container removed from the pod spec"},
			{Action: runner.StepRestart, Container: "legacy", Reason: "container spec changed", Diff: runner.Diff{Unrecorded: true}},
			{Action: runner.StepStopSandbox, Reason: "not the pod's latest sandbox"},
		}},
	}
	var b strings.Builder
	if err := writePlan(&b, "text", plans); err != nil {
		t.Fatal(err)
	}
	want := `pod default/a-n (/m/a.yaml): update
  start container init: not created yet
  restart container app: container spec changed
      env[V0].value: (unset) -> "1"
      env[V1].value: (unset) -> "1"
      env[V2].value: (unset) -> "1"
      env[V3].value: (unset) -> "1"
      env[V4].value: (unset) -> "1"
      env[V5].value: (unset) -> "1"
      env[V6].value: (unset) -> "1"
      env[V7].value: (unset) -> "1"
      ... and 2 more (-o json lists them all)
  update resources in place, container side: resources changed
      args: "` + strings.Repeat("x", maxValueRunes-4) + `... -> ["x"]
  stop container old: container removed from the pod spec
  restart container legacy: container spec changed
      (which fields changed is not known: no record of the spec the container was made from is kept: an older podrun made it, or the record was lost)
  stop sandbox: not the pod's latest sandbox
plan: 0 create, 0 recreate, 1 update, 0 remove, 0 refuse, 0 unchanged
`
	if b.String() != want {
		t.Fatalf("text:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := writePlan(&b, "yaml", nil); err != nil {
		t.Fatal(err)
	}
	if want := "changed: false\npods: []\nsummary:\n  create: 0\n  recreate: 0\n  refuse: 0\n  remove: 0\n  unchanged: 0\n  update: 0\n"; b.String() != want {
		t.Fatalf("yaml of no pods:\n%s\nwant:\n%s", b.String(), want)
	}
}
