package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// twoContainerPod has containers a and b; a's command and b's memory limit
// are parameters, so that edits touch one container only.
func twoContainerPod(name, aCmd, bMemory string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: a
    image: %[2]s
    command: ["sh", "-c", %[3]q]
  - name: b
    image: %[2]s
    command: ["sleep", "3600"]
    resources:
      limits: {memory: %[4]s}
`, name, testImage, aCmd, bMemory)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > deadline {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// running returns the IDs of the node's running containers by
// "pod/container" (POD for sandboxes).
func (e *env) running() map[string]string {
	out := map[string]string{}
	for _, c := range e.containers() {
		if c.State != "running" {
			continue
		}
		name := c.Labels["io.podrun.container.name"]
		if c.Labels["io.podrun.container.type"] == "sandbox" {
			name = "POD"
		}
		out[strings.TrimSuffix(c.Labels["io.podrun.pod.name"], "-"+e.node)+"/"+name] = c.ID
	}
	return out
}

func (e *env) watch(extra ...string) (stop func(sig syscall.Signal)) {
	// No HTTP server unless asked (extra flags come later and win).
	args := append([]string{"--path", e.dir, "--file-check-frequency", "1s", "--sync-frequency", "10s",
		"--healthz-port", "0"}, extra...)
	cmd, stderr := e.start("watch", args...)
	return func(sig syscall.Signal) {
		cmd.Process.Signal(sig)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.t.Fatalf("podrun watch did not exit on %s\n%s", sig, stderr.String())
		}
		if e.t.Failed() {
			e.t.Logf("podrun watch stderr:\n%s", stderr.String())
		}
	}
}

func sameIDs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestWatchFileLifecycle(t *testing.T) {
	e := newEnv(t)
	base, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)

	p := e.write("pod.yaml", twoContainerPod("pod", "sleep 3600", "64Mi"))
	took := waitFor(t, "the pod to come up", time.Minute, func() bool { return len(e.running()) == 3 })
	t.Logf("new file to pod running: %s", took)
	before := e.running()

	// Editing a's command replaces a only.
	e.write("pod.yaml", twoContainerPod("pod", "sleep 3601", "64Mi"))
	waitFor(t, "container a to be replaced", time.Minute, func() bool {
		r := e.running()
		return len(r) == 3 && r["pod/a"] != before["pod/a"]
	})
	after := e.running()
	if after["pod/b"] != before["pod/b"] || after["pod/POD"] != before["pod/POD"] {
		t.Fatalf("editing a touched others:\nbefore %v\nafter  %v", before, after)
	}

	// A resources-only edit restarts nothing and is applied in place.
	e.write("pod.yaml", twoContainerPod("pod", "sleep 3601", "96Mi"))
	waitFor(t, "b's memory limit to be updated", time.Minute, func() bool {
		ins, err := docker.ContainerInspect(context.Background(), after["pod/b"])
		return err == nil && ins.HostConfig.Memory == 96<<20
	})
	if now := e.running(); !sameIDs(now, after) {
		t.Fatalf("resources-only edit restarted containers:\nbefore %v\nafter  %v", after, now)
	}

	// A broken edit keeps the pod as it was. The source reports the
	// problem once (a rescan finding the same is not news): from then on
	// the pod is what podrun does with a broken manifest.
	if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod\nspec:\n  containers:\n  - name: a\n    ima"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken manifest to be read", time.Minute, func() bool {
		return metric(t, base, "podrun_source_errors_total", map[string]string{"source": e.dir}) >= 1
	})
	if now := e.running(); !sameIDs(now, after) {
		t.Fatalf("an invalid edit changed the pod:\nbefore %v\nafter  %v", after, now)
	}

	// Deleting the file removes the pod gracefully.
	os.Remove(p)
	took = waitFor(t, "the pod to be removed", time.Minute, func() bool { return len(e.containers()) == 0 })
	t.Logf("file deleted to pod removed: %s", took)
}

// TestWatchEditCreatesWhileOldStops: an edited container's successor is
// created while the old one stops, and started only after it stopped.
// The old container ignores SIGTERM (sleep as PID 1), so its stop takes
// the pod's whole grace period, long enough for a create on a busy
// machine; Docker's own timestamps tell the order.
func TestWatchEditCreatesWhileOldStops(t *testing.T) {
	e := newEnv(t)
	stop := e.watch()
	defer stop(syscall.SIGTERM)
	pod := func(seconds int) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: slowstop
spec:
  terminationGracePeriodSeconds: 8
  containers:
  - name: app
    image: %s
    command: ["sleep", "%d"]
`, testImage, seconds)
	}
	e.write("pod.yaml", pod(3600))
	waitFor(t, "the pod to come up", time.Minute, func() bool { return len(e.running()) == 2 })
	old := e.running()["slowstop/app"]

	e.write("pod.yaml", pod(3601))
	var successor string
	waitFor(t, "the edited container to run", time.Minute, func() bool {
		successor = e.running()["slowstop/app"]
		return successor != "" && successor != old
	})
	ctx := context.Background()
	was, err := docker.ContainerInspect(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	now, err := docker.ContainerInspect(ctx, successor)
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(what, s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ts
	}
	if was.State.Running {
		t.Fatalf("the old container %.12s still runs beside its successor %.12s", old, successor)
	}
	finished := stamp("old container's FinishedAt", was.State.FinishedAt)
	created := stamp("successor's Created", now.Created)
	started := stamp("successor's StartedAt", now.State.StartedAt)
	if !created.Before(finished) {
		t.Errorf("successor created %s after the old container stopped (%s): not made while it stopped", created, finished)
	}
	if started.Before(finished) {
		t.Errorf("successor started %s, before the old container stopped (%s): the two ran together", started, finished)
	}
}

func TestWatchAdoptsAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", sleepPod("a", 2))
	e.write("b.yaml", webPod("web", freePort(t)))
	stop := e.watch()
	// Five running objects are not enough: web's init container runs for a
	// moment, and may be counted before httpd starts.
	waitFor(t, "pods up", time.Minute, func() bool { r := e.running(); return len(r) == 5 && r["web/httpd"] != "" })
	before := e.running()

	// SIGKILL: the pods keep running; a new podrun adopts them. It has
	// adopted them once its /pods shows both pods with every container
	// running: only then is the comparison a check of adoption.
	stop(syscall.SIGKILL)
	_, stop = e.watchWithServer()
	e.waitSynced("a", "web")
	if now := e.running(); !sameIDs(now, before) {
		t.Fatalf("restart after SIGKILL changed containers:\nbefore %v\nafter  %v", before, now)
	}

	// SIGTERM leaves the pods running too.
	stop(syscall.SIGTERM)
	if now := e.running(); !sameIDs(now, before) {
		t.Fatalf("SIGTERM changed containers:\nbefore %v\nafter  %v", before, now)
	}

	// --stop-pods-on-exit removes them: those it knows, so wait until it
	// knows both.
	_, stop = e.watchWithServer("--stop-pods-on-exit")
	e.waitSynced("a", "web")
	stop(syscall.SIGTERM)
	if n := len(e.containers()); n != 0 {
		t.Fatalf("--stop-pods-on-exit left %d containers", n)
	}
}

// waitSynced waits until the watch has synced the named pods (manifest
// names): /pods lists each with every container running.
func (e *env) waitSynced(names ...string) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("/pods to show %v running", names), 2*time.Minute, func() bool {
		got := e.pods()
		for _, n := range names {
			p, ok := got[n+"-"+e.node]
			if !ok || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running == nil {
					return false
				}
			}
		}
		return true
	})
}

func TestWatchKilledMidBringUp(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 10; i++ {
		e.write(fmt.Sprintf("p%d.yaml", i), sleepPod(fmt.Sprintf("p%d", i), 1))
	}
	stop := e.watch()
	// The kill lands in the bring-up: some pods' containers made, not all.
	waitFor(t, "the bring-up to begin", time.Minute, func() bool { return len(e.containers()) > 0 })
	stop(syscall.SIGKILL)
	_, stop = e.watchWithServer()
	defer stop(syscall.SIGTERM)
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	e.waitSynced(names...)
	// Converged means exactly the 20 containers, all running: leftovers of
	// the killed run (created, exited, or a second sandbox) are removed by
	// the sync, so wait for that rather than for a fixed time.
	waitFor(t, "exactly 20 containers, all running", time.Minute, func() bool {
		return len(e.containers()) == 20 && len(e.running()) == 20
	})
}

