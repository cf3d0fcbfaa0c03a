package runner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
