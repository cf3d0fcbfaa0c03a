package runner

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kubernetes/pkg/kubelet/util/format"
	"k8s.io/kubernetes/pkg/securitycontext"
)

// imageUser is the user an image runs as, from its configured user ("",
// "name", "uid", "name:group" or "uid:gid"), as a CRI runtime reports it:
// a uid when the user part is numeric, else the name. An image that names
// no user runs as root (uid 0).
func imageUser(user string) (uid *int64, name string) {
	u, _, _ := strings.Cut(user, ":")
	if u == "" {
		return new(int64), ""
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		return nil, u
	}
	return &n, ""
}

// needsImageUser reports whether checking runAsNonRoot for c needs its
// image's user: runAsNonRoot is in effect and no runAsUser is given.
func needsImageUser(pod *v1.Pod, c *v1.Container) bool {
	sc := securitycontext.DetermineEffectiveSecurityContext(pod, c)
	return sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser == nil
}

// verifyRunAsNonRoot refuses (a configError, as the kubelet's
// CreateContainerConfigError) to run c as root when runAsNonRoot is in
// effect for it: its runAsUser 0, or, without a runAsUser, its image's
// user (imageUser's uid and name) root, a name (which cannot be checked
// without the image's /etc/passwd) or an invalid uid. The messages are the
// kubelet's.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, uid *int64, name string) error {
	sc := securitycontext.DetermineEffectiveSecurityContext(pod, c)
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return configErrorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", format.Pod(pod), c.Name)
		}
		return nil
	}
	switch {
	case uid == nil && name != "":
		return configErrorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			name, format.Pod(pod), c.Name)
	case uid == nil:
		return nil
	case *uid == 0:
		return configErrorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", format.Pod(pod), c.Name)
	}
	if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
		return configErrorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*uid, math.MaxInt32, strings.Join(errs, "; "), format.Pod(pod), c.Name)
	}
	return nil
}

// checkRunAsNonRoot is verifyRunAsNonRoot with c's image's user, asked of
// the engine only when the check needs it (the image is present by now).
func (r *Runner) checkRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	var uid *int64
	var name string
	if needsImageUser(pod, c) {
		img, err := r.rt.ImageStatus(ctx, c.Image)
		if err != nil {
			return fmt.Errorf("image %s: user: %w", c.Image, err)
		}
		uid, name = imageUser(img.User)
	}
	return verifyRunAsNonRoot(pod, c, uid, name)
}
