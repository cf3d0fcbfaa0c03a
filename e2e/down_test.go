package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// barrierPod is a pod whose preStop hook marks its arrival in the shared
// hostPath dir and waits (up to 30 s) for pods pods to have arrived, then
// writes "together" or, if they never did, "alone", under its hostname.
func barrierPod(name, dir string, pods int) string {
	hook := fmt.Sprintf("touch /sync/in-$(hostname); i=0; "+
		"while [ $(ls /sync | grep -c '^in-') -lt %d ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "+
		"if [ $i -lt 300 ]; then echo together; else echo alone; fi > /sync/out-$(hostname)", pods)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: app
    image: %[2]s
    command: [sleep, "3600"]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, %[3]q]}
    volumeMounts: [{name: sync, mountPath: /sync}]
  volumes:
  - name: sync
    hostPath: {path: %[4]s, type: Directory}
`, name, testImage, hook, dir)
}

// TestDownStopsPodsTogether: down stops the pods of a directory together,
// so that their grace periods overlap rather than add up. Each pod's
// preStop hook waits for every other pod's to have begun; stopped one
// after the other, the first would wait alone.
func TestDownStopsPodsTogether(t *testing.T) {
	const pods = 4
	e := newEnv(t)
	syncDir := t.TempDir()
	for i := range pods {
		e.write(fmt.Sprintf("p%d.yaml", i), barrierPod(fmt.Sprintf("p%d", i), syncDir, pods))
	}
	if r := e.podrun(2*time.Minute, "once", e.dir); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	// Serially, each hook would give up after 30 s: 2 minutes for four.
	r := e.podrun(4*time.Minute, "down", e.dir)
	if r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	contains(t, "down output", r.stdout, "p0-"+e.node, "p3-"+e.node)
	outs, err := filepath.Glob(filepath.Join(syncDir, "out-*"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range outs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Base(p)+": "+string(b))
	}
	sort.Strings(got)
	if len(got) != pods {
		t.Fatalf("%d preStop hooks finished, want %d: %q", len(got), pods, got)
	}
	for _, g := range got {
		if !strings.HasSuffix(g, ": together\n") {
			t.Errorf("preStop hooks did not all run together: %q", got)
			break
		}
	}
	if n := len(e.containers()); n != 0 {
		t.Fatalf("down left %d containers", n)
	}
	assertNoPodDirs(t, e)
}
