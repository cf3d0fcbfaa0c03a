package cri

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogPathsStayUnderTheLogDir: a pod UID or container name from a
// manifest names a log directory only when it is one plain path element,
// and a removal never reaches outside podrun's log directory.
func TestLogPathsStayUnderTheLogDir(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "/etc", "a\x00b", "ü", string(make([]byte, 254))} {
		if safeName(bad) {
			t.Errorf("safeName(%q) = true", bad)
		}
	}
	for _, good := range []string{"web", "8d558f05-0e34-8aec-b03a-f31456d40bc3", "a_b.c"} {
		if !safeName(good) {
			t.Errorf("safeName(%q) = false", good)
		}
	}

	base := t.TempDir()
	logDir := filepath.Join(base, "logs")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(logDir, "pod_0"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(logDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Runtime{logDir: logDir}
	for _, p := range []string{outside, filepath.Join(logDir, ".."), logDir, filepath.Join(logDir, "link", "keep")} {
		if err := r.removeUnderLogDir(p); err != nil {
			t.Logf("remove %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a removal reached outside the log directory: %v", err)
	}
	if err := r.removeUnderLogDir(filepath.Join(logDir, "pod_0")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(logDir, "pod_0")); !os.IsNotExist(err) {
		t.Errorf("the pod's own log directory is still there: %v", err)
	}
}
