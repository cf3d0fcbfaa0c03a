package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine/enginetest"
)

// testRegistry is a docker-registry with basic auth on 127.0.0.1, run by
// hack/registry.sh for one test.
type testRegistry struct {
	host, user, pass string
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	r := &testRegistry{host: "127.0.0.1:" + strconv.Itoa(port), user: "podrun", pass: "s3cret-" + strconv.Itoa(port)}
	script := filepath.Join("..", "hack", "registry.sh")
	out, err := exec.Command("bash", script, "start", dir, strconv.Itoa(port), r.user, r.pass).CombinedOutput()
	if err != nil {
		t.Fatalf("start the registry: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stop the registry: %v\n%s", err, out)
		}
	})
	return r
}

// push puts the test image into the registry as repo:1 and leaves no local
// tag of that name: the image is only in the registry. At the end of the
// test the tag podrun pulls is removed (a tag only: the image is the test
// image's).
func (r *testRegistry) push(t *testing.T, repo string) string {
	t.Helper()
	ctx := context.Background()
	ref := r.host + "/" + repo + ":1"
	if err := docker.ImageTag(ctx, testImage, ref); err != nil {
		t.Fatal(err)
	}
	auth, _ := registry.EncodeAuthConfig(registry.AuthConfig{Username: r.user, Password: r.pass, ServerAddress: r.host})
	rc, err := docker.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	body, _ := io.ReadAll(rc)
	rc.Close()
	if bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("push %s: %s", ref, body)
	}
	untag := func() { docker.ImageRemove(context.Background(), ref, image.RemoveOptions{}) }
	untag()
	t.Cleanup(untag)
	return ref
}

// pullSecret is a kubernetes.io/dockerconfigjson Secret for the registry.
func (r *testRegistry) pullSecret(name, password string) string {
	cfg := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q}}}`, r.host, r.user, password)
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: %s
`, name, base64.StdEncoding.EncodeToString([]byte(cfg)))
}

func privatePod(name, image, secret string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  imagePullSecrets:
  - name: %s
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: [sleep, "3600"]
`, name, secret, image)
}

// waiting is the waiting reason and message of the pod's container, from
// /pods.
func (e *env) waiting(pod, container string) (string, string) {
	p, ok := e.pods()[pod]
	if !ok {
		return "", ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason, cs.State.Waiting.Message
		}
	}
	return "", ""
}

func TestImagesPullWithPullSecret(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "e2e/once-"+randSuffix())

	e := newEnv(t)
	e.write("secret.yaml", reg.pullSecret("regcred", reg.pass))
	e.write("pod.yaml", privatePod("private", ref, "regcred"))
	res := e.podrun(2*time.Minute, "once", e.dir, "--timeout", "90s")
	if res.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if _, ok := e.running()["private/app"]; !ok {
		t.Errorf("the pod does not run: %v", e.running())
	}
	// Not a terminal: plain lines of the pull.
	contains(t, "once's stderr", res.stderr, "pulling image "+ref, "pulled "+ref)
	if strings.Contains(res.stderr, "imagePullSecrets") {
		t.Errorf("a warning about imagePullSecrets:\n%s", res.stderr)
	}
	if res := e.podrun(time.Minute, "down", e.dir); res.code != 0 {
		t.Fatalf("down: exit %d\n%s", res.code, res.stderr)
	}
}

func TestImagesPullBackOffUntilTheSecretIsFixed(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "e2e/watch-"+randSuffix())

	e := newEnv(t)
	e.write("secret.yaml", reg.pullSecret("regcred", "wrong-password"))
	e.write("pod.yaml", privatePod("private", ref, "regcred"))
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)

	// ErrImagePull is shown from the failed pull until the worker looks
	// again (at once): then ImagePullBackOff until the back-off is over.
	seen := map[string]string{}
	waitFor(t, "ImagePullBackOff", time.Minute, func() bool {
		reason, msg := e.waiting("private-"+e.node, "app")
		if reason != "" {
			seen[reason] = msg
		}
		return reason == "ImagePullBackOff"
	})
	t.Logf("waiting reasons seen: %v", seen)
	if msg := seen["ImagePullBackOff"]; !strings.Contains(msg, "unauthorized") {
		t.Errorf("ImagePullBackOff message %q does not say why", msg)
	}
	if _, ok := e.running()["private/app"]; ok {
		t.Fatal("the pod runs with a wrong password")
	}

	// Fixed: the next try after the back-off pulls and starts it.
	e.write("secret.yaml", reg.pullSecret("regcred", reg.pass))
	took := waitFor(t, "the pod to start once the secret is fixed", 2*time.Minute, func() bool {
		_, ok := e.running()["private/app"]
		return ok
	})
	t.Logf("started %s after the fix", took)
}

func crashPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: crash
    image: %s
    command: [sh, -c, "echo crashing; exit 3"]
  - name: steady
    image: %s
    command: [sleep, "3600"]
`, name, testImage, testImage)
}

