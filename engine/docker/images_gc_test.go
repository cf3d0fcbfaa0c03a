package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

// TestImageService runs the ImageService conformance tests, which need
// images they may remove: each is imported from a one-file tar of random
// content (so it has an ID of its own, shared with no other image). Not
// while e2e's TestImagesGC runs on the same dockerd: its guard makes a
// container of every image that appears, this test's too, which then is
// in use when the test's own container is gone.
func TestImageService(t *testing.T) {
	enginetest.HoldEngineImages(t)
	env := dockerEnv(t)
	probe := newRuntime(t, "rt-probe-"+randHex(6))
	env.MakeImage = func(t *testing.T, refs ...string) string {
		t.Helper()
		return importImage(t, probe, refs...)
	}
	enginetest.RunImageService(t, func(t *testing.T, node string) engine.Runtime { return newRuntime(t, node) }, env)
}

// importImage imports a tiny image of its own under refs and removes it at
// the end of the test.
func importImage(t *testing.T, r *Runtime, refs ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte(randHex(32) + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "id", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, refs[0], image.ImportOptions{})
	if err != nil {
		t.Fatalf("import %s: %v", refs[0], err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	for _, ref := range refs[1:] {
		if err := r.cli.ImageTag(ctx, refs[0], ref); err != nil {
			t.Fatalf("tag %s: %v", ref, err)
		}
	}
	img, err := r.ImageStatus(ctx, refs[0])
	if err != nil {
		t.Fatalf("imported image: %v", err)
	}
	t.Cleanup(func() {
		for _, ref := range refs {
			r.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{})
		}
	})
	return img.ID
}

func TestStatfs(t *testing.T) {
	fs, err := Statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fs.CapacityBytes == 0 || fs.AvailableBytes > fs.CapacityBytes {
		t.Errorf("Statfs = %+v", fs)
	}
	if _, err := Statfs("/no/such/dir"); err == nil {
		t.Error("Statfs of a missing path: nil error")
	}
}
