package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// planPod has two containers; the second's env and the first's hostPort
// are what the test edits.
func planPod(name string, hostPort int, mode string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %[2]s
    command: [sleep, "3600"]
    ports: [{containerPort: 80, hostPort: %[3]d, hostIP: 127.0.0.1}]
  - name: worker
    image: %[2]s
    command: [sleep, "3600"]
    env: [{name: MODE, value: %[4]s}]
`, name, testImage, hostPort, mode)
}

// TestPlan: plan against what once brought up on the real dockerd: nothing
// to do (0); an edit of one container's env names exactly that container
// (1), and once then replaces that one alone; a hostPort edit recreates
// the pod, saying why; a manifest deleted from the directory is a pod to
// remove; a bad manifest is 2 with its file and line.
func TestPlan(t *testing.T) {
	e := newEnv(t)
	port := freePort(t)
	p := e.write("pair.yaml", planPod("pair", port, "a"))
	gone := e.write("solo.yaml", sleepPod("solo", 1))
	if r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	r := e.podrun(time.Minute, "plan", e.dir)
	if r.code != 0 {
		t.Fatalf("plan of what runs: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "plan of what runs", r.stdout, "pod default/pair-"+e.node+" ("+p+"): unchanged",
		"pod default/solo-"+e.node+" ("+gone+"): unchanged", "0 update, 0 remove, 0 refuse, 2 unchanged")

	// The specs plan diffs against are in the pod directories, not in the
	// labels every relist carries.
	for _, c := range e.containers() {
		for k, v := range c.Labels {
			if strings.HasPrefix(k, "io.podrun.") && !strings.HasPrefix(k, "io.podrun.pod.label.") &&
				(strings.HasSuffix(k, ".spec") || len(v) > 256) {
				t.Errorf("container %.12s: label %s=%.60s...", c.ID, k, v)
			}
		}
	}
	for pattern, n := range map[string]int{"sandbox/*.json": 2, "containers/web/*.json": 1, "containers/worker/*.json": 1} {
		if m, _ := filepath.Glob(filepath.Join(e.root, "pods", "*", "specs", pattern)); len(m) != n {
			t.Errorf("spec records %s: %v, want %d", pattern, m, n)
		}
	}

	// One container's env.
	e.write("pair.yaml", planPod("pair", port, "b"))
	r = e.podrun(time.Minute, "plan", p)
	if r.code != 1 {
		t.Fatalf("plan after an env edit: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := "pod default/pair-" + e.node + " (" + p + "): update\n" +
		"  restart container worker: container spec changed\n" +
		"      env[MODE].value: \"a\" -> \"b\"\n" +
		"plan: 0 create, 0 recreate, 1 update, 0 remove, 0 refuse, 0 unchanged\n"
	if r.stdout != want {
		t.Fatalf("plan after an env edit:\n%s\nwant:\n%s", r.stdout, want)
	}
	// Another root dir has no records: the same plan, without the field.
	r = e.podrun(time.Minute, "plan", p, "--root-dir", t.TempDir())
	if r.code != 1 {
		t.Fatalf("plan without records: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "plan without records", r.stdout, "  restart container worker: container spec changed\n"+
		"      (which fields changed is not known")
	r = e.podrun(time.Minute, "plan", p, "-o", "json")
	var doc struct {
		Pods []struct {
			Action string
			Steps  []struct{ Action, Container string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 1 || len(doc.Pods) != 1 ||
		len(doc.Pods[0].Steps) != 1 || doc.Pods[0].Steps[0].Container != "worker" || doc.Pods[0].Steps[0].Action != "restart" {
		t.Fatalf("plan -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}

	// once does what plan said, and then there is nothing to do.
	before := runningIDs(e, "pair-"+e.node)
	if r := e.podrun(2*time.Minute, "once", p, "--timeout", "1m"); r.code != 0 {
		t.Fatalf("once after the edit: exit %d\n%s", r.code, r.stderr)
	}
	after := runningIDs(e, "pair-"+e.node)
	if after["web"] != before["web"] || after["worker"] == before["worker"] || after["worker"] == "" ||
		after["POD"] != before["POD"] {
		t.Fatalf("once changed %v to %v; plan named worker alone", before, after)
	}
	if r := e.podrun(time.Minute, "plan", p); r.code != 0 {
		t.Fatalf("plan after once applied the edit: exit %d\n%s", r.code, r.stdout)
	}

	// A hostPort is the sandbox's.
	port2 := freePort(t)
	e.write("pair.yaml", planPod("pair", port2, "b"))
	r = e.podrun(time.Minute, "plan", p)
	want = "pod default/pair-" + e.node + " (" + p + "): recreate: sandbox spec changed\n" +
		fmt.Sprintf("    ports[0].hostPort: %d -> %d\n", port, port2) +
		"plan: 0 create, 1 recreate, 0 update, 0 remove, 0 refuse, 0 unchanged\n"
	if r.code != 1 || r.stdout != want {
		t.Fatalf("plan after a hostPort edit: exit %d\n%s\nwant:\n%s", r.code, r.stdout, want)
	}

	// A manifest gone from the directory.
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	r = e.podrun(time.Minute, "plan", e.dir)
	contains(t, "plan after a file was deleted", r.stdout,
		"pod default/solo-"+e.node+" ("+gone+"): remove: no manifest of its source defines it now",
		"0 create, 1 recreate, 0 update, 1 remove, 0 refuse, 0 unchanged")
	if r.code != 1 {
		t.Fatalf("plan after a file was deleted: exit %d\n%s", r.code, r.stderr)
	}

	// A bad manifest: nothing is compared.
	e.write("pair.yaml", strings.Replace(planPod("pair", port2, "b"), "    env:", "    evn:", 1))
	r = e.podrun(time.Minute, "plan", "--strict", p)
	if r.code != 2 || r.stdout != "" {
		t.Fatalf("plan of a bad manifest: exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "plan of a bad manifest", r.stderr, p+":15: spec.containers[1].evn: unknown field")
}

// runningIDs are the running containers of pod by name (POD: the
// sandbox).
func runningIDs(e *env, pod string) map[string]string {
	out := map[string]string{}
	for _, c := range e.containers() {
		if c.State == "running" && c.Labels["io.podrun.pod.name"] == pod {
			out[c.Labels["io.podrun.container.name"]] = c.ID
		}
	}
	return out
}

// planSidecarPod has a sidecar and two app containers; side and app set
// the sidecar's and app a's env.
func planSidecarPod(name string, hostPort int, side, app string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {name: side, image: %[2]s, command: [sleep, "3600"], restartPolicy: Always, env: [{name: V, value: %[4]q}]}
  containers:
  - {name: a, image: %[2]s, command: [sleep, "3600"], env: [{name: V, value: %[5]q}],
     ports: [{containerPort: 80, hostPort: %[3]d, hostIP: 127.0.0.1}]}
  - {name: b, image: %[2]s, command: [sleep, "3600"]}
`, name, testImage, hostPort, side, app)
}

