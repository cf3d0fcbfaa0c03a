package docker

import (
	"context"
	"fmt"
	"path"
	"path/filepath"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/versions"

	"github.com/podrun/podrun/engine"
)

// imageMountAPI is the first Engine API version with the "image" mount
// type (Docker 28.0).
const imageMountAPI = "1.48"

var _ engine.ImageMounter = (*Runtime)(nil)

// MountsImages reports whether the API version negotiated with the engine
// has the image mount. The engine is asked once; a failed ask is not kept.
func (r *Runtime) MountsImages(ctx context.Context) (bool, error) {
	r.mu.Lock()
	known, ok := r.imageMounts, r.imageMountsKnown
	r.mu.Unlock()
	if ok {
		return known, nil
	}
	ping, err := r.ping(ctx)
	if err != nil {
		return false, fmt.Errorf("docker ping: %w", wrap(err))
	}
	// Negotiated here, not left to the next request: the answer must be
	// the version the container creations will use.
	r.cli.NegotiateAPIVersionPing(ping)
	known = versions.GreaterThanOrEqualTo(r.cli.ClientVersion(), imageMountAPI)
	r.mu.Lock()
	r.imageMounts, r.imageMountsKnown = known, true
	r.mu.Unlock()
	return known, nil
}

// imageMount is Docker's read-only image mount for m (m.Image set).
func imageMount(m engine.Mount) (mount.Mount, error) {
	if !path.IsAbs(m.ContainerPath) {
		return mount.Mount{}, fmt.Errorf("image mount %s: path must be absolute", m.ContainerPath)
	}
	mm := mount.Mount{Type: mount.TypeImage, Source: m.Image, Target: m.ContainerPath, ReadOnly: true}
	if m.ImageSubPath != "" {
		if !filepath.IsLocal(m.ImageSubPath) || path.Clean(m.ImageSubPath) != m.ImageSubPath {
			return mount.Mount{}, fmt.Errorf("image mount %s: subpath %q is not a clean relative path", m.ContainerPath, m.ImageSubPath)
		}
		mm.ImageOptions = &mount.ImageOptions{Subpath: m.ImageSubPath}
	}
	return mm, nil
}
