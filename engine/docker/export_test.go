package docker

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/podrun/podrun/engine"
)

// exportContainers are the export containers of r's node.
func exportContainers(t *testing.T, r *Runtime) []string {
	t.Helper()
	cs, err := r.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", LabelExportNode+"="+r.node))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestExportImageFilesystem: the busybox test image's files come out, the
// container made for the export exists until the stream is closed and not
// after, a failed export leaves none, and the next export removes one a
// killed podrun left behind.
func TestExportImageFilesystem(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, "rt-"+randHex(8))
	ctx := context.Background()

	if _, err := r.ExportImageFilesystem(ctx, "podrun.invalid/none:"+randHex(6)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("export of a missing image = %v, want ErrNotFound", err)
	}
	if ids := exportContainers(t, r); len(ids) != 0 {
		t.Errorf("a failed export left containers %v", ids)
	}

	// A leftover, as a podrun killed mid-export leaves it.
	left, err := r.cli.ContainerCreate(ctx, &container.Config{Image: testImage, Entrypoint: []string{exportEntrypoint},
		Labels: map[string]string{LabelExportNode: r.node}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.removeExport(left.ID) })

	rc, err := r.ExportImageFilesystem(ctx, testImage)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ids := exportContainers(t, r)
	if len(ids) != 1 || ids[0] == left.ID {
		t.Errorf("during the export: export containers %v, want one, not the leftover %s", ids, shortID(left.ID))
	}
	tr := tar.NewReader(rc)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "bin/busybox" && h.Typeflag == tar.TypeReg {
			found = true
		}
	}
	if !found {
		t.Error("bin/busybox is not in the export")
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := exportContainers(t, r); len(ids) != 0 {
		t.Errorf("after Close: export containers %v, want none", ids)
	}
}

// TestExportOwner: an export container's owner is this process while it
// runs, and a process that is gone (or a pid reused) is not.
func TestExportOwner(t *testing.T) {
	self := selfOwner()
	if !ownerAlive(self) {
		t.Fatalf("this process (%s) is not alive", self)
	}
	pid, _, _ := strings.Cut(self, ":")
	for _, gone := range []string{"", "x", pid + ":1", "999999999:123", pid} {
		if ownerAlive(gone) {
			t.Errorf("owner %q alive", gone)
		}
	}
}
