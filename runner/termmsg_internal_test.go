package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/podrun/podrun/engine"
)

// TestReadTerminationMessage: the file podrun bound is read back, its last
// 4096 bytes; a missing one is no message; anything planted in its place
// (a symlink out of the root dir or to another pod's file, a hard link,
// a FIFO, a directory) is refused without being followed, opened or waited on.
func TestReadTerminationMessage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := func(uid, name string, attempt int) string {
		t.Helper()
		p, err := terminationMessageFile(root, uid, name, attempt)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := file("u1", "a", 0)
	if msg, err := readTerminationMessage(root, "u1", "a", 0); err != nil || msg != "" {
		t.Errorf("empty file: %q, %v; want no message", msg, err)
	}
	if err := os.WriteFile(p, []byte("bye\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if msg, err := readTerminationMessage(root, "u1", "a", 0); err != nil || msg != "bye\n" {
		t.Errorf("got %q, %v; want %q", msg, err, "bye\n")
	}
	big := strings.Repeat("x", 5000) + strings.Repeat("y", 4096)
	if err := os.WriteFile(p, []byte(big), 0o666); err != nil {
		t.Fatal(err)
	}
	if msg, err := readTerminationMessage(root, "u1", "a", 0); err != nil || msg != strings.Repeat("y", 4096) {
		t.Errorf("a 9096-byte file gave %d bytes (%v), want its last 4096", len(msg), err)
	}
	if msg, err := readTerminationMessage(root, "u1", "a", 7); err != nil || msg != "" {
		t.Errorf("no file: %q, %v; want no message", msg, err)
	}
	if _, err := readTerminationMessage(root, "u1", "../a", 0); err == nil {
		t.Error("a container name with a slash was accepted")
	}

	other := file("u2", "b", 0)
	if err := os.WriteFile(other, []byte("other pod's"), 0o666); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func(p string) error{
		"symlink out of the root": func(p string) error { return os.Symlink(secret, p) },
		"relative symlink out": func(p string) error {
			return os.Symlink("../../../../../"+filepath.Base(filepath.Dir(secret))+"/secret", p)
		},
		"symlink to another pod": func(p string) error { return os.Symlink(other, p) },
		"relative symlink in root": func(p string) error {
			return os.Symlink(filepath.Join("..", "..", "..", "u2", "containers", "b", "0-termination-log"), p)
		},
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o666) },
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
		"hardlink":  func(p string) error { return os.Link(other, p) },
	}
	attempt := 10
	for name, do := range plant {
		attempt++
		p := file("u1", "a", attempt)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := do(p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg, err := readTerminationMessage(root, "u1", "a", attempt)
		if err == nil {
			t.Errorf("%s: read %q, want a refusal", name, msg)
		}
		if strings.Contains(msg, "secret") || strings.Contains(msg, "other pod") {
			t.Errorf("%s: disclosed %q", name, msg)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	tb.Write([]byte("abc"))
	tb.Write([]byte("defg"))
	if got := tb.String(); got != "cdefg" {
		t.Errorf("got %q, want cdefg", got)
	}
	tb.Write([]byte("0123456789"))
	if got := tb.String(); got != "56789" {
		t.Errorf("got %q, want 56789", got)
	}
}

// TestPruneTerminationLogs: the files of attempts older than a
// container's oldest run go; those of its runs and newer attempts, of
// containers without runs, and what a planted symlink points to stay.
func TestPruneTerminationLogs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	outside := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		for attempt := range 4 {
			if _, err := terminationMessageFile(root, "u1", name, attempt); err != nil {
				t.Fatal(err)
			}
		}
	}
	dirA := filepath.Join(root, "pods", "u1", "containers", "a")
	if err := os.Remove(filepath.Join(dirA, "0-termination-log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dirA, "0-termination-log")); err != nil {
		t.Fatal(err)
	}
	st := &podState{Containers: []*engine.Container{
		{ID: "a2", Name: "a", Attempt: 2}, {ID: "a3", Name: "a", Attempt: 3},
	}}
	if err := pruneTerminationLogs(root, "u1", st); err != nil {
		t.Fatal(err)
	}
	has := func(name string, attempt int) bool {
		_, err := os.Lstat(filepath.Join(root, "pods", "u1", "containers", name, strconv.Itoa(attempt)+"-termination-log"))
		return err == nil
	}
	for attempt, want := range []bool{false, false, true, true} {
		if got := has("a", attempt); got != want {
			t.Errorf("a's attempt %d file present: %v, want %v", attempt, got, want)
		}
		if !has("b", attempt) {
			t.Errorf("b (no runs) lost its attempt %d file", attempt)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symlink's target: %v", err)
	}
}

// TestTerminatedStateMessage: the runtime's start error and the
// container's termination message are both kept, joined as the kubelet
// joins them.
func TestTerminatedStateMessage(t *testing.T) {
	c := &engine.Container{ID: "c1", State: engine.StateExited, ExitCode: 1}
	for _, tc := range []struct{ runtime, msg, want string }{
		{"", "", ""},
		{"", "bye", "bye"},
		{"exec: nope: not found", "", "exec: nope: not found"},
		{"exec: nope: not found", "bye", "exec: nope: not found: bye"},
	} {
		c.Message = tc.runtime
		if got := terminatedState("docker", c, tc.msg).Message; got != tc.want {
			t.Errorf("runtime %q, file %q: %q, want %q", tc.runtime, tc.msg, got, tc.want)
		}
	}
}

// TestTerminationMessageDirSymlinkToAnotherPod: a container's directory of
// termination-message files (<pod dir>/containers/<name>) replaced by a
// symlink to another pod's, which stays inside the root dir, leads
// podrun's read and its making of the file nowhere: the other pod's
// message is neither shown as this pod's nor removed and replaced.
func TestTerminationMessageDirSymlinkToAnotherPod(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	other, err := terminationMessageFile(root, "u2", "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("other pod's"), 0o666); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(other)
	if err != nil {
		t.Fatal(err)
	}
	containers := filepath.Join(root, "pods", "u1", "containers")
	if err := os.MkdirAll(containers, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "u2", "containers", "b"), filepath.Join(containers, "a")); err != nil {
		t.Fatal(err)
	}
	if msg, err := readTerminationMessage(root, "u1", "a", 0); err == nil && msg != "" {
		t.Errorf("read through the symlinked directory: %q, want a refusal or no message", msg)
	}
	if p, err := terminationMessageFile(root, "u1", "a", 0); err == nil {
		t.Errorf("termination message file made through the symlinked directory: %s", p)
	}
	after, err := os.Stat(other)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the other pod's termination-message file was replaced (%v)", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "other pod's" {
		t.Errorf("the other pod's termination message is %q", b)
	}
}
