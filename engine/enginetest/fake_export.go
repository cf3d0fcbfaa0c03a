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
