package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// webPod: an init container renders fieldRef env into an emptyDir, httpd
// serves it on a hostPort.
func webPod(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: render
    image: %[2]s
    command: ["sh", "-c", "echo pod=$(POD_NAME) node=$(NODE) ns=$NS > /www/index.html"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: NS
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    volumeMounts: [{name: www, mountPath: /www}]
  containers:
  - name: httpd
    image: %[2]s
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    ports: [{containerPort: 8080, hostPort: %[3]d, hostIP: 127.0.0.1}]
    volumeMounts: [{name: www, mountPath: /www, readOnly: true}]
  volumes:
  - name: www
    emptyDir: {}
`, name, testImage, port)
}

func hostNetPod(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: kube-system
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: srv
    image: %[2]s
    command: ["sh", "-c", "mkdir -p /w && hostname > /w/index.html && exec httpd -f -p 127.0.0.1:%[3]d -h /w"]
`, name, testImage, port)
}

func sleepPod(name string, containers int) string {
	s := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
`, name)
	for i := 0; i < containers; i++ {
		s += fmt.Sprintf("  - {name: c%d, image: %s, command: [sleep, \"3600\"]}\n", i, testImage)
	}
	return s
}

func jobPod(name string, exit int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  containers:
  - name: job
    image: %s
    command: ["sh", "-c", "echo working; exit %d"]
`, name, testImage, exit)
}

func TestOnceMultiPodAndIdempotent(t *testing.T) {
	e := newEnv(t)
	webPort, hostPort := freePort(t), freePort(t)
	e.write("pods.yaml", webPod("web", webPort)+"---\n"+hostNetPod("hostnet", hostPort))

	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "web-"+e.node, "hostnet-"+e.node, "Running", "render (init)", "Terminated (Completed)")

	body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", webPort))
	contains(t, "served page", body, "pod=web-"+e.node, "node="+e.node, "ns=default")
	hostname, _ := os.Hostname()
	body = httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort))
	contains(t, "hostNetwork pod's page", body, hostname)

	before := ids(e)
	// web: sandbox, render, httpd; hostnet: sandbox, srv.
	if len(before) != 5 {
		t.Fatalf("want 5 containers, got %d: %v", len(before), before)
	}
	r = e.podrun(2*time.Minute, "once", e.dir, "--timeout", "1m")
	if r.code != 0 {
		t.Fatalf("second once: exit %d\n%s", r.code, r.stderr)
	}
	if after := ids(e); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("second once changed containers:\nbefore %v\nafter  %v", before, after)
	}
}

// ids returns the sorted IDs of the node's containers.
func ids(e *env) []string {
	var out []string
	for _, c := range e.containers() {
		out = append(out, c.ID)
	}
	sort.Strings(out)
	return out
}

