package runner_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// dataImageTar is the filesystem of the test's data image.
func dataImageTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "etc/app.conf", Mode: 0o644, Size: 6},
		{Typeflag: tar.TypeSymlink, Name: "etc/outside", Linkname: "/etc"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte("port=1")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func imageVolumePod(uid, name, ref string) *v1.Pod {
	pod := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: v1.PullIfNotPresent}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/img"},
		{Name: "data", MountPath: "/conf", SubPath: "etc/app.conf"},
	}
	return pod
}

// startReady starts a runner whose sources are ready (copies no pod names
// may be reclaimed) in a root dir of its own, which it returns.
func startReady(t *testing.T, fake *enginetest.Fake) (*harness, string) {
	root := t.TempDir()
	return start(t, fake, func(c *runner.Config) {
		c.RootDir = root
		c.SourcesReady = func() bool { return true }
	}), root
}

func mountAt(t *testing.T, cfg *engine.ContainerConfig, path string) engine.Mount {
	t.Helper()
	for _, m := range cfg.Mounts {
		if m.ContainerPath == path {
			return m
		}
	}
	t.Fatalf("no mount at %s in %+v", path, cfg.Mounts)
	return engine.Mount{}
}

// TestImageVolume: an image volume is a read-only copy of the image's
// filesystem under the root dir, made once for the pods that share the
// image, bound read-only (volumeMounts[].readOnly or not) and through
// subPath confined to it; image GC is told the image is in use; the copy
// is removed once no pod uses it.
func TestImageVolume(t *testing.T) {
	fake := newFake(t)
	img := fake.AddImage("data:1")
	fake.SetImageFilesystem("data:1", dataImageTar(t))
	h, root := startReady(t, fake)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(realRoot, "images", strings.TrimPrefix(img.ID, "sha256:"))

	a := imageVolumePod("u1", "a-node1", "data:1")
	b := imageVolumePod("u2", "b-node1", "data:1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b}}
	h.waitStatus("u1", "running", allRunning)
	h.waitStatus("u2", "running", allRunning)
	if n := fake.Calls("ExportImageFilesystem"); n != 1 {
		t.Errorf("%d exports for two pods of one image, want 1", n)
	}
	for _, uid := range []string{"u1", "u2"} {
		cfg := h.fake.ContainerConfig(h.containers(uid)[0].ID)
		m := mountAt(t, cfg, "/img")
		if m.HostPath != copyDir || !m.ReadOnly {
			t.Errorf("%s: /img is %+v, want %s read-only", uid, m, copyDir)
		}
		sub := mountAt(t, cfg, "/conf")
		if sub.HostPath != filepath.Join(copyDir, "etc/app.conf") || !sub.ReadOnly {
			t.Errorf("%s: /conf is %+v, want the copy's etc/app.conf read-only", uid, sub)
		}
	}
	if b, err := os.ReadFile(filepath.Join(copyDir, "etc/app.conf")); err != nil || string(b) != "port=1" {
		t.Errorf("the copy's etc/app.conf: %q, %v", b, err)
	}
	if inUse := h.r.ImageVolumeImages(); !inUse[img.ID] || len(inUse) != 1 {
		t.Errorf("ImageVolumeImages = %v, want %s", inUse, img.ID)
	}

	// A subPath through the image's symlink out of the volume is refused.
	c := h.addRefusedSubPath("u3", "c-node1", "etc/outside/passwd")
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{c}}

	// One pod gone: the other still uses the copy.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{a}}
	waitUntil(t, "pod a removed", func() bool { _, ok := h.r.Pod("u1"); return !ok && len(h.containers("u1")) == 0 })
	waitUntil(t, "pod c removed", func() bool { _, ok := h.r.Pod("u3"); return !ok })
	h.reclaimRounds(realRoot, 5)
	if _, err := os.Stat(copyDir); err != nil {
		t.Fatalf("the copy pod b uses was removed: %v", err)
	}

	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{b}}
	waitUntil(t, "the copy reclaimed", func() bool {
		h.step(housekeepingPeriod)
		_, err := os.Stat(copyDir)
		return errors.Is(err, fs.ErrNotExist)
	})
	if inUse := h.r.ImageVolumeImages(); len(inUse) != 0 {
		t.Errorf("ImageVolumeImages = %v after the pods are gone", inUse)
	}
	if ents := copies(t, realRoot); len(ents) != 0 {
		t.Errorf("images dir holds %v", ents)
	}
}

