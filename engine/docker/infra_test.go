package docker

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/pause"
)

func TestInfraImageFromBinary(t *testing.T) {
	cgoOK := false
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err == nil && strings.TrimSpace(string(out)) == "1" {
		cgoOK = true
	}
	for _, tc := range []struct {
		name string
		cgo  bool
	}{{"static", false}, {"cgo", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.cgo && !cgoOK {
				t.Skip("cgo is not available")
			}
			testInfraImage(t, tc.cgo)
		})
	}
}

func testInfraImage(t *testing.T, cgo bool) {
	r := newRuntime(t, "rt-"+randHex(8))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	exe, err := buildPauseBin(t.TempDir(), randHex(12), cgo)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	interp, err := interpreter(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if cgo != (interp != "") {
		t.Fatalf("cgo=%v build has ELF interpreter %q", cgo, interp)
	}

	// No registry is reachable: the pull of ref fails, and the image is
	// built from exe.
	ref := "podrun.invalid/pause:3.10"
	tag, err := r.EnsureInfraImage(ctx, ref, exe)
	if err != nil {
		t.Fatalf("EnsureInfraImage: %v", err)
	}
	t.Cleanup(func() {
		if _, err := r.cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove %s: %v", tag, err)
		}
	})
	sum, err := fileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	if want := InfraImageRepo + ":" + sum[:12]; tag != want {
		t.Fatalf("EnsureInfraImage = %s, want %s", tag, want)
	}
	img, err := r.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ep := img.Config.Entrypoint; len(ep) != 2 || ep[0] != "/podrun" || ep[1] != "pause" {
		t.Errorf("entrypoint %q", ep)
	}
	if img.Config.Labels[LabelInfraImage] != "true" {
		t.Errorf("labels %v", img.Config.Labels)
	}

	// Made once: the next call reuses the tag.
	again, err := r.EnsureInfraImage(ctx, ref, exe)
	if err != nil || again != tag {
		t.Fatalf("second EnsureInfraImage = %s, %v; want %s", again, err, tag)
	}
	again2, err := r.ImageStatus(ctx, tag)
	if err != nil || again2.ID != img.ID {
		t.Fatalf("the image was rebuilt: %v", err)
	}

	// A sandbox runs it, and stops at once on SIGTERM (exit 0: the process
	// handled it; SIGKILL would be 137).
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(32), Name: "infra", Namespace: "default"}, Image: tag, Hostname: "infra"}
	id, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatalf("RunSandbox: %v", err)
	}
	time.Sleep(time.Second)
	ins, err := r.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !ins.State.Running {
		t.Fatalf("the infra container is not running: %+v", ins.State)
	}
	// The exit code below tells whether SIGTERM was handled; no timing.
	if err := r.StopSandbox(ctx, id, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ins, err = r.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ins.State.ExitCode != 0 {
		t.Errorf("infra container exit code %d, want 0", ins.State.ExitCode)
	}
	if err := r.RemoveSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestInfraImagePresent(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, "rt-"+randHex(8))
	ctx := context.Background()
	// A present ref is used as it is, without building anything.
	got, err := r.EnsureInfraImage(ctx, testImage, "/nonexistent/podrun")
	if err != nil || got != testImage {
		t.Fatalf("EnsureInfraImage(present) = %s, %v; want %s", got, err, testImage)
	}
	if _, err := r.EnsureInfraImage(ctx, "", "/nonexistent/podrun"); err == nil {
		t.Errorf("building from a missing executable: nil error")
	}
}

func TestInfraRootfsOfDynamicBinary(t *testing.T) {
	// /bin/sh is dynamically linked on the usual distributions: its rootfs
	// holds it, its interpreter and its libraries.
	f, err := elf.Open("/bin/sh")
	if err != nil {
		t.Skip(err)
	}
	interp, _ := interpreter(f)
	f.Close()
	if interp == "" {
		t.Skip("/bin/sh is static here")
	}
	files, dirs, err := infraRootfs("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, f := range files {
		paths[f.path] = true
	}
	if !paths["/podrun"] || !paths[interp] {
		t.Errorf("rootfs %v lacks /podrun or %s", paths, interp)
	}
	libc := false
	for p := range paths {
		if strings.Contains(p, "libc.so") || strings.Contains(p, "ld-musl") {
			libc = true
		}
	}
	if !libc || len(dirs) == 0 {
		t.Errorf("rootfs %v (dirs %v) lacks the C library", paths, dirs)
	}
}

