package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// onceReport parses `podrun once -o json`'s report and returns its pods by
// name.
func onceReport(t *testing.T, r result) map[string]v1.Pod {
	t.Helper()
	var list v1.PodList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("once -o json: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	out := map[string]v1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// statusOf is the status of the container named name, or fails.
func statusOf(t *testing.T, p v1.Pod, name string) v1.ContainerStatus {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("pod %s has no status of container %s: %+v", p.Name, name, p.Status)
	return v1.ContainerStatus{}
}

// deadlinePod is a pod that sleeps for an hour, with activeDeadlineSeconds
// seconds.
func deadlinePod(seconds int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: deadline
spec:
  activeDeadlineSeconds: %d
  terminationGracePeriodSeconds: 1
  containers:
  - name: sleeper
    image: %s
    command: [sleep, "3600"]
`, seconds, testImage)
}

// TestLifecycleActiveDeadline: a pod with activeDeadlineSeconds: 3 that
// would sleep for an hour is stopped at its deadline; `once --wait
// complete` ends with exit 1, reporting it Failed with reason
// DeadlineExceeded and its container terminated; nothing of it runs.
func TestLifecycleActiveDeadline(t *testing.T) {
	e := newEnv(t)
	p := e.write("deadline.yaml", deadlinePod(3))
	r := e.podrun(3*time.Minute, "once", "--wait", "complete", "--timeout", "2m", "-o", "json", p)
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1 (a failed pod)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	pod, ok := onceReport(t, r)["deadline-"+e.node]
	if !ok {
		t.Fatalf("the report lacks the pod:\n%s", r.stdout)
	}
	if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != "DeadlineExceeded" ||
		pod.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("status phase %s reason %q message %q, want Failed, DeadlineExceeded and the kubelet's message",
			pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
	}
	if cs := statusOf(t, pod, "sleeper"); cs.State.Terminated == nil {
		t.Errorf("sleeper's state %+v, want terminated", cs.State)
	}
	if run := e.running(); len(run) != 0 {
		t.Errorf("%d containers of the pod still run", len(run))
	}
	contains(t, "stderr", r.stderr, "pods failed")

	// A later podrun (no status of the pod but its sandbox's age) keeps
	// it failed and starts nothing.
	before := ids(e)
	r = e.podrun(3*time.Minute, "once", "--wait", "complete", "--timeout", "2m", "-o", "json", p)
	if r.code != 1 {
		t.Fatalf("second once: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if pod := onceReport(t, r)["deadline-"+e.node]; pod.Status.Reason != "DeadlineExceeded" {
		t.Errorf("second once: reason %q, want DeadlineExceeded", pod.Status.Reason)
	}
	if after := ids(e); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("second once changed containers:\nbefore %v\nafter  %v", before, after)
	}
	if run := e.running(); len(run) != 0 {
		t.Errorf("second once: %d containers of the pod run", len(run))
	}

	// Under watch, the manifest edited to give the pod more time makes a
	// new pod of it, as an edit of an evicted pod does: it runs again.
	_, stop := e.watchWithServer()
	defer stop(syscall.SIGTERM)
	name := "deadline-" + e.node
	waitFor(t, "watch to report the pod past its deadline", 2*time.Minute, func() bool {
		return e.pods()[name].Status.Reason == "DeadlineExceeded"
	})
	e.write("deadline.yaml", deadlinePod(3600))
	e.waitSynced("deadline")
	if p := e.pods()[name]; p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
		t.Errorf("after the edit: phase %s reason %q, want Running", p.Status.Phase, p.Status.Reason)
	}
	if run := e.running(); run["deadline/sleeper"] == "" {
		t.Errorf("after the edit the sleeper does not run: %v", run)
	}
}

// TestLifecycleTerminationMessage: what a container wrote to
// /dev/termination-log is its terminated state's message; under
// FallbackToLogsOnError a container that failed without writing it gets
// the tail of its logs.
func TestLifecycleTerminationMessage(t *testing.T) {
	e := newEnv(t)
	p := e.write("msg.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: msg
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: %[1]s
    command: [sh, -c, "printf bye > /dev/termination-log; exit 1"]
  - name: logger
    image: %[1]s
    terminationMessagePolicy: FallbackToLogsOnError
    command: [sh, -c, "echo first words; echo last words >&2; exit 1"]
  - name: quiet
    image: %[1]s
    terminationMessagePolicy: FallbackToLogsOnError
    command: [sh, -c, "echo all is well"]
`, testImage))
	r := e.podrun(3*time.Minute, "once", "--wait", "complete", "--timeout", "2m", "-o", "json", p)
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1 (a failed pod)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	pod := onceReport(t, r)["msg-"+e.node]
	want := map[string]string{
		"writer": "bye",
		"logger": "first words\nlast words\n",
		"quiet":  "", // exited 0: its logs are not its message
	}
	for name, msg := range want {
		cs := statusOf(t, pod, name)
		if cs.State.Terminated == nil {
			t.Errorf("%s: state %+v, want terminated", name, cs.State)
			continue
		}
		got := cs.State.Terminated.Message
		if name == "logger" {
			// stdout and stderr reach Docker's log through two pipes:
			// lines of the two streams may come in either order (the
			// kubelet reads them as the runtime logged them too).
			if got != msg && got != "last words\nfirst words\n" {
				t.Errorf("%s: message %q, want both lines of %q", name, got, msg)
			}
			continue
		}
		if got != msg {
			t.Errorf("%s: message %q, want %q", name, got, msg)
		}
	}
}

// TestLifecycleTerminationMessageSymlinkRefused: a symlink put in place of
// a container's termination-message file while it runs (a container with
// a way into the pod directory could plant one; the test plants it from
// the host) is not followed when the message is read back: the file it
// points to is not disclosed.
func TestLifecycleTerminationMessageSymlinkRefused(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The container exits when the test writes to the FIFO: no polling.
	syncDir := t.TempDir()
	fifo := filepath.Join(syncDir, "go")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	p := e.write("victim.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: victim
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes:
  - name: sync
    hostPath: {path: %s, type: Directory}
  containers:
  - name: victim
    image: %s
    command: [sh, -c, "read x < /sync/go; exit 1"]
    volumeMounts:
    - {name: sync, mountPath: /sync}
`, syncDir, testImage))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, podrunBin, e.args("once", "--wait", "complete", "--timeout", "2m", "-o", "json", p)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Once the container runs, its file exists: put a symlink in its place.
	var file string
	if !poll(time.Minute, func() bool {
		if e.running()["victim/victim"] == "" {
			return false
		}
		m, _ := filepath.Glob(filepath.Join(e.root, "pods", "*", "containers", "victim", "0-termination-log"))
		if len(m) == 1 {
			file = m[0]
		}
		return file != ""
	}) {
		cancel()
		<-done
		t.Fatalf("the victim container did not run\nstderr:\n%s", errb.String())
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, file); err != nil {
		t.Fatal(err)
	}
	// The FIFO opens for writing once the container has it open for
	// reading (until then: ENXIO); never a blocking open.
	var w *os.File
	if !poll(time.Minute, func() bool {
		var err error
		w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	}) {
		cancel()
		<-done
		t.Fatalf("the victim container never opened its FIFO\nstderr:\n%s", errb.String())
	}
	w.WriteString("go\n")
	w.Close()

	err := <-done
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r := result{stdout: out.String(), stderr: errb.String(), code: code}
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1 (a failed pod)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	cs := statusOf(t, onceReport(t, r)["victim-"+e.node], "victim")
	if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 1 {
		t.Fatalf("victim's state %+v, want terminated with exit 1", cs.State)
	}
	msg := cs.State.Terminated.Message
	if strings.Contains(msg, "TOPSECRET") || strings.Contains(r.stdout+r.stderr, "TOPSECRET") {
		t.Fatalf("the symlink's target was disclosed: message %q", msg)
	}
	contains(t, "message", msg, "refused")
	if b, err := os.ReadFile(secret); err != nil || string(b) != "TOPSECRET" {
		t.Errorf("the symlink's target changed: %q, %v", b, err)
	}
}
