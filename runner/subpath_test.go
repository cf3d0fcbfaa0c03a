package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// TestSubPathBindHoldsTheFileNotThePath: what the engine is handed for a
// subPath of a writable volume is podrun's bind of the directory checked,
// so a container that swaps that directory for a symlink out of the
// volume afterwards (before the engine binds it) changes nothing the
// engine sees. A second config of the same container keeps the one bind;
// one of another directory replaces it; an eviction's removal of the
// emptyDirs, and teardown, unmount it.
func TestSubPathBindHoldsTheFileNotThePath(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(nil), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	scratch := vols["scratch"].HostPath
	if err := os.MkdirAll(filepath.Join(scratch, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "data", "mine"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Runner{cfg: Config{RootDir: e.root}}
	config := func(sub string) string {
		t.Helper()
		c := v1.Container{Name: "c", Image: "img",
			VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/m", SubPath: sub}}}
		cfg, err := r.containerConfig(pod, &c, engine.ContainerTypeApp, 0, vols, podEnv{})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Mounts[0].HostPath
	}
	host := config("data")

	// The container's swap, after podrun's check.
	if err := os.Rename(filepath.Join(scratch, "data"), filepath.Join(scratch, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(scratch, "data")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "mine")); err != nil || string(b) != "mine" {
		t.Errorf("the bound path reads %q (%v), want the checked directory's file", b, err)
	}
	if _, err := os.Stat(filepath.Join(host, "sentinel")); err == nil {
		t.Error("the bound path shows the outside directory")
	}

	mountsAt := func() int {
		t.Helper()
		ms, err := mountsUnder(host)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	if config("moved") != host || mountsAt() != 1 {
		t.Errorf("the same directory again: %d mounts at %s, want the one kept", mountsAt(), host)
	}
	if err := os.MkdirAll(filepath.Join(scratch, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if config("other") != host || mountsAt() != 1 {
		t.Errorf("another directory: %d mounts at %s, want one, replaced", mountsAt(), host)
	}
	if _, err := os.Stat(filepath.Join(host, "mine")); err == nil {
		t.Error("the bind still shows the first directory")
	}
	// An eviction's removal of the emptyDirs takes their binds along.
	if err := removeEmptyDirs(e.root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mountsUnder(e.root); len(ms) != 0 {
		t.Errorf("after the emptyDirs' removal, mounted: %v", ms)
	}
	if err := removePodDir(e.root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mountsUnder(e.root); len(ms) != 0 {
		t.Errorf("after teardown, mounted: %v", ms)
	}
}

// TestMountsUnderOddWhitespace: a mount whose path holds whitespace the
// kernel does not escape in mountinfo (\v, \f, \r; a subPath may) is found,
// and so unmounted at teardown.
func TestMountsUnderOddWhitespace(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src\v\f\rx"), filepath.Join(dir, "dst\v y")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unmountUnder(t, dir) })
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Mount(fdPath(f), dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	ms, err := mountsUnder(real)
	if err != nil || len(ms) != 1 || !strings.HasSuffix(ms[0], "dst\v y") {
		t.Fatalf("mountsUnder = %q, %v; want the one bind", ms, err)
	}
}

// TestSubPathBindSendsNoUnmountToTheHost: a subPath of a hostPath on a
// shared mount (systemd makes nearly all mounts shared) under which the
// host mounts something after the bind (a network namespace under /run,
// say) keeps that host mount when the pod is torn down: the bind is a
// slave of its source, so its unmount, and that of what it received, is
// not sent back. A Bidirectional mount's bind is shared as well.
func TestSubPathBindSendsNoUnmountToTheHost(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, dir) })
	host, root := filepath.Join(dir, "host"), filepath.Join(dir, "root")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", host, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", host, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sub/y", "both"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(sub string, index int, shared bool) string {
		t.Helper()
		f, _, err := subPathSource(volumeSource{HostPath: host, Host: true}, sub)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		target, err := bindSubPath(root, "uid-1", "vol", "c", index, f, shared)
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
	slave := bind("sub", 0, false)
	both := bind("both", 1, true)
	for target, want := range map[string][]string{slave: {"master:"}, both: {"master:", "shared:"}} {
		opts := propagationOf(t, target)
		for _, w := range want {
			if !strings.Contains(opts, w) {
				t.Errorf("%s: propagation %q, want %s", target, opts, w)
			}
		}
		if len(want) == 1 && strings.Contains(opts, "shared:") {
			t.Errorf("%s: propagation %q, want a slave only", target, opts)
		}
	}

	// The host's mount under the source, after the bind: it shows in the
	// bind, and survives the pod.
	y := filepath.Join(host, "sub", "y")
	if err := unix.Mount("tmpfs", y, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := isMountPoint(filepath.Join(slave, "y")); !mounted {
		t.Error("the host's later mount does not show in the bind")
	}
	if err := removePodDir(root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(y); err != nil || !mounted {
		t.Errorf("the host's mount at %s is gone after the pod's teardown (%v)", y, err)
	}
}

// propagationOf is the optional fields (shared:N, master:N) of the mount
// at target in mountinfo.
func propagationOf(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Split(line, " ")
		if len(fields) > 7 && unescapeMountPath(fields[4]) == target {
			opt := fields[6:]
			for i, f := range opt {
				if f == "-" {
					opt = opt[:i]
					break
				}
			}
			out = strings.Join(opt, " ") // the last (top) mount there
		}
	}
	return out
}
