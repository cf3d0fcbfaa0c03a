package enginetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/podrun/podrun/engine"
)

// SetImageFilesystem makes tarData the filesystem ExportImageFilesystem
// gives for the local image ref (by then present: AddImage it first).
// Without it an image's filesystem is FakeImageFilesystem's.
func (f *Fake) SetImageFilesystem(ref string, tarData []byte) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	img := f.s.lookupImage(ref)
	if img == nil {
		panic("SetImageFilesystem: no image " + ref)
	}
	f.s.imageFiles[img.ID] = bytes.Clone(tarData)
}

// FakeImageFilesystem is the filesystem of a fake image of ID id: a
// directory bin (0755) holding a file "image-id" (0644) whose content is
// the ID.
func FakeImageFilesystem(id string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/image-id", Mode: 0o644, Size: int64(len(id))})
	_, _ = tw.Write([]byte(id))
	_ = tw.Close()
	return buf.Bytes()
}

// ExportImageFilesystem returns the image's filesystem (SetImageFilesystem,
// or FakeImageFilesystem), or ErrNotFound. It makes no container.
func (f *Fake) ExportImageFilesystem(ctx context.Context, ref string) (io.ReadCloser, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ExportImageFilesystem"); err != nil {
		return nil, err
	}
	img := f.s.lookupImage(ref)
	if img == nil {
		return nil, fmt.Errorf("export image %s: %w", ref, engine.ErrNotFound)
	}
	data, ok := f.s.imageFiles[img.ID]
	if !ok {
		data = FakeImageFilesystem(img.ID)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// SetImageMounts makes the fake mount images itself (Mount.Image), as
// Docker from API 1.48; by default it does not, as Docker before.
func (f *Fake) SetImageMounts(on bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.imageMounts = on
}

// MountsImages reports SetImageMounts' setting.
func (f *Fake) MountsImages(ctx context.Context) (bool, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("MountsImages"); err != nil {
		return false, err
	}
	return f.s.imageMounts, nil
}

// checkImageMounts refuses image mounts as Docker does: all of them where
// the engine has none, and one of an image it does not have.
func (s *fakeStore) checkImageMounts(mounts []engine.Mount) error {
	for _, m := range mounts {
		if m.Image == "" {
			continue
		}
		if !s.imageMounts {
			return fmt.Errorf("mount of image %s at %s: the engine has no image mount", m.Image, m.ContainerPath)
		}
		if s.lookupImage(m.Image) == nil {
			return fmt.Errorf("mount of image %s: %w", m.Image, engine.ErrNotFound)
		}
	}
	return nil
}
