package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// imageVolumePod mounts the test image as an image volume at /img (asking
// for it writable, which must not matter) and its bin directory, by
// subPath, at /imgbin; its container reports what it sees, then sleeps.
func imageVolumePod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %[2]s
    command:
    - sh
    - -c
    - |
      ls /img/bin/busybox >/dev/null && echo ls=ok
      if touch /img/written 2>/dev/null; then echo write=allowed; else echo write=refused; fi
      if touch /imgbin/written 2>/dev/null; then echo subwrite=allowed; else echo subwrite=refused; fi
      test -x /imgbin/busybox && echo subpath=ok
      echo done
      exec sleep 3600
    volumeMounts:
    - {name: img, mountPath: /img, readOnly: false}
    - {name: img, mountPath: /imgbin, subPath: bin}
  volumes:
  - name: img
    image: {reference: %[2]s, pullPolicy: IfNotPresent}
`, name, testImage)
}

// containerOutput is the output of the node's container named name.
func (e *env) containerOutput(name string) string {
	e.t.Helper()
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.name"] != name {
			continue
		}
		rc, err := docker.ContainerLogs(context.Background(), c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			return ""
		}
		defer rc.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := rc.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
	}
	return ""
}

// TestImageVolumeReadOnlyCopy: a pod with an image volume of the local test
// image sees the image's files at the mount, cannot write there (nor
// through a subPath of it), the copy lies under the root dir, no export
// container is left, and once the pod is removed (its file deleted) the
// copy is reclaimed.
func TestImageVolumeReadOnlyCopy(t *testing.T) {
	e := newEnv(t)
	ins, err := docker.ImageInspect(context.Background(), testImage)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(e.root, "images", strings.TrimPrefix(ins.ID, "sha256:"))

	stop := e.watch()
	defer stop(syscall.SIGTERM)
	p := e.write("imgvol.yaml", imageVolumePod("imgvol"))
	waitFor(t, "the container's report", 2*time.Minute, func() bool {
		return strings.Contains(e.containerOutput("c"), "done")
	})
	out := e.containerOutput("c")
	for _, want := range []string{"ls=ok", "write=refused", "subwrite=refused", "subpath=ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's report lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(copyDir, "bin", "busybox")); err != nil {
		t.Errorf("the copy under the root dir: %v", err)
	}
	for _, c := range e.containers() {
		if c.Labels["io.podrun.container.name"] != "c" {
			continue
		}
		ci, err := docker.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ci.Mounts {
			if (m.Destination == "/img" || m.Destination == "/imgbin") && m.RW {
				t.Errorf("mount %s is writable: %+v", m.Destination, m)
			}
			if m.Destination == "/img" && m.Source != copyDir {
				t.Errorf("/img is bound from %s, want %s", m.Source, copyDir)
			}
		}
	}
	exports, err := docker.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "io.podrun.export.node="+e.node))})
	if err != nil || len(exports) != 0 {
		t.Errorf("export containers left: %d, %v", len(exports), err)
	}

	// The pod goes; housekeeping then reclaims the copy no pod uses.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to be removed", time.Minute, func() bool { return len(e.containers()) == 0 })
	waitFor(t, "the copy to be reclaimed", time.Minute, func() bool {
		_, err := os.Stat(copyDir)
		return errors.Is(err, fs.ErrNotExist)
	})
	ents, err := os.ReadDir(filepath.Join(e.root, "images"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if ent.Name() != ".lock" {
			t.Errorf("images dir after the reclaim holds %s", ent.Name())
		}
	}
}

// TestImageVolumeDownReclaims: `podrun down` removes the copy of the pod it
// removed, and leaves no export container.
func TestImageVolumeDownReclaims(t *testing.T) {
	e := newEnv(t)
	ins, err := docker.ImageInspect(context.Background(), testImage)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(e.root, "images", strings.TrimPrefix(ins.ID, "sha256:"))
	p := e.write("imgvol.yaml", imageVolumePod("imgvol-down"))
	if r := e.podrun(2*time.Minute, "once", p, "--timeout", "90s"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(copyDir, "bin", "busybox")); err != nil {
		t.Fatalf("the copy under the root dir: %v", err)
	}
	if r := e.podrun(time.Minute, "down", p); r.code != 0 {
		t.Fatalf("down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(copyDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy after down: %v, want it gone", err)
	}
	if n := len(e.containers()); n != 0 {
		t.Errorf("%d containers after down", n)
	}
}