// TestInfraImageFromProgram: with an infra program, the built image holds
// it alone at /pause, and a sandbox of it runs as a process of a few KiB
// that stops at once on SIGTERM.
func TestInfraImageFromProgram(t *testing.T) {
	t.Parallel()
	if pause.Program() == nil {
		t.Fatalf("no pause program for %s", runtime.GOARCH)
	}
	r := newRuntime(t, "rt-"+randHex(8))
	// Bytes past its end change nothing the program does, but give this
	// test an image tag of its own.
	r.infraProgram = append(slices.Clone(pause.Program()), []byte(randHex(16))...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tag, err := r.EnsureInfraImage(ctx, "podrun.invalid/pause:3.10", "/nonexistent/podrun")
	if err != nil {
		t.Fatalf("EnsureInfraImage: %v", err)
	}
	t.Cleanup(func() {
		if _, err := r.cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove %s: %v", tag, err)
		}
	})
	sum := sha256.Sum256(r.infraProgram)
	if want := InfraImageRepo + ":" + hex.EncodeToString(sum[:])[:12]; tag != want {
		t.Fatalf("EnsureInfraImage = %s, want %s", tag, want)
	}
	img, err := r.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ep := img.Config.Entrypoint; len(ep) != 1 || ep[0] != "/pause" {
		t.Errorf("entrypoint %q, want [/pause]", ep)
	}
	if img.Size > 4096 {
		t.Errorf("image size %d bytes, want the program alone", img.Size)
	}

	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(32), Name: "infra", Namespace: "default"}, Image: tag, Hostname: "infra"}
	id, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatalf("RunSandbox: %v", err)
	}
	ins, err := r.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !ins.State.Running || ins.State.Pid == 0 {
		t.Fatalf("the infra container is not running: %+v", ins.State)
	}
	// What the program is for: a sandbox's PID 1 holds a few pages, not
	// a Go runtime's megabytes.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ins.State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if rss := statusKiB(t, string(status), "VmRSS:"); rss > 256 {
		t.Errorf("the infra container's PID 1 has VmRSS %d KiB, want a few", rss)
	}
	if err := r.StopSandbox(ctx, id, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if ins, err = r.cli.ContainerInspect(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ins.State.ExitCode != 0 {
		t.Errorf("infra container exit code %d, want 0 (SIGTERM taken)", ins.State.ExitCode)
	}
	if err := r.RemoveSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// statusKiB is the value in kB of field (as "VmRSS:") of a /proc status.
func statusKiB(t *testing.T, status, field string) int {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s %q: %v", field, v, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in the status", field)
	return 0
}

// TestInfraImageQuietOffline: where the infra image cannot be pulled, the
// built-in one is used with one info line, no warning; once built, it is
// used without trying the default's pull again, while an image the user
// named is pulled again each time.
func TestInfraImageQuietOffline(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, "rt-"+randHex(8))
	// Its own tag: bytes past the program's end change nothing it does.
	r.infraProgram = append(slices.Clone(pause.Program()), []byte(randHex(16))...)
	var logs strings.Builder
	r.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ref = "podrun.invalid/pause:3.10"

	ensure := func(what string, defaultRef, wantPull bool) {
		t.Helper()
		logs.Reset()
		r.defaultInfraRef = defaultRef
		tag, err := r.EnsureInfraImage(ctx, ref, "/nonexistent/podrun")
		if err != nil || !strings.HasPrefix(tag, InfraImageRepo+":") {
			t.Fatalf("%s: EnsureInfraImage = %s, %v; want the built-in image", what, tag, err)
		}
		t.Cleanup(func() {
			r.cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
		})
		var info []string
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			switch {
			case strings.Contains(line, "level=WARN"), strings.Contains(line, "level=ERROR"):
				t.Errorf("%s: logged %s", what, line)
			case strings.Contains(line, "level=INFO") && !strings.Contains(line, `msg="pulling image"`):
				info = append(info, line)
			}
		}
		if len(info) != 1 || !strings.Contains(info[0], "built-in infra image used") {
			t.Errorf("%s: info lines %q, want one saying the built-in image is used", what, info)
		}
		if pulled := strings.Contains(logs.String(), `msg="pulling image"`); pulled != wantPull {
			t.Errorf("%s: pull tried %v, want %v:\n%s", what, pulled, wantPull, logs.String())
		}
	}
	ensure("the default, never built", true, true)
	ensure("the default, built before", true, false)
	ensure("an image the user named", false, true)
}
