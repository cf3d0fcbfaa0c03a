package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/distribution/reference"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/engine"
)

// ImageStatus returns the local image ref resolves to, or ErrNotFound.
func (r *Runtime) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, wrap(err))
	}
	img := st.GetImage()
	if img == nil {
		return nil, fmt.Errorf("image %s: %w", ref, engine.ErrNotFound)
	}
	out := imageOf(img)
	return out, nil
}

// imageOf is the engine's view of a CRI image.
func imageOf(img *runtimeapi.Image) *engine.Image {
	out := &engine.Image{ID: img.Id, RepoTags: repoTags(img.RepoTags), Size: int64(img.Size)}
	switch {
	case img.Username != "":
		out.User = img.Username
	case img.Uid != nil:
		out.User = strconv.FormatInt(img.Uid.Value, 10)
	}
	return out
}

// repoTags are the runtime's tags (fully qualified: docker.io/library/x:1)
// and their familiar forms (x:1), as manifests and Docker name images.
func repoTags(tags []string) []string {
	out := slices.Clone(tags)
	for _, t := range tags {
		named, err := reference.ParseNormalizedNamed(t)
		if err != nil {
			continue
		}
		if f := reference.FamiliarString(named); f != t && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// PullImage pulls ref through the runtime's image service (auth nil:
// anonymously) and returns the local image.
//
// The credentials go without their server address, as the kubelet sends
// them: they were chosen for ref's registry already, and containerd reads
// the address as a URL, so a Docker config's "host:port" key is an error
// there and a bare "host" matches no registry (the pull goes anonymous).
func (r *Runtime) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	var a *runtimeapi.AuthConfig
	if auth != nil {
		a = &runtimeapi.AuthConfig{
			Username: auth.Username, Password: auth.Password, Auth: auth.Auth,
			IdentityToken: auth.IdentityToken, RegistryToken: auth.RegistryToken,
		}
	}
	pull := func() (*engine.Image, error) {
		// The runner logs the pull's start and end (with its duration).
		if _, err := r.is.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, a, nil); err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, wrap(err))
		}
		img, err := r.ImageStatus(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
		return img, nil
	}
	if r.pulls == nil {
		return pull()
	}
	// What ref names now, if anything: a pull that ends with the same ID
	// (imagePullPolicy Always of a tag that has not moved) downloaded
	// nothing and is reported up to date, as Docker reports it.
	var existed string
	if img, err := r.ImageStatus(ctx, ref); err == nil {
		existed = img.ID
	}
	return r.pulls.pull(ctx, ref, existed, pull)
}

// ListImages returns every image of the runtime, with the time each was
// made (from its config, asked once per image).
func (r *Runtime) ListImages(ctx context.Context) ([]*engine.Image, error) {
	list, err := r.is.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", wrap(err))
	}
	out := make([]*engine.Image, 0, len(list))
	for _, img := range list {
		e := imageOf(img)
		e.CreatedAt, err = r.imageCreatedAt(ctx, img.Id)
		if err != nil {
			return nil, fmt.Errorf("list images: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// imageCreatedAt is when the image id was made, from its OCI config.
func (r *Runtime) imageCreatedAt(ctx context.Context, id string) (time.Time, error) {
	r.mu.Lock()
	t, ok := r.imageCreated[id]
	r.mu.Unlock()
	if ok {
		return t, nil
	}
	st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id}, true)
	if err != nil {
		return time.Time{}, wrap(err)
	}
	var info struct {
		ImageSpec struct {
			Created time.Time `json:"created"`
		} `json:"imageSpec"`
	}
	if raw := st.GetInfo()["info"]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &info) // no creation time: zero
	}
	t = info.ImageSpec.Created
	r.mu.Lock()
	r.imageCreated[id] = t
	r.mu.Unlock()
	return t, nil
}

// RemoveImage removes an image (by ID or reference) with all its tags,
// unless a container of the runtime uses it.
func (r *Runtime) RemoveImage(ctx context.Context, id string) error {
	st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id}, false)
	if err != nil {
		return fmt.Errorf("remove image %s: %w", id, wrap(err))
	}
	img := st.GetImage()
	if img == nil {
		return nil
	}
	inUse, err := r.ImagesInUse(ctx)
	if err != nil {
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	if inUse[img.Id] {
		return fmt.Errorf("remove image %s: %w", id, engine.ErrImageInUse)
	}
	// The CRI removes an image by ID with every tag.
	if err := r.is.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.Id}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove image %s: %w", id, wrap(err))
	}
	return nil
}

// ImagesInUse returns the IDs of the images the runtime's containers use,
// any node's or none's, sandboxes' (the runtime's sandbox image) included.
func (r *Runtime) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("images in use: %w", wrap(err))
	}
	out := map[string]bool{}
	for _, c := range cs {
		out[c.ImageRef] = true
	}
	sbs, err := r.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("images in use: %w", wrap(err))
	}
	if len(sbs) > 0 {
		info, err := r.runtimeInfo(ctx)
		if err != nil {
			return nil, err
		}
		if img, err := r.ImageStatus(ctx, info.SandboxImage); err == nil {
			out[img.ID] = true
		}
	}
	return out, nil
}

// ImageFsInfo measures the filesystem that holds the runtime's images.
func (r *Runtime) ImageFsInfo(ctx context.Context) (*engine.FsInfo, error) {
	root, err := r.DataRoot(ctx)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("image filesystem %s: %w", root, err)
	}
	return &engine.FsInfo{
		Path:           root,
		CapacityBytes:  st.Blocks * uint64(st.Bsize),
		AvailableBytes: st.Bavail * uint64(st.Bsize),
	}, nil
}
