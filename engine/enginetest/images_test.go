package enginetest

import (
	"testing"

	"github.com/podrun/podrun/engine"
)

// TestFakeImageService runs the ImageService conformance tests against the
// fake with MakeImage set (Run, in TestFakeConformance, has none).
func TestFakeImageService(t *testing.T) {
	newRuntime, env := NewFakeSuite()
	RunImageService(t, newRuntime, env)
}

func TestFakeImageFsAccounting(t *testing.T) {
	ctx := ctxFor(t)
	f := NewFake("n")
	f.SetImageFs(100, 50)
	f.PutImage(engine.Image{ID: "sha256:a", Size: 10, RepoTags: []string{"a:1", "a:2"}})
	if fs, _ := f.ImageFsInfo(ctx); fs.AvailableBytes != 40 {
		t.Fatalf("after adding 10 bytes: %+v", fs)
	}
	if err := f.RemoveImage(ctx, "a:2"); err != nil {
		t.Fatal(err)
	}
	fs, _ := f.ImageFsInfo(ctx)
	imgs, _ := f.ListImages(ctx)
	if fs.AvailableBytes != 50 || len(imgs) != 0 {
		t.Fatalf("after removing it by one of its tags: %+v, images %v", fs, imgs)
	}
}
