package enginetest

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

	"github.com/podrun/podrun/engine"
)

// testExportImageFilesystem: an image's filesystem comes as a tar stream
// with at least one regular file; a missing image is ErrNotFound (no
// pull); the export leaves nothing in the node's lists, during or after.
func testExportImageFilesystem(t *testing.T, s *suite) {
	rt, _ := s.runtime(t)
	ex, ok := rt.(engine.ImageFilesystemExporter)
	if !ok {
		t.Skip("runtime does not implement ImageFilesystemExporter")
	}
	ctx := ctxFor(t)
	if _, err := ex.ExportImageFilesystem(ctx, "podrun.invalid/no-such-image:"+randHex(6)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ExportImageFilesystem(missing) = %v, want ErrNotFound", err)
	}
	rc, err := ex.ExportImageFilesystem(ctx, s.env.Image)
	if err != nil {
		t.Fatalf("ExportImageFilesystem(%s): %v", s.env.Image, err)
	}
	defer rc.Close()
	if cs, err := rt.ListContainers(ctx); err != nil || len(cs) != 0 {
		t.Errorf("during an export, ListContainers = %d containers, %v; want none", len(cs), err)
	}
	tr := tar.NewReader(rc)
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the export: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			files++
		}
	}
	if files == 0 {
		t.Error("the export holds no regular file")
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if cs, err := rt.ListContainers(ctx); err != nil || len(cs) != 0 {
		t.Errorf("after an export, ListContainers = %d containers, %v; want none", len(cs), err)
	}
}
