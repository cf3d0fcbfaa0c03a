package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// The tests need a running Docker Engine (hack/setup.sh starts one and
// builds the test image). Without one they skip, except under CI, where
// they fail.

var testImage = envOr("PODRUN_TEST_IMAGE", "podrun/busybox:test")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// testMainState holds what TestMain cleans up after all tests.
var testMainState struct {
	tmp   string
	once  sync.Once
	infra string // the suite's infra image, built from testdata/pausebin
	err   error
}

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "podrun-docker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	testMainState.tmp = tmp
	code := m.Run()
	if ref := testMainState.infra; ref != "" {
		if cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err == nil {
			_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
			cli.Close()
		}
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newRuntime returns a runtime for node, after checking that Docker answers;
// at the end of the test it removes every container labelled with node.
func newRuntime(t *testing.T, node string) *Runtime {
	t.Helper()
	r, err := New(Options{NodeName: node, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		t.Fatalf("docker: %v (run hack/setup.sh; `bash hack/test.sh` does)", err)
	}
	if _, err := r.ImageStatus(ctx, testImage); err != nil {
		t.Fatalf("test image: %v (run hack/setup.sh)", err)
	}
	t.Cleanup(func() {
		removeNode(t, r.cli, node)
		r.Close()
	})
	return r
}

// removeNode force-removes every container labelled with node (and nothing
// else).
func removeNode(t *testing.T, cli *client.Client, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelNode+"="+node))})
	if err != nil {
		t.Errorf("cleanup of node %s: %v", node, err)
		return
	}
	for _, c := range cs {
		if c.Labels[LabelNode] != node {
			continue
		}
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("cleanup of node %s: %v", node, err)
		}
	}
}

// buildPauseBin builds testdata/pausebin (a stand-in for the podrun binary
// whose `pause` runs pause.Run) into dir; variant makes its hash its own.
func buildPauseBin(dir, variant string, cgo bool) (string, error) {
	out := filepath.Join(dir, "pausebin-"+variant)
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X main.variant="+variant, "./testdata/pausebin")
	cgoEnv := "CGO_ENABLED=0"
	if cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgoEnv)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build pausebin: %v\n%s", err, b)
	}
	return out, nil
}

