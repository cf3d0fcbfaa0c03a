package runner_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// logsFake is a fake whose containers' logs are fixed lines, counting the
// reads.
type logsFake struct {
	*enginetest.Fake
	lines []string
	reads atomic.Int32
}

func (f *logsFake) ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) error {
	f.reads.Add(1)
	lines := f.lines
	if opts.Tail >= 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	for i, l := range lines {
		w := stdout
		if i%2 == 1 {
			w = stderr
		}
		fmt.Fprintln(w, l)
	}
	return nil
}

// termFile is the host file bound at the container's terminationMessagePath.
func termFile(t *testing.T, fake *enginetest.Fake, id, path string) string {
	t.Helper()
	for _, m := range fake.ContainerConfig(id).Mounts {
		if m.ContainerPath == path {
			return m.HostPath
		}
	}
	t.Fatalf("container %s has no mount at %s", id, path)
	return ""
}

func terminated(p *v1.Pod, i int) *v1.ContainerStateTerminated {
	if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil {
		return t
	}
	return p.Status.ContainerStatuses[i].LastTerminationState.Terminated
}

// TestTerminationMessageReadBack: what a container wrote to its
// terminationMessagePath is its terminated state's message, and its last
// state's once it runs again; the file is read once per finished run (a
// later change of it, or a relist, changes nothing); the pod's messages
// are cut to its share of 12 KiB.
func TestTerminationMessageReadBack(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	pod := newPod("u1", "p", v1.RestartPolicyOnFailure, map[string][]string{"a": {"run"}, "b": {"run"}, "c": {"run"}, "d": {"run"}})
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].TerminationMessagePath = "/dev/termination-log"
		pod.Spec.Containers[i].TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "running", allRunning)
	id := func(i int) string { return strings.TrimPrefix(p.Status.ContainerStatuses[i].ContainerID, "fake://") }
	a, b := id(0), id(1)
	fa := termFile(t, fake, a, "/dev/termination-log")
	if err := os.WriteFile(fa, []byte("bye"), 0o666); err != nil {
		t.Fatal(err)
	}
	// b writes more than its share: 12 KiB over four containers.
	if err := os.WriteFile(termFile(t, fake, b, "/dev/termination-log"), []byte(strings.Repeat("m", 4096)), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := fake.Exit(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := fake.Exit(b, 0); err != nil {
		t.Fatal(err)
	}
	p = h.waitStatus("u1", "a's message", func(p *v1.Pod) bool {
		ta := terminated(p, 0)
		return ta != nil && ta.ContainerID == "fake://"+a && p.Status.ContainerStatuses[1].State.Terminated != nil
	})
	if got := terminated(p, 0).Message; got != "bye" {
		t.Errorf("a's message %q, want bye", got)
	}
	if got := p.Status.ContainerStatuses[1].State.Terminated.Message; got != strings.Repeat("m", 3072) {
		t.Errorf("b's message is %d bytes, want its share of the pod's 12 KiB: 3072", len(got))
	}

	// Read once: a rewrite of the file after the run was seen is not.
	if err := os.WriteFile(fa, []byte("rewritten"), 0o666); err != nil {
		t.Fatal(err)
	}
	edited := pod.DeepCopy()
	edited.Annotations = map[string]string{"step": "1"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	p = h.waitStatus("u1", "the edit synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "1" })
	for _, cs := range p.Status.ContainerStatuses[:1] {
		for _, st := range []*v1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if st != nil && st.ContainerID == "fake://"+a && st.Message != "bye" {
				t.Errorf("a's first run's message became %q: read again", st.Message)
			}
		}
	}
}

// TestTerminationMessageFallbackToLogs: under FallbackToLogsOnError a
// container that failed with nothing in its file gets the tail of its
// logs (last 80 lines, at most 2048 bytes), read once; one that succeeded,
// or that wrote its file, does not.
func TestTerminationMessageFallbackToLogs(t *testing.T) {
	fake := newFake(t)
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("line %03d %s", i, strings.Repeat("z", 20)))
	}
	lf := &logsFake{Fake: fake, lines: lines}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = lf })
	pod := newPod("u1", "p", v1.RestartPolicyNever, map[string][]string{
		"fails": {enginetest.FakeScript, "exit", "2"}, "ok": {enginetest.FakeScript, "exit", "0"},
	})
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].TerminationMessagePath = "/dev/termination-log"
		pod.Spec.Containers[i].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	p := h.waitStatus("u1", "failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := strings.Join(lines[20:], "\n") + "\n"
	want = want[len(want)-2048:]
	if got := terminated(p, 0).Message; got != want {
		t.Errorf("fails' message (%d bytes) is not the last 2048 bytes of its last 80 log lines:\n%q", len(got), got)
	}
	if got := terminated(p, 1).Message; got != "" {
		t.Errorf("ok exited 0: message %q, want none", got)
	}
	reads := lf.reads.Load()
	if reads != 1 {
		t.Errorf("logs read %d times, want once (for the failed container)", reads)
	}
	edited := pod.DeepCopy()
	edited.Annotations = map[string]string{"step": "1"}
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitStatus("u1", "the edit synced", func(p *v1.Pod) bool { return p.Annotations["step"] == "1" })
	if n := lf.reads.Load(); n != reads {
		t.Errorf("logs read again by a later sync: %d reads", n)
	}
}
