package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"golang.org/x/sys/unix"

	"github.com/podrun/podrun/engine"
)

var _ engine.ImageService = (*Runtime)(nil)

// ListImages returns every image of the engine (whoever pulled or built it),
// from one ImageList call.
func (r *Runtime) ListImages(ctx context.Context) ([]*engine.Image, error) {
	list, err := answer(r, ctx, "list images", func(ctx context.Context) ([]image.Summary, error) {
		return r.cli.ImageList(ctx, image.ListOptions{})
	})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", wrap(err))
	}
	out := make([]*engine.Image, 0, len(list))
	for _, s := range list {
		var tags []string
		for _, t := range s.RepoTags {
			if t != "<none>:<none>" {
				tags = append(tags, t)
			}
		}
		out = append(out, &engine.Image{
			ID:        s.ID,
			RepoTags:  tags,
			Size:      s.Size,
			CreatedAt: time.Unix(s.Created, 0),
			Labels:    s.Labels,
		})
	}
	return out, nil
}

// RemoveImage removes an image with all its references, never forcing: an
// image a container uses (running or stopped) is ErrImageInUse. Docker
// removes an image given by ID only while one repository refers to it, so
// each tag and digest is removed first, then the ID, as the kubelet's
// dockershim did.
func (r *Runtime) RemoveImage(ctx context.Context, id string) error {
	ins, err := r.inspectImage(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove image %s: %w", id, wrap(err))
	}
	inUse, err := r.ImagesInUse(ctx)
	if err != nil {
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	if inUse[ins.ID] {
		return fmt.Errorf("remove image %s: %w", id, engine.ErrImageInUse)
	}
	refs := append(append([]string(nil), ins.RepoTags...), ins.RepoDigests...)
	for _, ref := range append(refs, ins.ID) {
		_, err := answer(r, ctx, "remove image "+ref, func(ctx context.Context) ([]image.DeleteResponse, error) {
			return r.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
		})
		switch {
		case err == nil, cerrdefs.IsNotFound(err):
		case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "container"):
			// A container was made from it since the check.
			return fmt.Errorf("remove image %s: %w: %v", id, engine.ErrImageInUse, err)
		default:
			return fmt.Errorf("remove image %s: %w", id, wrap(err))
		}
	}
	r.log.Info("removed image", "id", shortImageID(ins.ID), "tags", ins.RepoTags)
	return nil
}

// ImagesInUse returns the image IDs of every container of the engine, from
// one ContainerList call: podrun's of every node, and everyone else's.
func (r *Runtime) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	cs, err := r.listContainers(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, fmt.Errorf("images in use: %w", wrap(err))
	}
	out := make(map[string]bool, len(cs))
	for _, c := range cs {
		if c.ImageID != "" {
			out[c.ImageID] = true
		}
	}
	return out, nil
}

// ImageFsInfo measures the filesystem of Docker's data root (DockerRootDir)
// with statfs. That path is the engine's: the measure is right only when
// podrun runs on the engine's host (not for a remote --docker-host).
func (r *Runtime) ImageFsInfo(ctx context.Context) (*engine.FsInfo, error) {
	root, err := r.DataRoot(ctx)
	if err != nil {
		return nil, err
	}
	fs, err := Statfs(root)
	if err != nil {
		return nil, fmt.Errorf("image filesystem: %w", err)
	}
	return fs, nil
}

// DataRoot is Docker's data root directory (DockerRootDir of `docker
// info`), which holds its images and containers.
func (r *Runtime) DataRoot(ctx context.Context) (string, error) {
	info, err := r.info(ctx)
	if err != nil {
		return "", err
	}
	if info.dataRoot == "" {
		return "", fmt.Errorf("docker info: no DockerRootDir")
	}
	return info.dataRoot, nil
}

// CgroupDriver is the engine's cgroup driver (docker info's
// CgroupDriver: "cgroupfs" or "systemd").
func (r *Runtime) CgroupDriver(ctx context.Context) (string, error) {
	info, err := r.info(ctx)
	if err != nil {
		return "", err
	}
	return info.cgroupDriver, nil
}

// Statfs measures the filesystem holding path.
func Statfs(path string) (*engine.FsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return &engine.FsInfo{Path: path, CapacityBytes: st.Blocks * bs, AvailableBytes: st.Bavail * bs}, nil
}

func shortImageID(id string) string {
	return shortID(strings.TrimPrefix(id, "sha256:"))
}