// TestPlanAgreesWithOnce: what plan says the next once does is what it
// does, on the real dockerd, where a sync is more than computePodActions:
// an edit of a sidecar and an app container replaces both (in one sync,
// so plan names both), and the pods once refuses - a host port a running
// pod holds, a sysctl the node does not allow - plan refuses, with once's
// own reasons.
func TestPlanAgreesWithOnce(t *testing.T) {
	e := newEnv(t)
	port := freePort(t)
	p := e.write("web.yaml", planSidecarPod("web", port, "1", "1"))
	if r := e.podrun(3*time.Minute, "once", p, "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	e.write("web.yaml", planSidecarPod("web", port, "2", "2"))
	r := e.podrun(time.Minute, "plan", p)
	want := "pod default/web-" + e.node + " (" + p + "): update\n" +
		"  restart container side: container spec changed\n" +
		"      env[V].value: \"1\" -> \"2\"\n" +
		"  restart container a: container spec changed\n" +
		"      env[V].value: \"1\" -> \"2\"\n" +
		"plan: 0 create, 0 recreate, 1 update, 0 remove, 0 refuse, 0 unchanged\n"
	if r.code != 1 || r.stdout != want {
		t.Fatalf("plan after a sidecar and an app edit: exit %d\n%s\nwant:\n%s%s", r.code, r.stdout, want, r.stderr)
	}
	before := runningIDs(e, "web-"+e.node)
	if r := e.podrun(2*time.Minute, "once", p, "--timeout", "1m"); r.code != 0 {
		t.Fatalf("once after the edit: exit %d\n%s", r.code, r.stderr)
	}
	after := runningIDs(e, "web-"+e.node)
	for _, name := range []string{"POD", "side", "a", "b"} {
		replaced := name == "side" || name == "a"
		if after[name] == "" || (after[name] != before[name]) != replaced {
			t.Errorf("once changed %v to %v; plan named side and a", before, after)
			break
		}
	}
	if r := e.podrun(time.Minute, "plan", p); r.code != 0 {
		t.Fatalf("plan after once applied the edit: exit %d\n%s", r.code, r.stdout)
	}

	// Refused by once, so by plan: the port web holds, a forbidden sysctl.
	taken := e.write("taken.yaml", planSidecarPod("taken", port, "1", "1"))
	sysctl := e.write("sysctl.yaml", strings.Replace(sleepPod("sysctl", 1), "spec:\n",
		"spec:\n  securityContext:\n    sysctls: [{name: kernel.msgmax, value: \"65536\"}]\n", 1))
	r = e.podrun(time.Minute, "plan", taken, sysctl, p, "-o", "json")
	var doc struct {
		Pods    []struct{ Name, Action, Reason string }
		Summary map[string]int
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 1 || len(doc.Pods) != 3 ||
		doc.Summary["refuse"] != 2 || doc.Summary["unchanged"] != 1 {
		t.Fatalf("plan of pods once refuses: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	// One once each: a pod failed for its sysctl ends once's wait, before
	// the report could show the other refusal.
	for i, args := range [][]string{{taken, p}, {sysctl}} {
		r = e.podrun(2*time.Minute, "once", append(args, "--timeout", "1m", "-o", "json")...)
		if r.code != 1 {
			t.Fatalf("once of %s: exit %d, want 1\n%s\n%s", args[0], r.code, r.stdout, r.stderr)
		}
		// once's report has the refused pod's status message, which
		// plan gave as its reason.
		pp := doc.Pods[i]
		if pp.Action != "refuse" || !strings.Contains(r.stdout, jsonString(pp.Reason)) {
			t.Errorf("plan said %s %s (%s); once:\n%s", pp.Action, pp.Name, pp.Reason, r.stdout)
		}
	}
	if n := len(runningIDs(e, "taken-"+e.node)) + len(runningIDs(e, "sysctl-"+e.node)); n != 0 {
		t.Errorf("the refused pods run %d containers", n)
	}
}

// jsonString is s as a JSON string's content, as once -o json writes it.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}