// TestOnceStrictUnknownFieldStartsNothing: with --strict an unknown field
// is bad input, and nothing of any argument starts.
func TestOnceStrictUnknownFieldStartsNothing(t *testing.T) {
	e := newEnv(t)
	e.write("good.yaml", sleepPod("good", 1))
	p := e.write("bad.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: bad
spec:
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicyy: Never
`)
	r := e.podrun(time.Minute, "once", "--strict", e.dir)
	if r.code != 2 {
		t.Fatalf("want exit 2, got %d\n%s", r.code, r.stderr)
	}
	contains(t, "stderr", r.stderr, p+":9", "imagePullPolicyy")
	if n := len(e.containers()); n != 0 {
		t.Fatalf("bad input started %d containers", n)
	}
}

func TestOnceWaitComplete(t *testing.T) {
	e := newEnv(t)
	fail := e.write("fail.yaml", jobPod("fails", 3))
	r := e.podrun(2*time.Minute, "once", "--wait", "complete", "--timeout", "90s", fail)
	if r.code != 1 {
		t.Fatalf("exit-3 job: want exit 1, got %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "Failed", "Terminated (Error)", " 3")

	ok := filepath.Join(t.TempDir(), "ok.yaml")
	os.WriteFile(ok, []byte(jobPod("succeeds", 0)), 0o644)
	r = e.podrun(2*time.Minute, "once", "--wait", "complete", "--timeout", "90s", "-o", "json", ok)
	if r.code != 0 {
		t.Fatalf("exit-0 job: want exit 0, got %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "json report", r.stdout, `"phase": "Succeeded"`, `"reason": "Completed"`)
}

func TestOnceRmRemovesFinishedPod(t *testing.T) {
	e := newEnv(t)
	p := e.write("job.yaml", jobPod("job", 0))
	r := e.podrun(2*time.Minute, "once", "--wait", "complete", "--rm", p)
	if r.code != 0 {
		t.Fatalf("once --rm: exit %d\n%s", r.code, r.stderr)
	}
	if n := len(e.containers()); n != 0 {
		t.Fatalf("--rm left %d containers", n)
	}
	assertNoPodDirs(t, e)
}

func assertNoPodDirs(t *testing.T, e *env) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.root, "pods"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("pod directories left: %d", len(entries))
	}
}

func TestDownRemovesEverything(t *testing.T) {
	e := newEnv(t)
	e.write("web.yaml", webPod("web", freePort(t)))
	e.write("sleep.yaml", sleepPod("sleeper", 2))
	if r := e.podrun(2*time.Minute, "once", e.dir); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	if len(e.containers()) == 0 {
		t.Fatal("nothing started")
	}
	r := e.podrun(time.Minute, "down", e.dir)
	if r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	contains(t, "down output", r.stdout, "web-"+e.node, "sleeper-"+e.node)
	if n := len(e.containers()); n != 0 {
		t.Fatalf("down left %d containers", n)
	}
	assertNoPodDirs(t, e)

	// down --all finds pods by their labels alone.
	if r := e.podrun(2*time.Minute, "once", e.dir); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	if r := e.podrun(time.Minute, "down", "--all"); r.code != 0 {
		t.Fatalf("down --all: exit %d\n%s", r.code, r.stderr)
	}
	if n := len(e.containers()); n != 0 {
		t.Fatalf("down --all left %d containers", n)
	}
	assertNoPodDirs(t, e)
}

// TestOnceKilledMidBringUp kills `once` with SIGKILL while it brings up ten
// pods, runs it again, and checks that every pod converged with exactly one
// sandbox and one container per declared container, all running.
func TestOnceKilledMidBringUp(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 10; i++ {
		e.write(fmt.Sprintf("p%d.yaml", i), sleepPod(fmt.Sprintf("p%d", i), 2))
	}
	// The first run is killed as its first container appears, the second
	// once it has made more than the first left (a later point of the
	// bring-up); neither waits for a fixed time.
	var logs []string
	for range 2 {
		made := len(e.containers())
		cmd, stderr := e.start("once", e.dir)
		waitFor(t, "the bring-up to go on", 2*time.Minute, func() bool { return len(e.containers()) > made })
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		logs = append(logs, stderr.String())
	}
	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once after SIGKILL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	defer func() {
		if !t.Failed() {
			return
		}
		for i, l := range logs {
			t.Logf("killed run %d logged:\n%s", i+1, l)
		}
		t.Logf("last run logged:\n%s", r.stderr)
		for _, c := range e.containers() {
			t.Logf("%s %s %s %s attempt %s created %d", c.ID[:12], c.Names, c.State, c.Status,
				c.Labels["io.podrun.attempt"], c.Created)
		}
	}()
	perPod := map[string]map[string]int{}
	for _, c := range e.containers() {
		pod := c.Labels["io.podrun.pod.name"]
		name := c.Labels["io.podrun.container.name"]
		if c.Labels["io.podrun.container.type"] == "sandbox" {
			name = "POD"
		}
		if perPod[pod] == nil {
			perPod[pod] = map[string]int{}
		}
		perPod[pod][name]++
		if c.State != "running" {
			t.Errorf("%s/%s is %s, want running", pod, name, c.State)
		}
	}
	if len(perPod) != 10 {
		t.Fatalf("want 10 pods, got %d", len(perPod))
	}
	for pod, byName := range perPod {
		for _, name := range []string{"POD", "c0", "c1"} {
			if byName[name] != 1 {
				t.Errorf("pod %s: %d of %s, want exactly 1", pod, byName[name], name)
			}
		}
	}
	if t.Failed() {
		return
	}
	// Converged for good: once again changes nothing.
	before := ids(e)
	if r := e.podrun(2*time.Minute, "once", e.dir, "--timeout", "1m"); r.code != 0 {
		t.Fatalf("once again: exit %d\n%s", r.code, r.stderr)
	}
	if after := ids(e); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("once again changed containers:\nbefore %v\nafter  %v", before, after)
	}
}

func TestBuiltInInfraImage(t *testing.T) {
	e := newEnv(t)
	e.infra = "podrun-e2e.invalid/absent-pause:none"
	e.write("sleep.yaml", sleepPod("s", 1))
	r := e.podrun(3*time.Minute, "once", e.dir)
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	var sandboxes int
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.type"] == "sandbox" {
			sandboxes++
			if !strings.HasPrefix(c.Image, "podrun/pause:") {
				t.Errorf("sandbox runs %s, want the built-in podrun/pause image", c.Image)
			}
			if c.State != "running" {
				t.Errorf("sandbox is %s", c.State)
			}
		}
	}
	if sandboxes != 1 {
		t.Fatalf("want 1 sandbox, got %d", sandboxes)
	}
}

// TestPodIPInEnv: a container's status.podIP (downward API) is the address
// its pod's sandbox has on its network, as the container itself sees it.
func TestPodIPInEnv(t *testing.T) {
	e := newEnv(t)
	e.write("ip.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ip}
spec:
  restartPolicy: Never
  containers:
  - name: job
    image: %s
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    command: ["sh", "-c", "echo \"env=$POD_IP eth0=$(ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)\""]
`, testImage))
	r := e.podrun(2*time.Minute, "once", e.dir, "--wait", "complete", "--timeout", "1m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	logs := e.podrun(30*time.Second, "logs", "ip")
	if logs.code != 0 {
		t.Fatalf("logs: exit %d\n%s", logs.code, logs.stderr)
	}
	var envIP, eth0IP string
	if _, err := fmt.Sscanf(strings.TrimSpace(logs.stdout), "env=%s eth0=%s", &envIP, &eth0IP); err != nil {
		t.Fatalf("log %q: %v", logs.stdout, err)
	}
	if net.ParseIP(envIP) == nil || envIP != eth0IP {
		t.Fatalf("POD_IP=%q, the pod's eth0 has %q", envIP, eth0IP)
	}
}
