package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// ImageOptions configure how the runner gets images; one value is shared by
// every pull of a Runner (Config.Images). nil: no node credentials, pulls in
// parallel, no record of use.
type ImageOptions struct {
	// Credentials are the node's registry credentials (the Docker config
	// file), tried after those of a pod's imagePullSecrets.
	Credentials engine.Keyring
	// SerializePulls makes pulls one at a time, as the kubelet's
	// --serialize-image-pulls (its default, true). Pulls of one image (with
	// the same credentials) are shared either way.
	SerializePulls bool
	// Used, when set, is told the ID of the image each container is about
	// to be made from, and when (image GC's least-recently-used order).
	Used func(imageID string, at time.Time)

	once sync.Once
	sem  chan struct{}
}

// acquire takes the pull slot when pulls are serialized; release gives it
// back.
func (o *ImageOptions) acquire(ctx context.Context) (release func(), err error) {
	if o == nil || !o.SerializePulls {
		return func() {}, nil
	}
	o.once.Do(func() { o.sem = make(chan struct{}, 1) })
	select {
	case o.sem <- struct{}{}:
		return func() { <-o.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (o *ImageOptions) used(id string, at time.Time) {
	if o != nil && o.Used != nil && id != "" {
		o.Used(id, at)
	}
}

func (o *ImageOptions) nodeCredentials() engine.Keyring {
	if o == nil {
		return nil
	}
	return o.Credentials
}

// AdmitReason is the waiting reason err carries when it is (or wraps) a
// refusal of Config.Admit: an error with an AdmitReason method (node's
// disk check says OutOfDisk), shown as the waiting reason of the pod's
// containers with the error's text. The runner needs no admitter's types.
func AdmitReason(err error) (string, bool) {
	var refusal interface{ AdmitReason() string }
	if errors.As(err, &refusal) {
		return refusal.AdmitReason(), true
	}
	return "", false
}

// podPullCredentials are the credentials of the pod's imagePullSecrets for
// image, from the Secrets of the sources. A secret that is missing or of the
// wrong kind is logged and skipped, as the kubelet does (with its event).
func (r *Runner) podPullCredentials(pod *v1.Pod, image string) []engine.AuthConfig {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	var secrets []*v1.Secret
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		s := r.cfg.Objects.Secret(pod, ref.Name)
		if s == nil {
			r.log.Warn("image pull secret not found; pulling without it", "pod", podKey(pod), "secret", ref.Name)
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(missing) > 0 {
		r.event(pod, "", v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	k, err := engine.KeyringFromSecrets(secrets)
	if err != nil {
		r.log.Warn("image pull secret unusable", "pod", podKey(pod), "err", err)
	}
	return k.Lookup(image)
}

// pullImage pulls ref with each of creds in turn until one works (none:
// anonymously), one pull at a time when opts serializes them, and returns
// the image. The error of a failed pull names every attempt's error.
func (r *Runner) pullImage(ctx context.Context, ref string, creds []engine.AuthConfig, opts *ImageOptions) (*engine.Image, error) {
	release, err := opts.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pull %s: wait for the pull before it: %w", ref, err)
	}
	defer release()
	r.log.Info("pulling image", "image", ref, "credentials", len(creds))
	start := r.clock.Now()
	if len(creds) == 0 {
		creds = []engine.AuthConfig{{}}
	}
	var errs []error
	for i := range creds {
		var auth *engine.AuthConfig
		if creds[i] != (engine.AuthConfig{}) {
			auth = &creds[i]
		}
		img, err := r.rt.PullImage(ctx, ref, auth)
		if err == nil {
			r.log.Info("pulled image", "image", ref, "size", img.Size, "took", r.clock.Since(start).Round(time.Millisecond))
			return img, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if auth != nil && auth.Username != "" {
			err = fmt.Errorf("as %s: %w", auth.Username, err)
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// pullKey is the key pulls are shared under: the image and the credentials
// it is pulled with, so that a pod with wrong credentials never makes another
// pod's pull fail.
func pullKey(ref string, creds []engine.AuthConfig) string {
	if len(creds) == 0 {
		return ref
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%q %q %q %q %q %q\n", c.Username, c.Password, c.Auth, c.ServerAddress, c.IdentityToken, c.RegistryToken)
	}
	return ref + "@" + hex.EncodeToString(h.Sum(nil)[:8])
}
