package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/podrun/podrun/engine"
)

// ImageStatus returns the local image ref names, or ErrNotFound.
func (r *Runtime) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	img, err := r.inspectImage(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, wrap(err))
	}
	out := &engine.Image{ID: img.ID, RepoTags: img.RepoTags, Size: img.Size}
	if t, err := time.Parse(time.RFC3339Nano, img.Created); err == nil {
		out.CreatedAt = t
	}
	if img.Config != nil {
		out.Labels = img.Config.Labels
		out.User = img.Config.User
	}
	return out, nil
}

// DefaultPullProgressDeadline is how long a pull may report no progress
// before it is cancelled: the kubelet's --image-pull-progress-deadline
// default (of its Docker runtime, dockershim).
const DefaultPullProgressDeadline = time.Minute

// PullImage pulls ref (with auth, when given) and returns the local image.
// It reads Docker's progress stream to its end: a pull that fails midway
// reports its error there, not in the HTTP status. A pull that reports no
// progress for the runtime's pull deadline (a registry that stalled mid
// layer: Docker waits on it for good) is cancelled, as the kubelet's
// dockershim cancels it, so that the pod's pull fails and is retried
// under the back-off rather than hang.
func (r *Runtime) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := &noProgressError{deadline: r.pullDeadline}
	watchdog := time.AfterFunc(r.pullDeadline, func() { cancel(stalled) })
	defer watchdog.Stop()
	img, err := r.pullImage(ctx, ref, auth, func() { watchdog.Reset(r.pullDeadline) })
	if err != nil && errors.Is(context.Cause(ctx), stalled) {
		return nil, fmt.Errorf("pull %s: %w", ref, stalled)
	}
	return img, err
}

// noProgressError is a pull cancelled for want of progress.
type noProgressError struct{ deadline time.Duration }

func (e *noProgressError) Error() string {
	return fmt.Sprintf("cancelled: no progress for %s (--image-pull-progress-deadline)", e.deadline)
}

// pullImage is PullImage without its deadline; progressed is called at
// each progress message.
func (r *Runtime) pullImage(ctx context.Context, ref string, auth *engine.AuthConfig, progressed func()) (*engine.Image, error) {
	var opts image.PullOptions
	if auth != nil {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			Auth:          auth.Auth,
			ServerAddress: auth.ServerAddress,
			IdentityToken: auth.IdentityToken,
			RegistryToken: auth.RegistryToken,
		})
		if err != nil {
			return nil, fmt.Errorf("pull %s: encode credentials: %w", ref, err)
		}
		opts.RegistryAuth = enc
	}
	r.log.Debug("pulling image", "ref", ref) // the runner logs the pull at info
	// Bounded by the progress deadline (PullImage), not the call timeout:
	// a pull's answer is its progress, for as long as the pull lasts.
	rc, err := r.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, wrapPull(err))
	}
	defer rc.Close()
	if err := r.readPullProgress(rc, ref, progressed); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	img, err := r.ImageStatus(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	r.log.Debug("pulled image", "ref", ref, "id", img.ID)
	return img, nil
}

// wrapPull is wrap for pull errors: a registry's "not found" (no such
// repository or tag) is the image's ErrNotFound too.
func wrapPull(err error) error {
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", engine.ErrNotFound, err)
	}
	return wrap(err)
}

// jsonMessage is one message of Docker's progress streams (pull, import).
type jsonMessage struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	ProgressDetail struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readProgress consumes a progress stream (an import's) to its end and
// returns the error it reports, if any.
func (r *Runtime) readProgress(rd io.Reader, ref string) error {
	return r.consumeProgress(rd, nil)
}

// readPullProgress is readProgress for a pull of ref: at each message
// progressed is called, and the message goes to the PullProgress hook.
func (r *Runtime) readPullProgress(rd io.Reader, ref string, progressed func()) error {
	return r.consumeProgress(rd, func(p engine.PullProgress) {
		progressed()
		if r.pullProgress != nil {
			r.pullProgress(ref, p)
		}
	})
}

func (r *Runtime) consumeProgress(rd io.Reader, hook func(engine.PullProgress)) error {
	dec := json.NewDecoder(rd)
	for {
		var m jsonMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading progress: %w", wrap(err))
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		if hook != nil {
			hook(engine.PullProgress{
				ID:      m.ID,
				Status:  m.Status,
				Current: m.ProgressDetail.Current,
				Total:   m.ProgressDetail.Total,
			})
		}
	}
}
