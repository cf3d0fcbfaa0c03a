package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyFileWarning: an empty file read by a one-shot command is a
// warning that names it (an error with Strict), given alone or in a
// directory, and the other files are read as ever.
func TestEmptyFileWarning(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), podNamed("a"), 0o644)
	empty := filepath.Join(dir, "empty.yaml")
	writeFile(t, empty, "# nothing yet\n\n", 0o644)

	for _, path := range []string{dir, empty} {
		snap, err := ReadPath(path, testOptions())
		if err != nil {
			t.Fatalf("ReadPath(%s): %v", path, err)
		}
		if len(snap.Warnings) != 1 || !strings.HasPrefix(snap.Warnings[0], empty+": empty: no YAML or JSON document") {
			t.Errorf("ReadPath(%s) warnings = %q", path, snap.Warnings)
		}
	}

	strict := testOptions()
	strict.Strict = true
	_, err := ReadPath(dir, strict)
	if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), empty+": empty") {
		t.Errorf("strict ReadPath: %v, want the empty file as an error", err)
	}

	// A document that is explicitly an empty List is not empty.
	writeFile(t, empty, "apiVersion: v1\nkind: List\nitems: []\n", 0o644)
	if snap, err := ReadPath(empty, testOptions()); err != nil || len(snap.Warnings) != 0 {
		t.Errorf("empty List: %v, warnings %q", err, snap.Warnings)
	}
	if err := os.Remove(empty); err != nil {
		t.Fatal(err)
	}
}
