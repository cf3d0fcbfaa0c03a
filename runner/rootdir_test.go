package runner_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/podrun/podrun/runner"
)

// record is the node name the root dir records ("" when none).
func record(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, runner.NodeNameFile))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantOwnedBy checks that err refuses node for the root dir of owner, and
// says what to do.
func wantOwnedBy(t *testing.T, err error, root, owner, node string) {
	t.Helper()
	owned, ok := errors.AsType[*runner.RootDirOwnerError](err)
	if !ok {
		t.Fatalf("%s on %s's root dir: want a RootDirOwnerError, got %v", node, owner, err)
	}
	if owned.RootDir != root || owned.Owner != owner || owned.NodeName != node {
		t.Errorf("error %+v, want root dir %s, owner %s, node %s", owned, root, owner, node)
	}
	for _, s := range []string{root, `node "` + owner + `"`, "--root-dir of its own", "--node-name " + owner,
		filepath.Join(root, runner.NodeNameFile)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q: %v", s, err)
		}
	}
}

// TestRootDirBelongsToOneNodeName: the first claim records its node name,
// later claims and checks of that name pass, and another name is refused,
// the record unchanged.
func TestRootDirBelongsToOneNodeName(t *testing.T) {
	root := filepath.Join(t.TempDir(), "podrun")
	if err := runner.CheckRootDir(root, "b"); err != nil {
		t.Fatalf("check of a root dir that does not exist: %v", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a check made the root dir: %v", err)
	}
	if err := runner.ClaimRootDir(root, "a"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if got := record(t, root); got != "a\n" {
		t.Fatalf("record %q, want %q", got, "a\n")
	}
	if err := runner.ClaimRootDir(root, "a"); err != nil {
		t.Errorf("the owner's claim again: %v", err)
	}
	if err := runner.CheckRootDir(root, "a"); err != nil {
		t.Errorf("the owner's check: %v", err)
	}
	wantOwnedBy(t, runner.ClaimRootDir(root, "b"), root, "a", "b")
	wantOwnedBy(t, runner.CheckRootDir(root, "b"), root, "a", "b")
	if got := record(t, root); got != "a\n" {
		t.Errorf("record after refusals %q, want %q", got, "a\n")
	}
}

// TestRootDirAdoptedAndRepointed: a root dir a podrun before the record
// filled is adopted by the first claim; checks record nothing; and with
// the record deleted (after `down --all`) the root dir is another name's.
func TestRootDirAdoptedAndRepointed(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pods", "uid-1", "volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runner.CheckRootDir(root, "b"); err != nil {
		t.Fatalf("check without a record: %v", err)
	}
	if got := record(t, root); got != "" {
		t.Fatalf("a check recorded %q", got)
	}
	if err := runner.ClaimRootDir(root, "a"); err != nil {
		t.Fatalf("claim of a root dir with pods but no record: %v", err)
	}
	if got := record(t, root); got != "a\n" {
		t.Fatalf("record %q, want %q", got, "a\n")
	}
	if err := os.Remove(filepath.Join(root, runner.NodeNameFile)); err != nil {
		t.Fatal(err)
	}
	if err := runner.ClaimRootDir(root, "b"); err != nil {
		t.Fatalf("claim after the record was deleted: %v", err)
	}
	wantOwnedBy(t, runner.ClaimRootDir(root, "a"), root, "b", "a")
}

// TestRootDirEmptyRecordRefused: an empty record (never podrun's) is
// nobody's: refused, not taken for a name, and not overwritten.
func TestRootDirEmptyRecordRefused(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, runner.NodeNameFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, own := range map[string]func(string, string) error{"claim": runner.ClaimRootDir, "check": runner.CheckRootDir} {
		err := own(root, "a")
		if err == nil || !strings.Contains(err.Error(), "names no node") {
			t.Errorf("%s: want an empty record refused, got %v", name, err)
		}
	}
	if got := record(t, root); got != "" {
		t.Errorf("record %q, want it left empty", got)
	}
}

// TestRootDirConcurrentFirstClaims: podruns of two node names that claim a
// new root dir at once: exactly one name wins, every claim of it passes,
// every claim of the other is refused, and no temporary file is left.
func TestRootDirConcurrentFirstClaims(t *testing.T) {
	const rounds, perName = 20, 8
	for round := range rounds {
		root := filepath.Join(t.TempDir(), "podrun")
		start := make(chan struct{})
		errs := map[string][]error{"a": make([]error, perName), "b": make([]error, perName)}
		var wg sync.WaitGroup
		for name, out := range errs {
			for i := range out {
				wg.Go(func() {
					<-start
					out[i] = runner.ClaimRootDir(root, name)
				})
			}
		}
		close(start)
		wg.Wait()

		winner := strings.TrimSpace(record(t, root))
		loser := map[string]string{"a": "b", "b": "a"}[winner]
		if loser == "" {
			t.Fatalf("round %d: record %q, want a or b", round, winner)
		}
		for i := range perName {
			if err := errs[winner][i]; err != nil {
				t.Errorf("round %d: %s won, yet its claim %d failed: %v", round, winner, i, err)
			}
			wantOwnedBy(t, errs[loser][i], root, winner, loser)
		}
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("round %d: root dir holds %v, want the record alone", round, entryNames(entries))
		}
	}
}

func entryNames(entries []os.DirEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out
}

// TestRootDirOneWatch: a watch holds the root dir's lock while it runs; a
// second is refused at once, and the root dir is free again when the first
// lets go (or its process ends: the kernel's lock goes with the file).
func TestRootDirOneWatch(t *testing.T) {
	root := t.TempDir()
	unlock, err := runner.LockRootDir(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.LockRootDir(root)
	if busy, ok := errors.AsType[*runner.RootDirBusyError](err); !ok || busy.RootDir != root ||
		!strings.Contains(err.Error(), "another podrun watch runs on it") {
		t.Errorf("a second watch on the root dir: %v, want a RootDirBusyError", err)
	}
	unlock()
	again, err := runner.LockRootDir(root)
	if err != nil {
		t.Fatalf("the root dir after the first let go: %v", err)
	}
	again()
}

// TestNodeNameOneWatch: a watch also holds its node name's lock, on the
// machine: a second watch of the node name is refused whatever its root
// dir (it would remove the first one's pods, which its sources do not
// define), another node name is not, and the name is free again when the
// first lets go. A node name with a "/" stays in the lock dir.
func TestNodeNameOneWatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks") // made when missing
	unlock, err := runner.LockNodeName(dir, "edge1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.LockNodeName(dir, "edge1")
	if busy, ok := errors.AsType[*runner.NodeBusyError](err); !ok || busy.NodeName != "edge1" ||
		!strings.Contains(err.Error(), "another podrun watch runs as it on this machine") {
		t.Errorf("a second watch of the node name: %v, want a NodeBusyError", err)
	}
	other, err := runner.LockNodeName(dir, "edge2")
	if err != nil {
		t.Errorf("another node name: %v", err)
	} else {
		other()
	}
	odd, err := runner.LockNodeName(dir, "../a/b")
	if err != nil {
		t.Errorf("node name with slashes: %v", err)
	} else {
		odd()
	}
	if entries, err := os.ReadDir(filepath.Dir(dir)); err != nil || len(entries) != 1 {
		t.Errorf("beside the lock dir: %v, %v; want the lock dir alone", entries, err)
	}
	unlock()
	again, err := runner.LockNodeName(dir, "edge1")
	if err != nil {
		t.Fatalf("the node name after the first let go: %v", err)
	}
	again()
	// The lock dir is the machine's: a watch that ends leaves no file.
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the lock dir after every watch ended: %v, %v; want it empty", entries, err)
	}
}

// TestUnsafeRootDirRefused: a root dir another user could change (owned by
// them, writable by group or others, or under a parent others may write
// without the sticky bit) is refused by claims and checks, each error
// naming the directory and the fix, and nothing is recorded in it. A
// symlinked root dir is judged by where it leads.
func TestUnsafeRootDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, parent, root string) // makes root under parent
		at, fix string                                  // at: the dir at fault, relative to parent ("." the parent)
	}{
		{"owned by another user", func(t *testing.T, _, root string) {
			mkdir(t, root, 0o755)
			if err := os.Chown(root, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "root", "chown 0"},
		{"writable by others", func(t *testing.T, _, root string) { mkdir(t, root, 0o777) }, "root", "chmod go-w"},
		{"writable by group", func(t *testing.T, _, root string) { mkdir(t, root, 0o775) }, "root", "chmod go-w"},
		{"parent writable by others", func(t *testing.T, parent, root string) {
			chmod(t, parent, 0o777)
			mkdir(t, root, 0o755)
		}, ".", "chmod +t"},
		{"symlink to a root dir under a parent writable by others", func(t *testing.T, parent, root string) {
			open := filepath.Join(parent, "open")
			mkdir(t, open, 0o777)
			mkdir(t, filepath.Join(open, "real"), 0o755)
			if err := os.Symlink(filepath.Join(open, "real"), root); err != nil {
				t.Fatal(err)
			}
		}, "open", "chmod +t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "root")
			tc.make(t, parent, root)
			for _, own := range []struct {
				name string
				f    func(rootDir, nodeName string) error
			}{{"claim", runner.ClaimRootDir}, {"check", runner.CheckRootDir}} {
				err := own.f(root, "a")
				unsafe, ok := errors.AsType[*runner.RootDirUnsafeError](err)
				if !ok {
					t.Fatalf("%s: want a RootDirUnsafeError, got %v", own.name, err)
				}
				at := filepath.Join(parent, tc.at)
				if tc.at == "root" {
					at = root
				}
				if unsafe.RootDir != root || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), tc.fix) {
					t.Errorf("%s: error %q; want it to name root dir %s, %s and %q", own.name, err, root, at, tc.fix)
				}
			}
			if got := record(t, root); got != "" {
				t.Errorf("an unsafe root dir was claimed: it records %q", got)
			}
		})
	}
}

// TestRootDirUnderAStickyDir: a parent others may write with the sticky
// bit set (as /tmp) cannot lose the root dir to them, and a new root dir
// is made safe.
func TestRootDirUnderAStickyDir(t *testing.T) {
	parent := t.TempDir()
	chmod(t, parent, 0o777|os.ModeSticky)
	root := filepath.Join(parent, "podrun")
	if err := runner.ClaimRootDir(root, "a"); err != nil {
		t.Fatalf("claim of a new root dir under a sticky dir: %v", err)
	}
	if err := runner.CheckRootDir(root, "a"); err != nil {
		t.Fatalf("check: %v", err)
	}
	if got := record(t, root); got != "a\n" {
		t.Errorf("root dir records %q, want a", got)
	}
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, perm) // past the umask
}

func chmod(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}