// TestImageVolumeNativeMount: on an engine with an image mount (Docker
// from API 1.48) an image volume is the engine's read-only mount of the
// image, its subPath resolved by the engine within it; no copy is made,
// image GC is still told the image is in use, and a subPath that leaves
// the volume is refused before the engine sees it.
func TestImageVolumeNativeMount(t *testing.T) {
	fake := newFake(t)
	fake.SetImageMounts(true)
	img := fake.AddImage("data:1")
	h, root := startReady(t, fake)

	a := imageVolumePod("u1", "a-node1", "data:1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a}}
	h.waitStatus("u1", "running", allRunning)
	cfg := h.fake.ContainerConfig(h.containers("u1")[0].ID)
	if m := mountAt(t, cfg, "/img"); m != (engine.Mount{Image: img.ID, ContainerPath: "/img", ReadOnly: true}) {
		t.Errorf("/img is %+v, want the engine's mount of %s", m, img.ID)
	}
	if m := mountAt(t, cfg, "/conf"); m != (engine.Mount{Image: img.ID, ImageSubPath: "etc/app.conf", ContainerPath: "/conf", ReadOnly: true}) {
		t.Errorf("/conf is %+v, want the engine's mount of %s's etc/app.conf", m, img.ID)
	}
	if n := fake.Calls("ExportImageFilesystem"); n != 0 {
		t.Errorf("%d exports, want none", n)
	}
	if _, err := os.Stat(filepath.Join(root, "images")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("images dir: %v, want none made", err)
	}
	if inUse := h.r.ImageVolumeImages(); !inUse[img.ID] || len(inUse) != 1 {
		t.Errorf("ImageVolumeImages = %v, want %s", inUse, img.ID)
	}

	h.addRefusedSubPath("u2", "b-node1", "../etc/passwd")
	if n := len(h.containers("u2")); n != 0 {
		t.Errorf("%d containers made with a subPath out of the image", n)
	}
}

// addRefusedSubPath adds a pod of the data:1 image volume whose /conf
// mount has subPath sub, and waits for it to be refused
// (CreateContainerConfigError).
func (h *harness) addRefusedSubPath(uid, name, sub string) *v1.Pod {
	h.t.Helper()
	p := imageVolumePod(uid, name, "data:1")
	p.Spec.Containers[0].VolumeMounts[1].SubPath = sub
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{p}}
	h.waitStatus(uid, "CreateContainerConfigError", waitingReason("CreateContainerConfigError"))
	return p
}

func waitingReason(reason string) func(p *v1.Pod) bool {
	return func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reason
	}
}

// TestImageVolumeFailures: an image volume whose image cannot be pulled
// holds the containers as ErrImagePull, then ImagePullBackOff; one whose
// export fails, as CreateContainerConfigError; both are tried again and
// the pod starts once they work. A half-made copy is not left behind.
func TestImageVolumeFailures(t *testing.T) {
	fake := newFake(t)
	fake.SetPullError("gone:1", errors.New("no such registry"))
	root := t.TempDir()
	h := start(t, fake, func(c *runner.Config) { c.RootDir = root })

	pull := imageVolumePod("u1", "pull-node1", "gone:1")
	pull.Spec.Containers[0].VolumeMounts = pull.Spec.Containers[0].VolumeMounts[:1]
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pull}}
	h.waitStatus("u1", "ErrImagePull", waitingReason("ErrImagePull"))
	h.stepUntil("ImagePullBackOff", 100*time.Millisecond, func() bool {
		p, _ := h.r.Pod("u1")
		return p != nil && waitingReason("ImagePullBackOff")(p)
	})
	if n := len(h.containers("u1")); n != 0 {
		t.Errorf("%d containers made without the volume's image", n)
	}

	fake.AddImage("data:1")
	fake.SetImageFilesystem("data:1", dataImageTar(t)[:700]) // cut short
	exp := imageVolumePod("u2", "export-node1", "data:1")
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{exp}}
	h.waitStatus("u2", "CreateContainerConfigError", waitingReason("CreateContainerConfigError"))
	if ents := copies(t, root); len(ents) != 0 {
		t.Errorf("images dir after a failed export: %v; want no copy", ents)
	}

	// Both mended: each starts at its next try.
	fake.SetPullError("gone:1", nil)
	fake.SetImageFilesystem("data:1", dataImageTar(t))
	h.stepUntil("both pods running", time.Second, func() bool {
		p1, _ := h.r.Pod("u1")
		p2, _ := h.r.Pod("u2")
		return p1 != nil && p2 != nil && allRunning(p1) && allRunning(p2)
	})
}

