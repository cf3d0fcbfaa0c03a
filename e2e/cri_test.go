package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/cri"
)

// The CRI tests run podrun with --container-runtime-endpoint against the
// private containerd hack/containerd.sh sets up (and starts when it is
// not running), never the system's.
var (
	criEndpoint  = envOrDefault("PODRUN_CRI_ENDPOINT", cri.DefaultEndpoint)
	criSetupOnce sync.Once
	criSetupErr  error
)

func envOrDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// criEnv is a test's podrun world on containerd: an env whose podrun calls
// name the CRI endpoint, and whose cleanup removes every sandbox (and with
// it every container) of its node from containerd.
type criEnv struct {
	*env
	rt *cri.Runtime
}

func newCRIEnv(t *testing.T) *criEnv {
	t.Helper()
	criSetupOnce.Do(func() {
		if os.Getenv("PODRUN_CRI_ENDPOINT") != "" {
			return
		}
		out, err := exec.Command("bash", "../hack/containerd.sh").CombinedOutput()
		if err != nil {
			criSetupErr = err
			t.Logf("hack/containerd.sh:\n%s", out)
		}
	})
	if criSetupErr != nil {
		t.Fatalf("hack/containerd.sh: %v", criSetupErr)
	}
	e := newEnv(t)
	e.extra = append(e.extra, "--container-runtime-endpoint", criEndpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The test's own view of containerd, as podrun's runtime for the node
	// (its log dir is podrun's).
	rt, err := cri.New(ctx, cri.Options{Endpoint: criEndpoint, NodeName: e.node, LogDir: filepath.Join(e.root, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	ce := &criEnv{env: e, rt: rt}
	// Registered after newEnv's: runs first.
	t.Cleanup(func() {
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sbs, err := rt.ListSandboxes(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, sb := range sbs {
			if err := rt.RemoveSandbox(ctx, sb.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return ce
}

// objects lists the node's sandboxes and containers on containerd.
func (e *criEnv) objects() ([]*engine.Sandbox, []*engine.Container) {
	e.t.Helper()
	sbs, cs, err := e.rt.ListPodObjects(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return sbs, cs
}

// runningByName returns the IDs of the node's running containers by name.
func (e *criEnv) runningByName() map[string]string {
	_, cs := e.objects()
	out := map[string]string{}
	for _, c := range cs {
		if c.State == engine.StateRunning {
			out[c.Name] = c.ID
		}
	}
	return out
}

const criWebPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: ` + testImage + `
    command: ["sh", "-c", "echo VERSION; trap 'exit 0' TERM; sleep 3600 & wait"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
`

// TestCRIOnceDownPsLogs: once brings a pod up on containerd (a CRI sandbox
// with a CNI address, its container running and ready), ps and logs read it
// from containerd, a second once adopts it without a restart, and down
// removes everything it made.
func TestCRIOnceDownPsLogs(t *testing.T) {
	e := newCRIEnv(t)
	path := e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "hello-from-cri"))

	r := e.podrun(2*time.Minute, "once", path, "--wait", "ready", "--timeout", "90s")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sbs, _ := e.objects()
	if len(sbs) != 1 || sbs[0].State != engine.StateRunning || sbs[0].IP == "" {
		t.Fatalf("sandboxes on containerd: %+v, want one running with an IP", sbs)
	}
	first := e.runningByName()["web"]
	if first == "" {
		t.Fatalf("no running web container on containerd: %v", e.runningByName())
	}

	r = e.podrun(time.Minute, "ps", "-o", "wide", "--daemon-address", "")
	if r.code != 0 {
		t.Fatalf("ps: exit %d\n%s", r.code, r.stderr)
	}
	contains(t, "ps", r.stdout, "web-"+e.node, "Running", sbs[0].IP)

	r = e.podrun(time.Minute, "logs", "web-"+e.node)
	if r.code != 0 || r.stdout != "hello-from-cri\n" {
		t.Fatalf("logs: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	// A second once finds the pod as it is: nothing restarted.
	r = e.podrun(2*time.Minute, "once", path, "--wait", "ready", "--timeout", "90s")
	if r.code != 0 {
		t.Fatalf("second once: exit %d\n%s", r.code, r.stderr)
	}
	if again := e.runningByName()["web"]; again != first {
		t.Errorf("second once: web is %.12s, want the adopted %.12s", again, first)
	}

	r = e.podrun(2*time.Minute, "down", path)
	if r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	if sbs, cs := e.objects(); len(sbs) != 0 || len(cs) != 0 {
		t.Errorf("after down: %d sandboxes, %d containers left on containerd", len(sbs), len(cs))
	}
	if _, err := os.Stat(filepath.Join(e.root, "logs")); err == nil {
		if left, _ := os.ReadDir(filepath.Join(e.root, "logs")); len(left) != 0 {
			t.Errorf("after down: log directories left: %v", left)
		}
	}
}

// TestCRIWatch: watch on containerd replaces the one container whose spec
// changed (the sandbox stays), restarts a container that dies, and removes
// the pod when its manifest goes.
func TestCRIWatch(t *testing.T) {
	e := newCRIEnv(t)
	path := e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "v1"))
	stop := e.watch()
	defer stop(syscall.SIGTERM)

	var first string
	waitFor(t, "web running", 90*time.Second, func() bool {
		first = e.runningByName()["web"]
		return first != ""
	})
	sbs, _ := e.objects()
	if len(sbs) != 1 {
		t.Fatalf("sandboxes: %+v, want one", sbs)
	}
	sandbox := sbs[0].ID

	// An edit replaces the container, in the same sandbox.
	e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "v2"))
	var second string
	waitFor(t, "web replaced", 90*time.Second, func() bool {
		second = e.runningByName()["web"]
		return second != "" && second != first
	})
	if sbs, _ := e.objects(); len(sbs) != 1 || sbs[0].ID != sandbox || sbs[0].State != engine.StateRunning {
		t.Errorf("after an edit of a container: sandboxes %+v, want %.12s kept running", sbs, sandbox)
	}
	r := e.podrun(time.Minute, "logs", "web-"+e.node)
	if r.stdout != "v2\n" {
		t.Errorf("logs after the edit: %q, want v2", r.stdout)
	}

	// A container that dies is restarted (the relist sees it: containerd
	// 1.6 has no CRI event stream).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.rt.StopContainer(ctx, second, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web restarted", 90*time.Second, func() bool {
		id := e.runningByName()["web"]
		return id != "" && id != second
	})

	// The manifest's removal removes the pod.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod removed", 90*time.Second, func() bool {
		sbs, cs := e.objects()
		return len(sbs) == 0 && len(cs) == 0
	})
}
