package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/podrun/podrun/engine"
)

// LabelExportNode marks the containers ExportImageFilesystem makes (never
// started) with the node whose podrun made them. It is not LabelNode: such
// a container is no pod's, and must not show in this node's lists (the
// sync core would take it for a pod, container GC for a dead container).
// A podrun killed during an export leaves one behind; the next export of
// that node removes it.
const LabelExportNode = "io.podrun.export.node"

// LabelExportOwner names the process that made an export container
// ("<pid>:<start time in clock ticks>", from /proc): a leftover is one
// whose owner is gone, so that two podruns of one node (watch, and a down
// beside it) never remove each other's export mid-stream.
const LabelExportOwner = "io.podrun.export.owner"

// exportEntrypoint is the entrypoint of export containers: Docker refuses
// to create a container of an image with neither entrypoint nor command,
// and it is never run.
const exportEntrypoint = "/podrun-image-export"

var _ engine.ImageFilesystemExporter = (*Runtime)(nil)

// ExportImageFilesystem returns the filesystem of the local image ref as a
// tar stream: Docker's export of a container created (never started) from
// the image. API 1.41 has no image mount, and an image's save is its
// layers, not their union. The container is removed when the stream is
// closed, and on every error. ErrNotFound if the image is not present.
func (r *Runtime) ExportImageFilesystem(ctx context.Context, ref string) (io.ReadCloser, error) {
	r.removeExportLeftovers(ctx)
	cfg := &container.Config{
		Image:           ref,
		Entrypoint:      []string{exportEntrypoint},
		Cmd:             nil,
		NetworkDisabled: true,
		Labels:          map[string]string{LabelExportNode: r.node, LabelExportOwner: selfOwner()},
	}
	hc := &container.HostConfig{NetworkMode: "none"}
	resp, err := r.create(ctx, cfg, hc, "")
	if err != nil {
		return nil, fmt.Errorf("export image %s: create container: %w", ref, wrap(err))
	}
	id := resp.ID
	r.exports.add(id)
	// Bounded until the stream opens: it lasts until it is closed.
	rc, end, err := open(r, ctx, "export container "+shortID(id), func(ctx context.Context) (io.ReadCloser, error) {
		return r.cli.ContainerExport(ctx, id)
	}, closeStream)
	if err != nil {
		r.removeExport(id)
		return nil, fmt.Errorf("export image %s: %w", ref, wrap(err))
	}
	return &exportStream{ReadCloser: rc, done: func() error { end(); return r.removeExport(id) }}, nil
}

// removeExport removes the export container id, with a context of its own
// (the caller's may be over once the stream is closed), bounded by the
// call timeout alone.
func (r *Runtime) removeExport(id string) error {
	defer r.exports.remove(id)
	err := r.removeForce(context.Background(), id)
	if err != nil && !errors.Is(wrap(err), engine.ErrNotFound) {
		r.log.Warn("export container not removed", "id", shortID(id), "err", err)
		return fmt.Errorf("remove export container %s: %w", shortID(id), wrap(err))
	}
	return nil
}

// removeExportLeftovers removes this node's export containers that no
// export of this runtime holds: those of a podrun killed mid-export.
func (r *Runtime) removeExportLeftovers(ctx context.Context) {
	cs, err := r.listContainers(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", LabelExportNode+"="+r.node))})
	if err != nil {
		return
	}
	for _, c := range cs {
		if r.exports.has(c.ID) || ownerAlive(c.Labels[LabelExportOwner]) {
			continue
		}
		if err := r.removeExport(c.ID); err == nil {
			r.log.Info("removed leftover export container", "id", shortID(c.ID))
		}
	}
}

// exportStream is an export's tar stream; closing it removes the container.
type exportStream struct {
	io.ReadCloser
	once sync.Once
	done func() error
	err  error
}

func (s *exportStream) Close() error {
	s.once.Do(func() {
		s.err = errors.Join(s.ReadCloser.Close(), s.done())
	})
	return s.err
}

// exportSet is the IDs of the export containers in use.
type exportSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *exportSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	s.ids[id] = true
}

func (s *exportSet) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}

func (s *exportSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// selfOwner is this process as LabelExportOwner names it.
func selfOwner() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + ":" + processStart(pid)
}

// ownerAlive reports whether the process owner names (LabelExportOwner)
// still runs: the same pid, started at the same time (a pid is reused).
// An owner that cannot be read is gone.
func ownerAlive(owner string) bool {
	pid, start, ok := strings.Cut(owner, ":")
	if !ok || start == "" {
		return false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return processStart(n) == start
}

// processStart is the start time of process pid (field 22 of
// /proc/<pid>/stat, in clock ticks since boot), or "" when unknown.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command (field 2) may hold spaces and parentheses: count from
	// the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}