func TestWatchURLSourceKeepsLastGood(t *testing.T) {
	e := newEnv(t)
	var failing atomic.Bool
	manifest := sleepPod("fromurl", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		w.Write([]byte(manifest))
	}))
	defer srv.Close()

	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{"--url", srv.URL, "--http-check-frequency", "1s", "--sync-frequency", "10s", "--healthz-port", strconv.Itoa(port)}
	// failedFetch waits until the running watch has seen the URL fail:
	// from then on its pods are what podrun does with a failing URL.
	failedFetch := func() {
		waitFor(t, "a failed fetch of the URL", time.Minute, func() bool {
			return metric(t, base, "podrun_source_errors_total", map[string]string{"source": srv.URL}) >= 1
		})
	}
	cmd, _ := e.start("watch", args...)
	waitFor(t, "the URL's pod", time.Minute, func() bool { return len(e.running()) == 2 })
	before := e.running()

	failing.Store(true)
	failedFetch()
	if now := e.running(); !sameIDs(now, before) {
		t.Fatalf("a failing URL changed its pods:\nbefore %v\nafter  %v", before, now)
	}

	// A podrun restarted while its URL is down keeps the URL's pods.
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	srv.Close()
	cmd, _ = e.start("watch", args...)
	failedFetch()
	if now := e.running(); !sameIDs(now, before) {
		t.Fatalf("restart with the URL down changed its pods:\nbefore %v\nafter  %v", before, now)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// TestPreStopHookRunsOnRemoval: deleting a manifest stops its pod
// gracefully, running the preStop hook first.
func TestPreStopHookRunsOnRemoval(t *testing.T) {
	e := newEnv(t)
	out := t.TempDir()
	p := e.write("hook.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hook}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: %s
    command: ["sleep", "3600"]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo stopping-$(hostname) > /out/prestop"]}
    volumeMounts: [{name: out, mountPath: /out}]
  volumes:
  - name: out
    hostPath: {path: %s, type: Directory}
`, testImage, out))
	stop := e.watch()
	defer stop(syscall.SIGTERM)
	waitFor(t, "the pod", time.Minute, func() bool { return len(e.running()) == 2 })
	os.Remove(p)
	waitFor(t, "the pod to be removed", time.Minute, func() bool { return len(e.containers()) == 0 })
	b, err := os.ReadFile(filepath.Join(out, "prestop"))
	if err != nil || strings.TrimSpace(string(b)) != "stopping-hook-"+e.node {
		t.Fatalf("preStop hook output %q, %v", b, err)
	}
}

// TestWatchDropsUnknownFieldsAndSaysSo: as the kubelet, watch runs a pod
// whose manifest has a field the Pod type lacks, without it; /pods and
// `ps -o wide` say what was dropped, where. With --strict the pod is refused.
func TestWatchDropsUnknownFieldsAndSaysSo(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", strings.Replace(sleepPod("a", 1), "  containers:\n", "  colour: blue\n  containers:\n", 1))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	e.waitSynced("a")
	warning := filepath.Join(e.dir, "a.yaml") + ":"
	got := e.pods()["a-"+e.node].Annotations["podrun.io/manifest-warnings"]
	if !strings.HasPrefix(got, warning) || !strings.HasSuffix(got, ": spec.colour: unknown field, ignored") {
		t.Errorf("/pods warnings = %q, want %s<line>: spec.colour: unknown field, ignored", got, warning)
	}
	ps := e.podrun(time.Minute, "ps", "-o", "wide")
	if ps.code != 0 || !strings.Contains(ps.stdout, "default/a-"+e.node+": warning: "+warning) {
		t.Errorf("ps -o wide: exit %d\n%s\n%s", ps.code, ps.stdout, ps.stderr)
	}

	strict := e.podrun(time.Minute, "validate", "--strict", e.dir)
	if strict.code != 2 || !strings.Contains(strict.stderr, "spec.colour: unknown field") {
		t.Errorf("validate --strict: exit %d\n%s", strict.code, strict.stderr)
	}
}
