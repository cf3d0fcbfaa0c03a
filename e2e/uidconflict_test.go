package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// uidPod is a pod named name with metadata.uid uid that writes a file to
// its emptyDir and is Ready once it has: pods of two names have the same
// sandbox and containers.
func uidPod(name, uid string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  uid: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo data > /scratch/file && exec sleep 3600"]
    readinessProbe:
      exec: {command: [cat, /scratch/file]}
      periodSeconds: 1
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: scratch
    emptyDir: {}
`, name, uid, testImage)
}

// A manifest that borrows the metadata.uid of a running pod of another
// name is refused by once (exit 1, UIDConflict naming the owner) whose
// sandbox and containers it would otherwise adopt (the same spec), and the
// owner runs on untouched, its pod directory and emptyDir data too. Once
// the owner is down, the manifest starts.
func TestOnceRefusesABorrowedUID(t *testing.T) {
	e := newEnv(t)
	uid := "owned-" + e.node
	owner := e.write("owner.yaml", uidPod("owner", uid))
	borrower := e.write("borrower.yaml", uidPod("borrower", uid))

	r := e.podrun(3*time.Minute, "once", "--wait", "ready", "--timeout", "2m", owner)
	if r.code != 0 {
		t.Fatalf("once owner: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	podDir := filepath.Join(e.root, "pods", uid)
	dirBefore := fileTree(t, podDir)
	data := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch", "file")
	if b, err := os.ReadFile(data); err != nil || string(b) != "data\n" {
		t.Fatalf("the owner's emptyDir file: %q, %v", b, err)
	}
	startsBefore := startTimes(t, e)

	r = e.podrun(3*time.Minute, "once", "-o", "json", "--timeout", "1m", borrower)
	if r.code != 1 {
		t.Fatalf("once borrower: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	p := onceReport(t, r)["borrower-"+e.node]
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != "UIDConflict" ||
		!strings.Contains(p.Status.Message, "default/owner-"+e.node) {
		t.Errorf("borrower's status %s %s %q, want Failed UIDConflict naming default/owner-%s",
			p.Status.Phase, p.Status.Reason, p.Status.Message, e.node)
	}
	if after := startTimes(t, e); !maps.Equal(after, startsBefore) {
		t.Errorf("the owner's containers changed:\nbefore %v\nafter  %v", startsBefore, after)
	}
	if after := fileTree(t, podDir); !maps.Equal(after, dirBefore) {
		t.Errorf("the owner's pod directory changed:\nbefore %v\nafter  %v", dirBefore, after)
	}
	if b, err := os.ReadFile(data); err != nil || string(b) != "data\n" {
		t.Errorf("the owner's emptyDir file after: %q, %v", b, err)
	}

	if r := e.podrun(2*time.Minute, "down", owner); r.code != 0 {
		t.Fatalf("down owner: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := e.podrun(3*time.Minute, "once", "--wait", "ready", "--timeout", "2m", borrower); r.code != 0 {
		t.Fatalf("once borrower with the owner gone: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// startTimes are the node's containers (sandboxes included): their IDs,
// with their states, start times and restart counts.
func startTimes(t *testing.T, e *env) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range e.containers() {
		info, err := docker.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[c.ID] = fmt.Sprintf("%s started %s restarts %d", info.State.Status, info.State.StartedAt, info.RestartCount)
	}
	return out
}

// fileTree is every file and directory under dir, with its mode, size and
// modification time.
func fileTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%s size %d modified %s", info.Mode(), info.Size(), info.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// In watch, a manifest that sets metadata.uid and is renamed replaces its
// pod: the objects of the old name are a pod no source defines any more,
// and are removed with the UID's pod directory (the new name does not
// inherit the old one's emptyDir) rather than refusing the new name as a
// UID conflict for ever.
func TestWatchRenameKeepingTheUID(t *testing.T) {
	e := newEnv(t)
	uid := "kept-" + e.node
	e.write("p.yaml", uidPod("before", uid))
	stop := e.watch()
	defer stop(syscall.SIGTERM)
	waitFor(t, "the pod before the rename", 2*time.Minute, func() bool { return e.running()["before/c"] != "" })
	marker := filepath.Join(e.root, "pods", uid, "volumes", "kubernetes.io~empty-dir", "scratch", "before-only")
	if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	e.write("p.yaml", uidPod("after", uid))
	waitFor(t, "the renamed pod alone", 2*time.Minute, func() bool {
		r := e.running()
		return r["after/c"] != "" && r["before/c"] == "" && len(e.containers()) == 2
	})
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old pod's emptyDir file under the renamed pod: %v, want it gone", err)
	}
}