// dead counts the node's containers of name that do not run, and returns
// the highest attempt seen.
func (e *env) dead(name string) (dead, attempt int) {
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.name"] != name {
			continue
		}
		if a, _ := strconv.Atoi(c.Labels["io.podrun.attempt"]); a > attempt {
			attempt = a
		}
		if c.State != "running" {
			dead++
		}
	}
	return dead, attempt
}

// This test needs the GC flags wired into `podrun watch`.
func TestImagesCrashLoopKeepsOneDeadContainer(t *testing.T) {
	e := newEnv(t)
	path := e.write("crash.yaml", crashPod("crash"))
	stop := e.watch("--maximum-dead-containers-per-container", "1", "--container-gc-period", "1s")
	stopped := false
	defer func() {
		if !stopped {
			stop(syscall.SIGTERM)
		}
	}()

	most := 0
	var last time.Time
	waitFor(t, "restart count 3", 3*time.Minute, func() bool {
		d, attempt := e.dead("crash")
		most = max(most, d)
		if d > 2 {
			t.Fatalf("%d dead containers of crash at attempt %d", d, attempt)
		}
		if attempt >= 2 && last.IsZero() {
			last = time.Now()
		}
		return attempt >= 3
	})
	// Between a death and the next GC pass there may be two; then one.
	waitFor(t, "exactly one dead container of crash", 10*time.Second, func() bool {
		d, _ := e.dead("crash")
		return d == 1
	})
	t.Logf("at most %d dead containers of crash at once", most)
	if d, _ := e.dead("steady"); d != 0 {
		t.Errorf("%d dead containers of steady", d)
	}
	// The kept one is the previous run: `logs --previous` shows it, once
	// the pod's status does. The status lags Docker by a sync: the one
	// that starts the next run publishes, first, the crashed run as the
	// current one, terminated, with no lastState (as the kubelet's status
	// shows a container about to restart), and the run before it is gone.
	var res result
	ok := false
	for deadline := time.Now().Add(30 * time.Second); !ok && time.Now().Before(deadline); {
		res = e.podrun(30*time.Second, "logs", "crash", "-c", "crash", "--previous")
		ok = res.code == 0 && strings.Contains(res.stdout, "crashing")
	}
	if !ok {
		t.Errorf("logs --previous: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}

	stop(syscall.SIGTERM)
	stopped = true
	if res := e.podrun(time.Minute, "down", path); res.code != 0 {
		t.Fatalf("down: exit %d\n%s", res.code, res.stderr)
	}
	if cs := e.containers(); len(cs) != 0 {
		t.Errorf("after down, %d containers remain", len(cs))
	}
	assertNoPodDirs(t, e)
}

func TestImagesLowDiskRefusesNewPods(t *testing.T) {
	e := newEnv(t)
	e.write("pod.yaml", sleepPod("roomless", 1))
	// A threshold no disk meets.
	res := e.podrun(time.Minute, "once", e.dir, "--timeout", "10s", "-o", "json",
		"--low-disk-space-threshold-mb", strconv.Itoa(1<<40))
	if res.code != 1 {
		t.Fatalf("once: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var report struct {
		Items []v1.Pod `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &report); err != nil || len(report.Items) != 1 {
		t.Fatalf("report: %v\n%s", err, res.stdout)
	}
	st := report.Items[0].Status.ContainerStatuses
	if len(st) != 1 || st[0].State.Waiting == nil || st[0].State.Waiting.Reason != "OutOfDisk" ||
		!strings.Contains(st[0].State.Waiting.Message, "--low-disk-space-threshold-mb") {
		t.Errorf("container status: %+v", st)
	}
	if cs := e.containers(); len(cs) != 0 {
		t.Errorf("a refused pod made %d containers", len(cs))
	}
}

// TestImagesGC forces image GC (thresholds of 1 % and 0 %: the disk is
// always "full") and checks that it removes an unused image and keeps the
// one a pod uses and the infra images. Docker is shared with whatever else
// runs here, so every other image is protected for the test's duration by a
// container that uses it (never started): images in use are never
// collected.
func TestImagesGC(t *testing.T) {
	// The guard would hold the image a test of engine/docker made to
	// remove (TestImageService): not while one runs.
	enginetest.HoldEngineImages(t)
	e := newEnv(t)
	victim := importTestImage(t, "podrun-e2e/gc-victim-"+randSuffix()+":1", nil)
	infraLike := importTestImage(t, "podrun-e2e/gc-infra-"+randSuffix()+":1", []string{"LABEL io.podrun.infra=true"})
	stopGuard := guardImages(t, e.node, map[string]bool{victim: true, infraLike: true})
	defer stopGuard()

	e.write("pod.yaml", sleepPod("user", 1))
	stop := e.watch("--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0",
		"--image-minimum-gc-age", "3s", "--image-gc-period", "1s")
	stopped := false
	defer func() {
		if !stopped {
			stop(syscall.SIGTERM)
		}
	}()
	waitFor(t, "the pod to run", time.Minute, func() bool { return len(e.running()) == 2 })
	waitFor(t, "image GC to remove the unused image", time.Minute, func() bool {
		_, err := docker.ImageInspect(context.Background(), victim)
		return err != nil
	})
	for what, ref := range map[string]string{"the pod's image": testImage, "an infra-labelled image": infraLike} {
		if _, err := docker.ImageInspect(context.Background(), ref); err != nil {
			t.Errorf("%s (%s) was removed: %v", what, ref, err)
		}
	}
	for id := range pauseImages() {
		if _, err := docker.ImageInspect(context.Background(), id); err != nil {
			t.Errorf("infra image %s was removed", id)
		}
	}
	stop(syscall.SIGTERM)
	stopped = true
}

// importTestImage imports a tiny image of its own ID (one random file) under
// ref, with Dockerfile changes, and removes it at the end of the test.
func importTestImage(t *testing.T, ref string, changes []string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte(ref + " " + randSuffix() + "\n")
	tw.WriteHeader(&tar.Header{Name: "id", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)})
	tw.Write(content)
	tw.Close()
	ctx := context.Background()
	rc, err := docker.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	ins, err := docker.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.ImageRemove(context.Background(), ins.ID, image.RemoveOptions{Force: true}) })
	return ins.ID
}

// guardImages keeps every image but those in except in use, with a created
// (never started) container each, until the returned function is called:
// the images there are now, and those that appear meanwhile (checked five
// times a second; the test's image GC waits 3 s before it may remove an
// image it has not seen before).
func guardImages(t *testing.T, node string, except map[string]bool) (stop func()) {
	t.Helper()
	label := "io.podrun.e2e-guard=" + node
	guarded := map[string]bool{}
	guard := func() {
		imgs, err := docker.ImageList(context.Background(), image.ListOptions{})
		if err != nil {
			return
		}
		for _, img := range imgs {
			if except[img.ID] || guarded[img.ID] {
				continue
			}
			_, err := docker.ContainerCreate(context.Background(),
				&container.Config{Image: img.ID, Cmd: []string{"guard"}, Labels: map[string]string{"io.podrun.e2e-guard": node}},
				&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
			if err == nil {
				guarded[img.ID] = true
			}
		}
	}
	guard()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
				guard()
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			list, _ := docker.ContainerList(context.Background(), container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("label", label))})
			for _, c := range list {
				docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func randSuffix() string {
	b := make([]byte, 4)
	f, _ := os.Open("/dev/urandom")
	defer f.Close()
	io.ReadFull(f, b)
	return fmt.Sprintf("%x", b)
}