// stepUntil moves the clock by d at each look until cond holds.
func (h *harness) stepUntil(what string, d time.Duration, cond func() bool) {
	h.t.Helper()
	waitUntil(h.t, what, func() bool {
		if cond() {
			return true
		}
		h.step(d)
		time.Sleep(time.Millisecond) // let the runner see the new time
		return false
	})
}

// reclaimRounds waits for n whole rounds of housekeeping's reclaim of the
// image copies under root: before each, a leftover of a half-made copy is
// put in the images directory, and the round that removes it read the
// directory, then the names the pod directories hold, after it was put
// there. (A step of the clock alone may be lost to a housekeeping still
// busy, or a reclaim still running, and a sleep proves nothing.)
func (h *harness) reclaimRounds(root string, n int) {
	h.t.Helper()
	for i := range n {
		leftover := filepath.Join(root, "images", fmt.Sprintf(".extract-0123456789ab-round%d", i))
		if err := os.MkdirAll(filepath.Join(leftover, "bin"), 0o700); err != nil {
			h.t.Fatal(err)
		}
		h.stepUntil(fmt.Sprintf("reclaim round %d of %d", i+1, n), housekeepingPeriod, func() bool {
			_, err := os.Stat(leftover)
			return errors.Is(err, fs.ErrNotExist)
		})
	}
}

// TestImageVolumeCopyKeptAcrossRestart: a runner restarted over a running
// pod (adopting it, starting nothing) keeps the copy the pod mounts,
// however many housekeeping rounds pass, and removes a half-made copy a
// podrun killed mid-extraction left.
func TestImageVolumeCopyKeptAcrossRestart(t *testing.T) {
	fake := newFake(t)
	img := fake.AddImage("data:1")
	root := t.TempDir()
	tune := func(c *runner.Config) {
		c.RootDir = root
		c.SourcesReady = func() bool { return true }
	}
	h := start(t, fake, tune)
	pod := imageVolumePod("u1", "a-node1", "data:1")
	pod.Spec.Containers[0].VolumeMounts = pod.Spec.Containers[0].VolumeMounts[:1]
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	h.stop()

	copyDir := filepath.Join(root, "images", strings.TrimPrefix(img.ID, "sha256:"))
	if _, err := os.Stat(filepath.Join(copyDir, "bin", "image-id")); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(root, "images", ".extract-0123456789ab-dead")
	if err := os.MkdirAll(filepath.Join(leftover, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	exports := fake.Calls("ExportImageFilesystem")

	h2 := start(t, fake, tune)
	h2.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h2.waitStatus("u1", "adopted", allRunning)
	h2.stepUntil("the leftover removed", housekeepingPeriod, func() bool {
		_, err := os.Stat(leftover)
		return errors.Is(err, fs.ErrNotExist)
	})
	h2.reclaimRounds(root, 10)
	if _, err := os.Stat(filepath.Join(copyDir, "bin", "image-id")); err != nil {
		t.Errorf("the copy the adopted pod mounts: %v", err)
	}
	if n := fake.Calls("ExportImageFilesystem") - exports; n != 0 {
		t.Errorf("%d exports by the restarted runner, want none", n)
	}
}

// copies are the names in the images directory of root, but its lock file.
func copies(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "images"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != ".lock" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestImageVolumeDroppedFromSpec: a pod edited to drop its image volume
// (a new sandbox, new containers) no longer names the copy, which is then
// reclaimed while the pod runs on.
func TestImageVolumeDroppedFromSpec(t *testing.T) {
	fake := newFake(t)
	img := fake.AddImage("data:1")
	h, root := startReady(t, fake)
	pod := imageVolumePod("u1", "a-node1", "data:1")
	pod.Spec.Containers[0].VolumeMounts = pod.Spec.Containers[0].VolumeMounts[:1]
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	copyDir := filepath.Join(root, "images", strings.TrimPrefix(img.ID, "sha256:"))
	if _, err := os.Stat(copyDir); err != nil {
		t.Fatal(err)
	}
	first := h.containers("u1")[0].ID

	edited := pod.DeepCopy()
	edited.Spec.Volumes = nil
	edited.Spec.Containers[0].VolumeMounts = nil
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.stepUntil("the copy reclaimed", housekeepingPeriod, func() bool {
		_, err := os.Stat(copyDir)
		return errors.Is(err, fs.ErrNotExist)
	})
	// The copy may go before the replaced pod's status is published: wait
	// for the new container, not for any running one.
	h.waitStatus("u1", "running without the volume, in a new container", func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].ContainerID != "fake://"+first
	})
}
