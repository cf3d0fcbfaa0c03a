package cri

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// The tests run against podrun's private containerd, which
// hack/containerd.sh sets up (installing it when missing): they need root
// on Linux, and nothing else.
var (
	testImage = envOr("PODRUN_TEST_IMAGE", "podrun/busybox:test")
	endpoint  = envOr("PODRUN_CRI_ENDPOINT", DefaultEndpoint)
	setupOnce sync.Once
	setupErr  error
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:n]
}

// needContainerd sets the private containerd up, once per test binary.
func needContainerd(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("the CRI engine's tests need root on Linux (they run a private containerd)")
	}
	setupOnce.Do(func() {
		if os.Getenv("PODRUN_CRI_ENDPOINT") != "" {
			return // someone else's runtime, set up by them
		}
		out, err := exec.Command("bash", "../../hack/containerd.sh").CombinedOutput()
		if err != nil {
			setupErr = fmt.Errorf("hack/containerd.sh: %v\n%s", err, out)
		}
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func newRuntime(t *testing.T, node string) *Runtime {
	t.Helper()
	needContainerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(ctx, Options{Endpoint: endpoint, NodeName: node, LogDir: filepath.Join(logRoot(t), node)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var (
	logRootOnce sync.Once
	logRootDir  string
)

// logRoot is one log directory for the whole test binary (a restarted
// runtime of a node must find its pods' logs where they were).
func logRoot(t *testing.T) string {
	logRootOnce.Do(func() {
		dir, err := os.MkdirTemp("", "podrun-cri-test-")
		if err != nil {
			panic(err)
		}
		logRootDir = dir
	})
	return logRootDir
}

func TestMain(m *testing.M) {
	// cri-client logs every failed call through klog, the NotFound answers
	// the suite asks for included.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.Set("logtostderr", "false")
	fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	code := m.Run()
	if logRootDir != "" {
		os.RemoveAll(logRootDir)
	}
	os.Exit(code)
}

func criEnv(t *testing.T) enginetest.Env {
	probe := newRuntime(t, "rt-probe-"+randHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infra, err := probe.EnsureInfraImage(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return enginetest.Env{
		Image:                           testImage,
		InfraImage:                      infra,
		Argv:                            enginetest.ShellArgv,
		NoSandboxRestart:                true,
		SandboxRemovalRemovesContainers: true,
		NoHostPortCheck:                 true,
		MakeImage:                       makeImage,
	}
}

// makeImage makes an image of its own ID (one random file) in containerd's
// k8s.io namespace under refs, through the local dockerd (CRI cannot build
// or import images), removed at the end of the test.
func makeImage(t *testing.T, refs ...string) string {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	content := []byte(randHex(32))
	if err := tw.WriteHeader(&tar.Header{Name: "id", Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	run := func(stdin []byte, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	sock := strings.TrimPrefix(endpoint, "unix://")
	t.Cleanup(func() {
		exec.Command("docker", append([]string{"rmi"}, refs...)...).Run()
		exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io", "images", "rm"}, refs...)...).Run()
	})
	run(layer.Bytes(), "docker", "import", "-", refs[0])
	for _, ref := range refs[1:] {
		run(nil, "docker", "tag", refs[0], ref)
	}
	run(nil, "bash", append([]string{"-c", `set -o pipefail; docker save "$@" | ctr -a "$0" -n k8s.io images import -`, sock}, refs...)...)
	r := newRuntime(t, "rt-img-"+randHex(6))
	img, err := r.ImageStatus(context.Background(), refs[0])
	if err != nil {
		t.Fatal(err)
	}
	return img.ID
}

func TestConformance(t *testing.T) {
	env := criEnv(t)
	enginetest.Run(t, func(t *testing.T, node string) engine.Runtime { return newRuntime(t, node) }, env)
}

// A removed container's log files (the current one and the rotated ones)
// go with it; its sandbox's log directory goes with the sandbox.
func TestLogFilesRemoved(t *testing.T) {
	r := newRuntime(t, "rt-logs-"+randHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(16), Name: "logs", Namespace: "default"}, Hash: "h"}
	sbID, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveSandbox(context.Background(), sbID) })
	id, err := r.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "echo", Image: testImage, Command: enginetest.ShellArgv(enginetest.ProcessEcho)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	dir := r.sandboxLogDir(sb.Pod.UID, 0)
	logFile := filepath.Join(dir, "echo_0.log")
	if _, err := os.Stat(logFile); err != nil {
		t.Fatalf("the container's log file: %v", err)
	}
	// Files a rotation made (RotateLogs) go too; another name stays.
	rotated := []string{logFile + ".20260102-030405.gz", logFile + ".20260102-030406"}
	for _, p := range append(rotated, logFile+".keep") {
		if err := os.WriteFile(p, []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(rotated, logFile) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("after RemoveContainer, %s: %v, want gone", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(logFile + ".keep"); err != nil {
		t.Errorf("after RemoveContainer, a file not of its log: %v, want kept", err)
	}
	if err := r.RemoveSandbox(ctx, sbID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after RemoveSandbox, the log directory: %v, want gone", err)
	}
}

// TestRemoveContainerWhoseTaskTheCRILeftRunning: a container whose task
// runs while the CRI status says created (containerd 1.6 leaves this when
// its client is killed during StartContainer; here the task is started
// behind the CRI's back with ctr) is removed all the same, its task
// killed: the CRI alone can neither stop it nor remove it.
func TestRemoveContainerWhoseTaskTheCRILeftRunning(t *testing.T) {
	r := newRuntime(t, "rt-stray-"+randHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(16), Name: "stray", Namespace: "default"}, Hash: "h"}
	sbID, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveSandbox(context.Background(), sbID) })
	id, err := r.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "run", Image: testImage, Command: enginetest.ShellArgv(enginetest.ProcessRun)})
	if err != nil {
		t.Fatal(err)
	}
	sock := strings.TrimPrefix(endpoint, "unix://")
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ctr("task", "start", "-d", id)
	t.Cleanup(func() {
		exec.Command("ctr", "-a", sock, "-n", "k8s.io", "task", "kill", "-s", "SIGKILL", id).Run()
		exec.Command("ctr", "-a", sock, "-n", "k8s.io", "task", "delete", id).Run()
	})
	if cs, err := r.ListContainers(ctx); err != nil {
		t.Fatal(err)
	} else if st := stateOf(cs, id); st != engine.StateCreated {
		t.Fatalf("the CRI says %q of the container; the test needs it to say created", st)
	}
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if strings.Contains(ctr("task", "ls", "-q"), id) {
		t.Error("the task still runs")
	}
	if err := r.RemoveSandbox(ctx, sbID); err != nil {
		t.Errorf("RemoveSandbox after: %v", err)
	}
}

func stateOf(cs []*engine.Container, id string) engine.State {
	for _, c := range cs {
		if c.ID == id {
			return c.State
		}
	}
	return ""
}