// suiteInfraImage is the infra image the tests' sandboxes run: built once
// from a static pausebin, removed by TestMain.
func suiteInfraImage(t *testing.T, r *Runtime) string {
	t.Helper()
	st := &testMainState
	st.once.Do(func() {
		exe, err := buildPauseBin(st.tmp, "suite-"+randHex(8), false)
		if err != nil {
			st.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		st.infra, st.err = r.EnsureInfraImage(ctx, "", exe)
	})
	if st.err != nil {
		t.Fatalf("infra image: %v", st.err)
	}
	return st.infra
}

func dockerEnv(t *testing.T) enginetest.Env {
	probe := newRuntime(t, "rt-probe-"+randHex(6))
	return enginetest.Env{
		Image:      testImage,
		InfraImage: suiteInfraImage(t, probe),
		Argv:       enginetest.ShellArgv,
		CreateSandboxOnly: func(t *testing.T, rt engine.Runtime, cfg *engine.SandboxConfig) string {
			t.Helper()
			r := rt.(*Runtime)
			config, hc := r.sandboxConfig(cfg)
			id, _, _, err := r.createOrAdopt(context.Background(), objectName(cfg.Pod, SandboxContainerName, cfg.Attempt), cfg.Pod, SandboxContainerName, config, hc)
			if err != nil {
				t.Fatal(err)
			}
			return id
		},
	}
}

func TestConformance(t *testing.T) {
	env := dockerEnv(t)
	enginetest.Run(t, func(t *testing.T, node string) engine.Runtime { return newRuntime(t, node) }, env)
}

// pod is a test pod on its own node.
type pod struct {
	t    *testing.T
	r    *Runtime
	sb   *engine.SandboxConfig
	sbID string
}

func newPod(t *testing.T, mutate func(*engine.SandboxConfig)) *pod {
	t.Helper()
	r := newRuntime(t, "rt-"+randHex(8))
	name := "p" + randHex(6)
	sb := &engine.SandboxConfig{
		Pod:      engine.PodRef{UID: randHex(32), Name: name, Namespace: "default"},
		Hash:     "h",
		Image:    suiteInfraImage(t, r),
		Hostname: name,
		Labels:   map[string]string{"app": "web", "app.kubernetes.io/name": "x"},
	}
	if mutate != nil {
		mutate(sb)
	}
	id, err := r.RunSandbox(context.Background(), sb)
	if err != nil {
		t.Fatalf("RunSandbox: %v", err)
	}
	return &pod{t: t, r: r, sb: sb, sbID: id}
}

// run creates and starts a container and returns its ID.
func (p *pod) run(cfg *engine.ContainerConfig) string {
	p.t.Helper()
	if cfg.Image == "" {
		cfg.Image = testImage
	}
	if cfg.Type == "" {
		cfg.Type = engine.ContainerTypeApp
	}
	ctx := context.Background()
	id, err := p.r.CreateContainer(ctx, p.sbID, p.sb, cfg)
	if err != nil {
		p.t.Fatalf("CreateContainer %s: %v", cfg.Name, err)
	}
	if err := p.r.StartContainer(ctx, id); err != nil {
		p.t.Fatalf("StartContainer %s: %v", cfg.Name, err)
	}
	return id
}

// wait waits for a container to exit and returns it.
func (p *pod) wait(id string) *engine.Container {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs, err := p.r.ListContainers(context.Background())
		if err != nil {
			p.t.Fatal(err)
		}
		for _, c := range cs {
			if c.ID == id && c.State == engine.StateExited {
				return c
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("container %.12s did not exit", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// output runs a container to its end and returns its stdout and stderr.
func (p *pod) output(cfg *engine.ContainerConfig) (string, string, *engine.Container) {
	p.t.Helper()
	id := p.run(cfg)
	c := p.wait(id)
	var out, errOut bytes.Buffer
	if err := p.r.ContainerLogs(context.Background(), id, engine.LogOptions{Tail: -1}, &out, &errOut); err != nil {
		p.t.Fatalf("logs: %v", err)
	}
	return out.String(), errOut.String(), c
}

func (p *pod) sandbox() *engine.Sandbox {
	p.t.Helper()
	sbs, err := p.r.ListSandboxes(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.ID == p.sbID {
			return sb
		}
	}
	p.t.Fatalf("sandbox %s not listed", p.sbID)
	return nil
}

func TestSandboxNetworkSharing(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	ip := p.sandbox().IP
	if ip == "" {
		t.Fatal("sandbox has no IP")
	}
	out, _, _ := p.output(&engine.ContainerConfig{Name: "net", Command: []string{"sh", "-c", "hostname; ip -4 -o addr show eth0; echo pid=$$"}})
	if !strings.HasPrefix(out, p.sb.Hostname+"\n") {
		t.Errorf("the container's hostname: %q, want the pod's %q", out, p.sb.Hostname)
	}
	if !strings.Contains(out, " "+ip+"/") {
		t.Errorf("the container's eth0: %q, want the sandbox's IP %s", out, ip)
	}
	// Its own PID namespace by default: the shell is PID 1.
	if !strings.Contains(out, "pid=1\n") {
		t.Errorf("container without shareProcessNamespace: %q, want its shell as PID 1", out)
	}
}

// TestStoppedSandboxShowsNoAddress: a sandbox is listed exited with no IP
// from its die event on. Docker's list lags the event (exits.go) and, until
// it catches up, still holds the address: a look then and one after would
// differ for one dead sandbox, and the relist, which has no event for the
// second, would take it for a change the events missed.
func TestStoppedSandboxShowsNoAddress(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	if p.sandbox().IP == "" {
		t.Fatal("a running sandbox has no IP")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs := p.r.Events(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- p.r.StopSandbox(ctx, p.sbID, time.Second) }()
	look := func(when string) {
		t.Helper()
		sbs, _, err := p.r.ListPodObjects(ctx, p.sb.Pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 1 {
			t.Fatalf("%s: %d sandboxes listed, want 1", when, len(sbs))
		}
		if sb := sbs[0]; sb.State != engine.StateExited || sb.IP != "" {
			t.Errorf("%s: the sandbox is %s with IP %q, want exited with none", when, sb.State, sb.IP)
		}
	}
	for died := false; !died; {
		select {
		case ev := <-evs:
			died = ev.ContainerID == p.sbID && ev.Action == "die"
		case <-ctx.Done():
			t.Fatal("no die event of the stopped sandbox")
		}
	}
	look("at its die event")
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	look("once stopped")
}

func TestShareProcessNamespace(t *testing.T) {
	t.Parallel()
	p := newPod(t, func(sb *engine.SandboxConfig) { sb.ShareProcessNamespace = true })
	out, _, _ := p.output(&engine.ContainerConfig{Name: "ps", Command: []string{"sh", "-c", "tr '\\0' ' ' </proc/1/cmdline; echo; echo pid=$$"}})
	if !strings.Contains(out, "pause") || strings.Contains(out, "pid=1\n") {
		t.Errorf("with shareProcessNamespace: %q, want the sandbox's pause as PID 1", out)
	}
}

func TestHostNetwork(t *testing.T) {
	t.Parallel()
	p := newPod(t, func(sb *engine.SandboxConfig) { sb.HostNetwork = true })
	if ip := p.sandbox().IP; ip != "" {
		t.Errorf("host-network sandbox IP = %q, want \"\" (the caller uses the host's)", ip)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := p.output(&engine.ContainerConfig{Name: "h", Command: []string{"hostname"}})
	if strings.TrimSpace(out) != host {
		t.Errorf("hostname in a host-network pod = %q, want the host's %q", out, host)
	}
}

func TestHostPIDAndIPC(t *testing.T) {
	t.Parallel()
	p := newPod(t, func(sb *engine.SandboxConfig) { sb.HostPID, sb.HostIPC = true, true })
	out, _, _ := p.output(&engine.ContainerConfig{Name: "h", Command: []string{"sh", "-c", "echo pid=$$; readlink /proc/self/ns/ipc"}})
	hostIPC, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "pid=1\n") || !strings.Contains(out, hostIPC) {
		t.Errorf("hostPID+hostIPC pod: %q, want a host PID and the host's IPC namespace %s", out, hostIPC)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestHostPort(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	p := newPod(t, func(sb *engine.SandboxConfig) {
		sb.Ports = []engine.PortMapping{
			{Protocol: "TCP", ContainerPort: 8080, HostPort: int32(port), HostIP: "127.0.0.1"},
			{Protocol: "TCP", ContainerPort: 9090}, // no host port: not published
		}
	})
	p.run(&engine.ContainerConfig{Name: "web", Command: []string{"sh", "-c",
		"mkdir -p /tmp/www && echo hello-from-pod >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}})
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(20 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.TrimSpace(string(body)) != "hello-from-pod" {
				t.Fatalf("GET %s: %q", url, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ins, err := p.r.cli.ContainerInspect(context.Background(), p.sbID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.HostConfig.PortBindings) != 1 {
		t.Errorf("port bindings %v, want only the one with a host port", ins.HostConfig.PortBindings)
	}
}

func TestCommandAndArgs(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	// The image's CMD is /bin/sh: a command without args must not get it
	// appended (Kubernetes: command replaces entrypoint and cmd).
	out, _, _ := p.output(&engine.ContainerConfig{Name: "cmd", Command: []string{"echo", "hi"}})
	if out != "hi\n" {
		t.Errorf("command only: %q, want \"hi\\n\"", out)
	}
	out, _, _ = p.output(&engine.ContainerConfig{Name: "args", Args: []string{"echo", "only", "args"}})
	if out != "only args\n" {
		t.Errorf("args only: %q", out)
	}
	out, errOut, _ := p.output(&engine.ContainerConfig{Name: "both", Command: []string{"sh", "-c"}, Args: []string{"echo out; echo err >&2"}})
	if out != "out\n" || errOut != "err\n" {
		t.Errorf("stdout %q, stderr %q; want out, err", out, errOut)
	}
	// A TTY has one stream, not multiplexed: it all comes out on stdout.
	out, errOut, _ = p.output(&engine.ContainerConfig{Name: "tty", TTY: true, Command: []string{"sh", "-c", "echo out; echo err >&2"}})
	if out != "out\r\nerr\r\n" || errOut != "" {
		t.Errorf("tty: stdout %q, stderr %q", out, errOut)
	}
}

func TestContainerSettings(t *testing.T) {
	t.Parallel()
	p := newPod(t, func(sb *engine.SandboxConfig) {
		sb.DNS = &engine.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"ns.svc.example"}, Options: []string{"ndots:5"}}
		sb.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "80"}
		// Positive scores: every machine may set them.
		sb.OOMScoreAdj = 300
	})
	in, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "f"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file mounted at /etc/hosts replaces the one Docker gives a
	// container joining the sandbox's network (podrun mounts the pod's).
	hosts := filepath.Join(t.TempDir(), "etc-hosts")
	if err := os.WriteFile(hosts, []byte("192.0.2.10\tdb.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(profile, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	uid, gid := int64(1000), int64(1001)
	script := `id -u; id -g; id -G; pwd; echo "$FOO"; cat /in/f; touch /out/x && echo wrote-out;
touch /in/y 2>/dev/null || echo ro-in; touch /rootfs 2>/dev/null || echo ro-rootfs;
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' ';
cat /etc/resolv.conf; grep db.example /etc/hosts; cat /proc/sys/net/ipv4/ip_unprivileged_port_start;
echo "oom=$(cat /proc/self/oom_score_adj)"`
	stdout, stderr, c := p.output(&engine.ContainerConfig{
		Name:       "settings",
		Command:    []string{"sh", "-c", script},
		Env:        []engine.EnvVar{{Name: "FOO", Value: "bar baz"}},
		WorkingDir: "/tmp",
		Mounts: []engine.Mount{
			{HostPath: in, ContainerPath: "/in", ReadOnly: true},
			{HostPath: out, ContainerPath: "/out", Propagation: "rprivate"},
			{HostPath: hosts, ContainerPath: "/etc/hosts"},
		},
		Resources:   engine.Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20},
		OOMScoreAdj: 500,
		Security: engine.SecurityConfig{
			RunAsUser: &uid, RunAsGroup: &gid, SupplementalGroups: []int64{2000},
			ReadOnlyRootfs: true, NoNewPrivileges: true, CapDrop: []string{"ALL"},
			Seccomp: profile,
		},
		Labels: map[string]string{"extra": "1", LabelNode: "spoofed"},
	})
	if c.ExitCode != 0 {
		t.Fatalf("exit %d; stdout %q stderr %q", c.ExitCode, stdout, stderr)
	}
	for _, want := range []string{
		"1000\n1001\n", "1001 2000\n", "/tmp\n", "bar baz\n", "from-host\n", "wrote-out\n", "ro-in\n", "ro-rootfs\n",
		"NoNewPrivs: 1\n", "Seccomp: 2\n", // filtered: the profile, not unconfined (0)
		"nameserver 192.0.2.53", "search ns.svc.example", "options ndots:5", "192.0.2.10\tdb.example\n", "\n80\n",
		"oom=500\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s\nstderr: %s", want, stdout, stderr)
		}
	}

	ins, err := p.r.cli.ContainerInspect(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if hc.CPUShares != 256 || hc.CPUQuota != 50000 || hc.CPUPeriod != 100000 || hc.Memory != 64<<20 {
		t.Errorf("resources: shares %d quota %d period %d memory %d", hc.CPUShares, hc.CPUQuota, hc.CPUPeriod, hc.Memory)
	}
	if hc.RestartPolicy.Name != "no" {
		t.Errorf("restart policy %q, want no", hc.RestartPolicy.Name)
	}
	if want := "container:" + p.sbID; string(hc.NetworkMode) != want || string(hc.IpcMode) != want {
		t.Errorf("network %q, ipc %q; want %q", hc.NetworkMode, hc.IpcMode, want)
	}
	if ins.Config.Labels[LabelNode] != p.r.node || ins.Config.Labels["extra"] != "1" {
		t.Errorf("labels %v: the identity labels must win over extra ones, which are kept", ins.Config.Labels)
	}
	if ins.Name != "/"+objectName(p.sb.Pod, "settings", 0) {
		t.Errorf("name %q", ins.Name)
	}
	sb, err := p.r.cli.ContainerInspect(context.Background(), p.sbID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Config.Labels[LabelPodLabelPrefix+"app.kubernetes.io/name"] != "x" || sb.Config.Labels[LabelContainerType] != TypeSandbox {
		t.Errorf("sandbox labels %v", sb.Config.Labels)
	}
	if string(sb.HostConfig.IpcMode) != "shareable" {
		t.Errorf("sandbox IPC mode %q, want shareable", sb.HostConfig.IpcMode)
	}
	if sb.HostConfig.OomScoreAdj != 300 {
		t.Errorf("sandbox oom_score_adj %d, want 300", sb.HostConfig.OomScoreAdj)
	}
}

func TestSeccompUnconfinedAndBadProfile(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	out, _, _ := p.output(&engine.ContainerConfig{Name: "unconf", Command: []string{"grep", "^Seccomp:", "/proc/self/status"},
		Security: engine.SecurityConfig{Seccomp: "unconfined"}})
	if !strings.Contains(out, "0") {
		t.Errorf("unconfined: %q, want Seccomp 0", out)
	}
	_, err := p.r.CreateContainer(context.Background(), p.sbID, p.sb, &engine.ContainerConfig{Name: "bad", Image: testImage,
		Security: engine.SecurityConfig{Seccomp: "/no/such/profile.json"}})
	if err == nil {
		t.Errorf("a missing seccomp profile: nil error")
	}
}

func TestUpdateResourcesApplied(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	id := p.run(&engine.ContainerConfig{Name: "u", Command: []string{"sleep", "3600"},
		Resources: engine.Resources{CPUShares: 512, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimit: 32 << 20}})
	ctx := context.Background()
	if err := p.r.UpdateContainerResources(ctx, id, &engine.Resources{CPUShares: 128, MemoryLimit: 48 << 20}); err != nil {
		t.Fatal(err)
	}
	ins, err := p.r.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if hc.CPUShares != 128 || hc.Memory != 48<<20 || hc.CPUQuota > 0 {
		t.Errorf("after update: shares %d memory %d quota %d; want 128, 48 MiB, no quota", hc.CPUShares, hc.Memory, hc.CPUQuota)
	}
	if !ins.State.Running {
		t.Errorf("not running after an update")
	}
}

func TestExecOutputBoundedAndMissingCommand(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	id := p.run(&engine.ContainerConfig{Name: "x", Command: []string{"sleep", "3600"}})
	ctx := context.Background()
	code, out, err := p.r.Exec(ctx, id, []string{"sh", "-c", "head -c 100000 /dev/zero; echo err >&2; exit 5"})
	if err != nil || code != 5 || len(out) != MaxExecOutput {
		t.Errorf("Exec of a chatty command = %d, %d bytes, %v; want 5, %d bytes", code, len(out), err, MaxExecOutput)
	}
	code, out, err = p.r.Exec(ctx, id, []string{"/no/such/command"})
	if err != nil || (code != 126 && code != 127) {
		t.Errorf("Exec of a missing command = %d, %q, %v; want 126 or 127", code, out, err)
	}
	// A command outliving ctx: Exec returns ctx's error.
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := p.r.Exec(tctx, id, []string{"sleep", "30"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec past its deadline = %v, want DeadlineExceeded", err)
	}
	// Not a speed check: an Exec that waited for its command would take
	// the command's 30 s.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Exec returned %s after its deadline: it waited for the command", took)
	}
}

func TestEventsOOM(t *testing.T) {
	// Not parallel: Docker's oom event races with the exit under load.
	// Docker 20.10 on cgroup v2 sometimes misses an OOM kill altogether
	// (exit 137, no oom event, State.OOMKilled false): then there is
	// nothing to forward, and the kill is tried again. What must never
	// happen is an OOM kill Docker knew of (OOMKilled true) whose event
	// did not reach us.
	const tries = 3
	for try := 1; try <= tries; try++ {
		seen, oomKilled := oomTrial(t)
		if seen["oom"] {
			return
		}
		if oomKilled {
			t.Fatalf("Docker reports the container OOM-killed, but the events seen were %v: the oom event was lost", seen)
		}
		t.Logf("try %d: Docker did not notice the OOM kill (events %v, OOMKilled false); again", try, seen)
	}
	t.Fatalf("Docker noticed none of %d OOM kills", tries)
}

// oomTrial runs a container that outgrows its memory limit and returns the
// events seen for it (until its die, and a moment after for a late oom) and
// whether Docker says it was OOM-killed.
func oomTrial(t *testing.T) (map[string]bool, bool) {
	p := newPod(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := p.r.Events(ctx)
	id := p.run(&engine.ContainerConfig{Name: "hog", Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"},
		Resources: engine.Resources{MemoryLimit: 8 << 20}})
	deadline := time.After(30 * time.Second)
	var late <-chan time.Time // after die: how long an oom may still come
	seen := map[string]bool{}
	for !seen["oom"] {
		select {
		case ev := <-evs:
			if ev.ContainerID == id {
				seen[ev.Action] = true
				if ev.Action == "die" && late == nil {
					late = time.After(5 * time.Second)
				}
			}
		case <-late:
			ins, err := p.r.cli.ContainerInspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return seen, ins.State.OOMKilled
		case <-deadline:
			t.Fatalf("events seen for the container: %v, want die (and oom)", seen)
		}
	}
	return seen, true
}

func TestPullFailure(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, "rt-"+randHex(8))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, auth := range []*engine.AuthConfig{nil, {Username: "u", Password: "p"}} {
		start := time.Now()
		_, err := r.PullImage(ctx, "podrun.invalid/no-such-image:1", auth)
		if err == nil {
			t.Fatalf("pulling a missing image: nil error")
		}
		if !strings.Contains(err.Error(), "podrun.invalid/no-such-image") {
			t.Errorf("pull error does not name the image: %v", err)
		}
		t.Logf("pull error after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Errorf("New without a node name: nil error")
	}
	r, err := New(Options{Host: "unix://" + filepath.Join(t.TempDir(), "no.sock"), NodeName: "n", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if err := r.Ping(ctx); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Ping of a missing engine = %v, want ErrUnavailable", err)
	}
	if _, err := r.ListContainers(ctx); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("ListContainers of a missing engine = %v, want ErrUnavailable", err)
	}
}

// countingTransport counts the engine requests by kind.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

var apiPath = regexp.MustCompile(`^/v[0-9.]+`)

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := apiPath.ReplaceAllString(req.URL.Path, "")
	kind := req.Method + " " + p
	switch {
	case p == "/containers/json":
		kind = "list"
	case strings.HasPrefix(p, "/containers/") && strings.HasSuffix(p, "/json"):
		kind = "inspect"
	}
	c.mu.Lock()
	c.n[kind]++
	c.mu.Unlock()
	return c.base.RoundTrip(req)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// countingRuntime is a Runtime of node whose engine requests ct counts.
func countingRuntime(t *testing.T, node string) (*Runtime, *countingTransport) {
	t.Helper()
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		t.Skip("counts requests on the unix socket only")
	}
	sock := strings.TrimPrefix(envOr("DOCKER_HOST", "unix:///var/run/docker.sock"), "unix://")
	ct := &countingTransport{n: map[string]int{}, base: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithHTTPClient(&http.Client{Transport: ct}), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	r, err := New(Options{NodeName: node, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.cli = cli
	return r, ct
}

// A process pings once, asks docker info once, however many of its
// readers ask together, and a container of a sandbox it made needs no inspect of that
// sandbox: each was a round trip before a `once` started its first pod.
func TestInfoAndPlacementAskedOnce(t *testing.T) {
	t.Parallel()
	r, ct := countingRuntime(t, "rt-"+randHex(8))
	ctx := context.Background()
	if err := r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := r.CgroupDriver(ctx); err != nil {
				t.Error(err)
			}
			if _, err := r.DataRoot(ctx); err != nil {
				t.Error(err)
			}
			if _, err := r.RuntimeHandlers(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := ct.take(); n["GET /info"] != 1 || n["HEAD /_ping"]+n["GET /_ping"] != 1 {
		t.Errorf("requests: %v, want one ping (which negotiated the API version) and one GET /info", n)
	}
	driver, err := r.CgroupDriver(ctx)
	if err != nil || driver == "" {
		t.Errorf("CgroupDriver = %q, %v", driver, err)
	}
	r.forgetInfo() // as after Events reconnected
	if _, err := r.RuntimeHandlers(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ct.take(); n["GET /info"] != 1 {
		t.Errorf("after the engine may have restarted: %v, want info asked again", n)
	}

	name := "p" + randHex(6)
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(32), Name: name, Namespace: "default"}, Hash: "h",
		Image: suiteInfraImage(t, r), Hostname: name}
	sbID, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveSandbox(context.Background(), sbID) })
	ct.take()
	id, err := r.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "c", Image: testImage, Type: engine.ContainerTypeApp,
		Command: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveContainer(context.Background(), id) })
	if n := ct.take(); n["inspect"] != 0 {
		t.Errorf("create in a sandbox this runtime made: %v, want no inspect", n)
	}
}

func TestListIsCheap(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	running := p.run(&engine.ContainerConfig{Name: "run", Command: []string{"sleep", "3600"}})
	done := p.run(&engine.ContainerConfig{Name: "done", Command: []string{"sh", "-c", "exit 4"}})
	p.wait(done)

	r, ct := countingRuntime(t, p.r.node)
	ctx := context.Background()

	list := func() map[string]*engine.Container {
		cs, err := r.ListContainers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*engine.Container{}
		for _, c := range cs {
			m[c.ID] = c
		}
		return m
	}
	// What a teardown lists with: one call, whatever the containers.
	if _, cs, err := r.ListPodSummaries(ctx); err != nil || len(cs) != 2 {
		t.Fatalf("ListPodSummaries: %v, %v; want the 2 containers", cs, err)
	}
	if n := ct.take(); n["list"] != 1 || n["inspect"] != 0 {
		t.Errorf("summaries: %v, want one list call and no inspect", n)
	}
	first := list()
	if n := ct.take(); n["inspect"] != 2 {
		t.Errorf("first list: %v, want one inspect per container", n)
	}
	second := list()
	if n := ct.take(); n["list"] != 1 || n["inspect"] != 0 {
		t.Errorf("second list: %v, want one list call and no inspect", n)
	}
	if c := second[done]; c == nil || c.ExitCode != 4 || c.FinishedAt.IsZero() || *c != *first[done] {
		t.Errorf("cached exited container: %+v, want %+v", c, first[done])
	}
	if c := second[running]; c == nil || c.StartedAt.IsZero() || c.State != engine.StateRunning {
		t.Errorf("cached running container: %+v", c)
	}
	// A container that stops is inspected again, once.
	if err := p.r.StopContainer(ctx, running, 0); err != nil {
		t.Fatal(err)
	}
	third := list()
	if c := third[running]; c == nil || c.State != engine.StateExited || c.ExitCode != 137 {
		t.Errorf("after stop: %+v, want exited 137", c)
	}
	if n := ct.take(); n["inspect"] != 1 {
		t.Errorf("list after a stop: %v, want one inspect", n)
	}
}

func TestNameConflictWithForeignContainer(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, "rt-"+randHex(8))
	ctx := context.Background()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(32), Name: "taken", Namespace: "default"}, Image: suiteInfraImage(t, r)}
	// A container of the same node that is not this pod's holds the name.
	name := objectName(sb.Pod, SandboxContainerName, 0)
	resp, err := r.cli.ContainerCreate(ctx, &container.Config{Image: testImage, Labels: map[string]string{LabelNode: r.node}}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunSandbox(ctx, sb); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("RunSandbox over a foreign container's name = %v, want an error", err)
	}
	ins, err := r.cli.ContainerInspect(ctx, resp.ID)
	if err != nil || ins.State.Status != "created" {
		t.Errorf("the foreign container was touched: %v %+v", err, ins.State)
	}
}

// TestContainerStatsWorkingSet: a container holding 20 MiB (in its /dev/shm,
// memory no page-cache reclaim can give back) measures at least that.
func TestContainerStatsWorkingSet(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	id := p.run(&engine.ContainerConfig{Name: "m",
		Command: []string{"sh", "-c", "head -c 20971520 /dev/zero > /dev/shm/hold && touch /dev/shm/done && exec sleep 3600"}})
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := p.r.ContainerStats(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.MemoryWorkingSetBytes >= 20<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("working set %d bytes, want at least 20 MiB", st.MemoryWorkingSetBytes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	other := newRuntime(t, "rt-"+randHex(8))
	if _, err := other.ContainerStats(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("stats of another node's container: %v, want ErrNotFound", err)
	}
}

// TestDeviceRequests: a container's device requests reach Docker as they
// were given (the HostConfig of `docker run --gpus 2`). The container is
// only created: starting it needs the NVIDIA driver, which this
// machine's engine may lack.
func TestDeviceRequests(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	ctx := context.Background()
	id, err := p.r.CreateContainer(ctx, p.sbID, p.sb, &engine.ContainerConfig{
		Name: "gpu", Type: engine.ContainerTypeApp, Image: testImage, Command: []string{"true"},
		DeviceRequests: []engine.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: [][]string{{"gpu"}}}},
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	ins, err := p.r.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []container.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: [][]string{{"gpu"}}}}
	if got := ins.HostConfig.DeviceRequests; !reflect.DeepEqual(got, want) {
		t.Errorf("HostConfig.DeviceRequests = %+v, want %+v", got, want)
	}
}

// TestContainerDiskUsage: what a container writes to its root filesystem
// and its output are measured (its writable layer, its log file).
func TestContainerDiskUsage(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	id := p.run(&engine.ContainerConfig{Name: "d",
		Command: []string{"sh", "-c", "head -c 5242880 /dev/zero > /filler && echo written && exec sleep 3600"}})
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		u, err := p.r.ContainerDiskUsage(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.WritableLayerBytes >= 5<<20 && u.LogBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk usage %+v, want a writable layer of at least 5 MiB and a log", u)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A line longer than Docker's 16 KiB message is split into messages, and
// Docker's log API stamps each one; podrun's logs with timestamps stamp a
// line once, as the kubelet's, and keep all of its text.
func TestLogsStampALongLineOnce(t *testing.T) {
	t.Parallel()
	p := newPod(t, nil)
	long := strings.Repeat("a", 20000)
	id := p.run(&engine.ContainerConfig{Name: "long", Command: []string{"sh", "-c",
		"i=0; while [ $i -lt 20000 ]; do printf a; i=$((i+1)); done; echo; echo next; echo err >&2"}})
	p.wait(id)
	var out, errOut bytes.Buffer
	if err := p.r.ContainerLogs(context.Background(), id, engine.LogOptions{Tail: -1, Timestamps: true}, &out, &errOut); err != nil {
		t.Fatalf("logs: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines of stdout, want 2: %.200q", len(lines), out.String())
	}
	for i, want := range []string{long, "next"} {
		stamp, text, _ := strings.Cut(lines[i], " ")
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil {
			t.Errorf("line %d starts with %.40q, not a timestamp", i, stamp)
		}
		if text != want {
			t.Errorf("line %d: %d bytes of text (%q ... %q), want %d", i, len(text), text[:min(len(text), 20)], text[max(0, len(text)-60):], len(want))
		}
	}
	if stamp, text, _ := strings.Cut(strings.TrimSuffix(errOut.String(), "\n"), " "); text != "err" || stamp == "" {
		t.Errorf("stderr %q, want one stamped line err", errOut.String())
	}
}
