// Package e2e runs the podrun binary against the real Docker Engine. The
// README's test command (make test) prepares the machine first: Docker
// installed and running, the local busybox image built.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// testImage is the local image hack/setup.sh builds.
const testImage = "podrun/busybox:test"

var (
	podrunBin string
	docker    *client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "podrun-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	podrunBin = filepath.Join(dir, "podrun")
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", podrunBin, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build podrun:", err)
		return 1
	}
	docker, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := docker.Ping(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e tests need a running Docker Engine; run hack/setup.sh (make test does):", err)
		return 1
	}
	if _, err := docker.ImageInspect(ctx, testImage); err != nil {
		fmt.Fprintf(os.Stderr, "e2e tests need the image %s; run hack/setup.sh (make test does): %v\n", testImage, err)
		return 1
	}
	before := pauseImages()
	code := m.Run()
	// Remove the infra images this run built, and only those.
	for id := range pauseImages() {
		if !before[id] {
			docker.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	}
	return code
}

// pauseImages returns the IDs of podrun's built-in infra images.
func pauseImages() map[string]bool {
	imgs, err := docker.ImageList(context.Background(), image.ListOptions{
		Filters: filters.NewArgs(filters.Arg("reference", "podrun/pause")),
	})
	out := map[string]bool{}
	if err != nil {
		return out
	}
	for _, i := range imgs {
		out[i.ID] = true
	}
	return out
}

// env is one test's podrun world: its own node name and root dir, cleaned
// up (every container of the node, the root dir) when the test ends.
type env struct {
	t     *testing.T
	node  string
	root  string
	dir   string // manifests
	extra []string
	infra string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	e := &env{t: t, node: "e2e-" + hex.EncodeToString(b), root: t.TempDir(), dir: t.TempDir()}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "io.podrun.node="+e.node))})
	if err != nil {
		e.t.Errorf("cleanup: list containers: %v", err)
		return
	}
	for _, c := range list {
		// Gone already is what cleanup wants: a removal podrun sent just
		// before it exited can complete inside dockerd meanwhile.
		if err := docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			e.t.Errorf("cleanup: remove %s: %v", c.ID, err)
		}
	}
	// Unmount anything left under the root dir (memory emptyDirs) so that
	// TempDir can remove it.
	exec.Command("sh", "-c", "grep -o ' "+e.root+"[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l").Run()
}

// args are the flags every podrun call of this env gets.
func (e *env) args(sub string, rest ...string) []string {
	a := []string{sub, "--node-name", e.node, "--root-dir", e.root, "--config", ""}
	if e.infra != "" {
		a = append(a, "--pod-infra-image", e.infra)
	}
	return append(append(a, e.extra...), rest...)
}

type result struct {
	stdout, stderr string
	code           int
}

// podrun runs the binary to completion (bounded by timeout).
func (e *env) podrun(timeout time.Duration, sub string, rest ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, podrunBin, e.args(sub, rest...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("podrun %s: %v", sub, err)
		}
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		e.t.Fatalf("podrun %s did not finish within %s\nstderr:\n%s", sub, timeout, errb.String())
	}
	return result{out.String(), errb.String(), code}
}

// start runs the binary in the background.
func (e *env) start(sub string, rest ...string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	cmd := exec.Command(podrunBin, e.args(sub, rest...)...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, &errb
}

// write puts a manifest into the env's manifest dir and returns its path.
func (e *env) write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// containers lists the node's containers (sandboxes included).
func (e *env) containers() []container.Summary {
	e.t.Helper()
	list, err := docker.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "io.podrun.node="+e.node))})
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// freePort finds a TCP port free on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// httpGet fetches url, retrying for a few seconds while the server comes up.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}
