//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podrun/podrun/bench/benchkit"
)

// badManifest is one entry of the corpus: make puts it at path, to be
// known by the name final (a file named x.yaml, or something else by that
// name; replace makes it under another name first).
type badManifest struct {
	name string
	make func(path, final string) error
	// dirOnly: validating x.yaml itself means validating a directory (of
	// no manifest, which is fine); only its directory is validated.
	dirOnly bool
}

var victim = benchkit.Pod{Name: "victim"}

func writeBad(content string) func(string, string) error {
	return func(path, _ string) error { return os.WriteFile(path, []byte(content), 0o600) }
}

func badCorpus() []badManifest {
	good := victim.YAML()
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	big := strings.Repeat("# padding to make the manifest 11 MiB, over the 10 MiB limit ...........\n", (11<<20)/72+1) + good
	return []badManifest{
		{name: "truncated", make: writeBad(good[:len(good)*6/10])},
		{name: "invalid YAML", make: writeBad("apiVersion: v1\nkind: Pod\nmetadata: {name: victim\nspec:\n  containers: [\n")},
		// An unknown field alone is dropped, as the kubelet drops it; a typo
		// of the required image is an error.
		{name: "unknown field", make: writeBad(strings.Replace(good, "image:", "imagee:", 1))},
		{name: "wrong type", make: writeBad(strings.Replace(good, "terminationGracePeriodSeconds: 0", `terminationGracePeriodSeconds: "soon"`, 1))},
		{name: "invalid value", make: writeBad(strings.Replace(good, "  containers:", "  restartPolicy: Sometimes\n  containers:", 1))},
		{name: "11 MiB file", make: writeBad(big)},
		{name: "binary garbage", make: writeBad(string(garbage))},
		{name: "symlink loop", make: func(path, final string) error { return os.Symlink(filepath.Base(final), path) }},
		{name: "directory named x.yaml", make: func(path, _ string) error { return os.Mkdir(path, 0o755) }, dirOnly: true},
		// Root reads any file whatever its mode: /proc/self/mem is a regular
		// file that no read at offset 0 succeeds on (EIO), whoever reads it.
		{name: "unreadable file", make: func(path, _ string) error { return os.Symlink("/proc/self/mem", path) }},
	}
}

// TestBadManifests: each bad manifest is rejected by `podrun validate`
// (exit 2, naming the file), alone and in its directory; and when it
// replaces the manifest of a pod running under watch, the pod is untouched.
func TestBadManifests(t *testing.T) {
	badManifests(t, "bad-manifests", newNode(t, "chaos-bad"))
}

// TestBadManifestsCRI is TestBadManifests with the victim pod on
// containerd (the CRI engine).
func TestBadManifestsCRI(t *testing.T) {
	badManifests(t, "bad-manifests-cri", newCRINode(t, "chaos-bad-cri"))
}

func badManifests(t *testing.T, name string, n *node) {
	sum := newSummary(t, name)
	path := filepath.Join(n.dir, "victim.yaml")
	if err := benchkit.WriteFile(path, victim.YAML()); err != nil {
		t.Fatal(err)
	}
	pr, err := n.p.Start("watch", "--path", n.dir, "--healthz-port", "0", "--file-check-frequency", "1s")
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	ctx := ctxFor(t, 20*time.Minute)
	if _, err := n.waitConverged(ctx, 2, true, 2*time.Minute); err != nil {
		t.Fatalf("victim pod: %v\n%s", err, pr.Stderr(4000))
	}
	before, err := n.state(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, bad := range badCorpus() {
		err := func() error {
			// podrun validate, of the file and of its directory.
			dir := t.TempDir()
			x := filepath.Join(dir, "x.yaml")
			if err := bad.make(x, x); err != nil {
				return err
			}
			args := []string{x, dir}
			if bad.dirOnly {
				args = args[1:]
			}
			for _, arg := range args {
				res, err := n.p.Run(ctx, time.Minute, "validate", arg)
				if err != nil {
					return err
				}
				if res.Code != 2 || !strings.Contains(res.Stderr, "x.yaml") {
					return fmt.Errorf("validate %s: exit %d, want 2 and an error naming x.yaml:\n%s", arg, res.Code, res.Stderr)
				}
				t.Logf("%s: validate %s: %s", bad.name, filepath.Base(arg), firstLine(res.Stderr))
			}

			// The running pod's manifest replaced by it, atomically: a
			// moment without the file would be a deletion, which rightly
			// removes the pod.
			if err := replace(path, bad.make); err != nil {
				return err
			}
			time.Sleep(3 * time.Second) // the change, its debounce, and a periodic rescan
			if err := n.untouched(ctx, before, pr); err != nil {
				return fmt.Errorf("with the bad manifest in place: %w", err)
			}
			if err := replace(path, writeBad(victim.YAML())); err != nil {
				return err
			}
			time.Sleep(1500 * time.Millisecond)
			if err := n.untouched(ctx, before, pr); err != nil {
				return fmt.Errorf("with the good manifest back: %w", err)
			}
			return nil
		}()
		t.Logf("%s: err=%v", bad.name, err)
		if err != nil {
			err = fmt.Errorf("%s: %w\npodrun's log:\n%s", bad.name, err, pr.Stderr(3000))
		}
		sum.trial(err)
	}
	sum.note("%d cases: %s", len(badCorpus()), corpusNames())
}

// replace puts what make makes at path in one step: made at a temporary
// name, then swapped with what is at path (renameat2 RENAME_EXCHANGE, which
// swaps a file and a directory too), and the old one removed.
func replace(path string, make func(string, string) error) error {
	tmp := filepath.Join(filepath.Dir(path), ".replace-"+filepath.Base(path))
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := make(tmp, path); err != nil {
		return err
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("swap %s and %s: %w", tmp, path, err)
	}
	return os.RemoveAll(tmp)
}

// untouched checks that the node runs exactly what it ran before, and that
// podrun is alive.
func (n *node) untouched(ctx context.Context, before state, pr *benchkit.Proc) error {
	if pr.Exited() {
		return fmt.Errorf("podrun watch exited:\n%s", pr.Stderr(4000))
	}
	now, err := n.state(ctx)
	if err != nil {
		return err
	}
	if err := now.check(len(before.running), false); err != nil {
		return err
	}
	for k, id := range before.running {
		if now.running[k] != id {
			return fmt.Errorf("%s was %.12s, is %.12s", k, id, now.running[k])
		}
	}
	return nil
}

func corpusNames() string {
	var names []string
	for _, b := range badCorpus() {
		names = append(names, b.name)
	}
	return strings.Join(names, ", ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
