package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/health"
)

// watchWithServer starts `podrun watch` on the env's manifest dir with its
// HTTP server on a free port, and returns that port's base URL.
func (e *env) watchWithServer(extra ...string) (base string, stop func(syscall.Signal)) {
	port := freePort(e.t)
	stop = e.watch(append([]string{"--healthz-port", strconv.Itoa(port)}, extra...)...)
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(e.t, "the HTTP server", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return base, stop
}

// pods fetches the watch's /pods, from its socket in the root dir.
func (e *env) pods() map[string]v1.Pod {
	t := e.t
	t.Helper()
	resp, err := health.SocketClient(filepath.Join(e.root, health.SocketName), 30*time.Second).Get("http://podrun/pods")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

func podReady(p v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// execIn runs a command in the running container name of the env's pod.
func (e *env) execIn(pod, name string, cmd ...string) {
	e.t.Helper()
	id := e.running()[pod+"/"+name]
	if id == "" {
		e.t.Fatalf("no running %s/%s", pod, name)
	}
	ctx := context.Background()
	ex, err := docker.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := docker.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{}); err != nil {
		e.t.Fatal(err)
	}
	waitFor(e.t, "exec to finish", 10*time.Second, func() bool {
		ins, err := docker.ContainerExecInspect(ctx, ex.ID)
		return err == nil && !ins.Running
	})
}

func TestLivenessProbeRestartsWithBackoff(t *testing.T) {
	e := newEnv(t)
	e.write("live.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; sleep 3600"]
    livenessProbe:
      exec: {command: ["test", "-f", "/tmp/healthy"]}
      periodSeconds: 1
      failureThreshold: 1
`, testImage))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "live-" + e.node
	// As in the kubelet, the sync that kills for the probe starts the
	// successor, subject to the back-off counted from the run that exited
	// before: the first two restarts do not wait (before the first kill
	// nothing had exited; the second start is the first to count), a later
	// one does, once the back-off outlasts a run.
	var held *v1.ContainerStatus
	waitFor(t, "a liveness restart held by the back-off", 3*time.Minute, func() bool {
		p, ok := e.pods()[name]
		if !ok || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			held = &cs
			return true
		}
		return false
	})
	if held.RestartCount < 2 {
		t.Fatalf("back-off after %d restarts; the first two liveness restarts do not wait", held.RestartCount)
	}
	var cs v1.ContainerStatus
	waitFor(t, "the restart after the back-off", 2*time.Minute, func() bool {
		p, ok := e.pods()[name]
		if !ok || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs = p.Status.ContainerStatuses[0]
		return cs.RestartCount > held.RestartCount && cs.State.Running != nil
	})
	last := cs.LastTerminationState.Terminated
	if last == nil {
		t.Fatalf("no lastState after a restart: %+v", cs)
	}
	// The held restart waits out the back-off (10 s at least) counted from
	// the end of the run the probe killed.
	if gap := cs.State.Running.StartedAt.Sub(last.FinishedAt.Time); gap < 9*time.Second {
		t.Fatalf("restarted %s after the kill; the back-off is 10 s", gap)
	}
}

func TestReadinessFlipsBothWays(t *testing.T) {
	e := newEnv(t)
	e.write("ready.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: %s
    command: ["sh", "-c", "mkdir -p /www && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /ready, port: http}
      periodSeconds: 1
      failureThreshold: 1
`, testImage))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "web-" + e.node
	waitFor(t, "the pod running, not ready", time.Minute, func() bool {
		p, ok := e.pods()[name]
		return ok && p.Status.Phase == v1.PodRunning && !podReady(p)
	})
	psReady := func(want string) func() bool {
		return func() bool {
			r := e.podrun(30*time.Second, "ps")
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.Contains(line, name) {
					return strings.Fields(line)[2] == want
				}
			}
			return false
		}
	}
	waitFor(t, "ps to show 0/1", 30*time.Second, psReady("0/1"))

	e.execIn("web", "httpd", "touch", "/www/ready")
	waitFor(t, "Ready", 30*time.Second, func() bool { return podReady(e.pods()[name]) })
	waitFor(t, "ps to show 1/1", 30*time.Second, psReady("1/1"))

	e.execIn("web", "httpd", "rm", "/www/ready")
	waitFor(t, "not Ready again", 30*time.Second, func() bool { return !podReady(e.pods()[name]) })
	waitFor(t, "ps to show 0/1 again", 30*time.Second, psReady("0/1"))
}

func TestStartupProbeDelaysLiveness(t *testing.T) {
	e := newEnv(t)
	// Liveness alone would kill the container at its first probe; the
	// startup probe holds it back until the file appears (after 4 s).
	e.write("slow.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "sleep 4; touch /tmp/up; sleep 3600"]
    startupProbe:
      exec: {command: ["test", "-f", "/tmp/up"]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: ["test", "-f", "/tmp/up"]}
      periodSeconds: 1
      failureThreshold: 1
`, testImage))
	base, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "slow-" + e.node
	waitFor(t, "started and ready", time.Minute, func() bool {
		p, ok := e.pods()[name]
		if !ok || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.Started != nil && *cs.Started && cs.Ready
	})
	// Liveness runs only once the startup probe passed; three passing
	// runs of it since (one a second) leave time for a kill that an early
	// liveness run would have caused to show.
	waitFor(t, "three liveness runs", time.Minute, func() bool {
		return metric(t, base, "podrun_probe_results_total", map[string]string{"probe_type": "Liveness", "result": "success"}) >= 3
	})
	if cs := e.pods()[name].Status.ContainerStatuses[0]; cs.RestartCount != 0 {
		t.Fatalf("liveness ran before the startup probe passed: restartCount %d", cs.RestartCount)
	}
}

func TestOnceWaitReady(t *testing.T) {
	e := newEnv(t)
	pod := func(name, delay string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "sleep %s; touch /tmp/ready; sleep 3600"]
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/ready"]}
      periodSeconds: 1
`, name, testImage, delay)
	}
	soon := e.write("soon.yaml", pod("soon", "2"))
	r := e.podrun(2*time.Minute, "once", "--wait", "ready", "--timeout", "60s", soon)
	if r.code != 0 {
		t.Fatalf("--wait ready: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	never := e.write("never.yaml", pod("never", "3600"))
	r = e.podrun(2*time.Minute, "once", "--wait", "ready", "--timeout", "8s", never)
	if r.code != 1 {
		t.Fatalf("--wait ready that never comes: want exit 1, got %d\n%s", r.code, r.stderr)
	}
	contains(t, "stderr", r.stderr, "timed out")
}

func TestServerEndpoints(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", sleepPod("a", 1))
	base, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	waitFor(t, "the pod", time.Minute, func() bool { return len(e.running()) == 2 })

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, series := range []string{"podrun_pod_sync_duration_seconds_bucket", "podrun_pod_starts_total 1",
		"podrun_container_starts_total 1", "podrun_runtime_calls_total{method=",
		"podrun_source_last_success_timestamp_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// A watch collects garbage at GOGC=50 unless GOGC is set.
	if _, set := os.LookupEnv("GOGC"); !set && !strings.Contains(body, "\ngo_gc_gogc_percent 50\n") {
		t.Errorf("/metrics: want go_gc_gogc_percent 50 (a watch's default)")
	}
	if _, ok := e.pods()["a-"+e.node]; !ok {
		t.Errorf("/pods lacks the pod")
	}

	// A URL source that never answers keeps /readyz failing.
	stop(syscall.SIGTERM)
	port := freePort(t)
	stop2 := e.watch("--healthz-port", strconv.Itoa(port), "--url", "http://127.0.0.1:1/none", "--http-check-frequency", "1s")
	defer stop2(syscall.SIGTERM)
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, "the server", 30*time.Second, func() bool { _, err := http.Get(base + "/healthz"); return err == nil })
	waitFor(t, "a failed fetch of the URL", 30*time.Second, func() bool {
		return metric(t, base, "podrun_source_errors_total", nil) >= 1
	})
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a URL that never answered: %d, want 503", code)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}

func TestLogsPrevious(t *testing.T) {
	e := newEnv(t)
	e.write("crash.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo run-$(cat /proc/sys/kernel/random/uuid); sleep 1; exit 1"]
`, testImage))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	waitFor(t, "a restart", time.Minute, func() bool {
		p, ok := e.pods()["crash-"+e.node]
		return ok && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	prev := e.podrun(30*time.Second, "logs", "crash", "--previous")
	cur := e.podrun(30*time.Second, "logs", "crash-"+e.node)
	if prev.code != 0 || cur.code != 0 {
		t.Fatalf("logs: %d %d\n%s%s", prev.code, cur.code, prev.stderr, cur.stderr)
	}
	if !strings.HasPrefix(prev.stdout, "run-") || prev.stdout == cur.stdout {
		t.Fatalf("--previous %q, current %q", prev.stdout, cur.stdout)
	}
}

// metric sums the samples of the series name on base's /metrics whose
// labels include every pair of labels: a counter the test waits on to
// know podrun has done a thing (read a broken source, run a probe), where
// nothing else shows it. It is -1 while the server does not answer.
func metric(t *testing.T, base, name string, labels map[string]string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if hasLabels(m.GetLabel(), labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabels(have []*dto.LabelPair, want map[string]string) bool {
	found := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
