package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// Image volumes (spec.volumes[].image). The image is made present under
// the volume's pull policy, as a container's image. An engine with an
// image mount (engine.ImageMounter: Docker from API 1.48) then mounts it
// read-only itself. On others (Docker's API 1.41 has none) its filesystem
// is exported once per image ID into <root-dir>/images/<id-hex>, a copy
// every pod of that image shares, bound read-only into the containers.
//
// Which pods use which image, and so which copy, is kept on disk, in
// their pod directories (image GC keeps those images either way):
// <pod dir>/volumes/kubernetes.io~image/<volume> is a file holding the
// image ID, written before the copy is looked at and removed with the pod
// directory, after the pod's containers. A copy no pod directory names
// is reclaimed (housekeeping); a podrun restarted with pods running
// therefore keeps their copies, without any state of its own.

const (
	// imagesDir is the directory of the copies, under the root dir.
	imagesDir = "images"
	// imageVolumePlugin is the directory, in a pod's volumes, of the files
	// that name the copies its image volumes use.
	imageVolumePlugin = "kubernetes.io~image"
	// extractPrefix begins the name of a copy being made.
	extractPrefix = ".extract-"
)

// imageCopies serializes the copies: one extraction per image ID, shared
// by the pods that need it at once. A reclaim and the pods naming or
// making a copy exclude each other through a lock file,
// <root-dir>/images/.lock (flock: shared while a copy is named and made,
// exclusive and never waited for by a reclaim), so that podruns of one
// root dir (watch, and a down or once --rm beside it) do too.
type imageCopies struct {
	extract singleflight.Group
	// reclaiming is set while a reclaim runs.
	reclaiming atomic.Bool
}

// lockFile is the lock file of the copies, in the images directory.
const lockFile = ".lock"

// lockImages takes the copies' lock in the images directory root: shared,
// waiting for a reclaim to end, or exclusive, not waiting (ok false when
// it is held).
func lockImages(root *os.Root, exclusive bool) (unlock func(), ok bool, err error) {
	f, err := root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if exclusive && errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	return func() { f.Close() }, true, nil
}

var imageIDHex = regexp.MustCompile(`^(sha256:)?([0-9a-f]{64})$`)

// imageCopyName is the directory name of the copy of image id: its hex
// digest.
func imageCopyName(id string) (string, error) {
	m := imageIDHex.FindStringSubmatch(id)
	if m == nil {
		return "", fmt.Errorf("image ID %q is not a sha256 digest", id)
	}
	return m[2], nil
}

// hasImageVolumes reports whether the pod has image volumes.
func hasImageVolumes(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			return true
		}
	}
	return false
}

// prepareImageVolumes makes the pod's image volumes ready and returns them
// by name: the image present under the volume's pull policy (with the
// pod's pull secrets), its copy made, read-only. A failure to have the
// image is an imageError (ErrImagePull, ErrImageNeverPull), any other a
// configError (CreateContainerConfigError), as the kubelet shows them.
func (r *Runner) prepareImageVolumes(ctx context.Context, pod *v1.Pod) (map[string]volumeSource, error) {
	r.forgetImageCopyNames(pod)
	if !hasImageVolumes(pod) {
		return nil, nil
	}
	out := map[string]volumeSource{}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image == nil {
			continue
		}
		src, err := r.prepareImageVolume(ctx, pod, vol)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = src
	}
	return out, nil
}

func (r *Runner) prepareImageVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (volumeSource, error) {
	if err := checkName("volume name", vol.Name); err != nil {
		return volumeSource{}, err
	}
	ref := vol.Image.Reference
	if ref == "" {
		return volumeSource{}, configErrorf("image volume without a reference")
	}
	img, err := r.ensureImage(ctx, pod, "", ref, vol.Image.PullPolicy, r.cfg.Images, nil)
	if err != nil {
		return volumeSource{}, err
	}
	native, err := r.engineMountsImages(ctx)
	if err != nil {
		return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
	}
	if native {
		// No copy to guard from a reclaim: named for image GC alone.
		if err := r.nameImageCopy(pod, vol.Name, img.ID); err != nil {
			return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
		}
		return volumeSource{Image: img.ID, ReadOnly: true}, nil
	}
	name, err := imageCopyName(img.ID)
	if err != nil {
		return volumeSource{}, configErrorf("image %s: %v", ref, err)
	}
	root, real, err := r.openImagesDir()
	if err != nil {
		return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
	}
	defer root.Close()
	unlock, _, err := lockImages(root, false)
	if err != nil {
		return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
	}
	defer unlock()
	// Named first: a reclaim never removes a copy a pod directory names.
	if err := r.nameImageCopy(pod, vol.Name, img.ID); err != nil {
		return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
	}
	// The pods that need the copy at once share it: the removal of this
	// one does not end it for the others.
	copyCtx, done := r.sharedWork(ctx)
	defer done()
	v, err, _ := r.copies.extract.Do(name, func() (any, error) {
		return r.makeImageCopy(copyCtx, root, real, ref, img.ID, name)
	})
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return volumeSource{}, err
		}
		return volumeSource{}, configErrorf("image volume of %s: %v", ref, err)
	}
	return volumeSource{HostPath: v.(string), ReadOnly: true}, nil
}

// engineMountsImages reports whether the engine mounts image volumes
// itself (engine.ImageMounter).
func (r *Runner) engineMountsImages(ctx context.Context) (bool, error) {
	m, ok := r.raw.(engine.ImageMounter)
	if !ok {
		return false, nil
	}
	return m.MountsImages(ctx)
}

// imageVolumeMount is the engine's mount, at mountPath, of the image
// volume of image id, or of its subPath sub within it: a clean relative
// path, which the engine resolves within the image.
func imageVolumeMount(id, sub, mountPath string) (engine.Mount, error) {
	m := engine.Mount{Image: id, ContainerPath: mountPath, ReadOnly: true}
	if sub == "" {
		return m, nil
	}
	clean, err := cleanRelPath("subPath", sub, true)
	if err != nil {
		return engine.Mount{}, err
	}
	if clean != "." {
		m.ImageSubPath = clean
	}
	return m, nil
}

// nameImageCopy records, in the pod's directory, that its volume vol uses
// the copy of image id. A volume whose tag moved to another image names
// both: containers started before still mount the older copy, which must
// stay until the pod (or the volume) goes.
func (r *Runner) nameImageCopy(pod *v1.Pod, vol, id string) error {
	d, err := openPodDirs(r.cfg.RootDir, string(pod.UID))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.root.MkdirAll(d.rel("volumes", imageVolumePlugin), 0o750); err != nil {
		return err
	}
	// That very directory, not (by a symlink) another pod's, whose names
	// this would change.
	dir, err := d.openDir(false, "volumes", imageVolumePlugin)
	if err != nil {
		return err
	}
	defer dir.Close()
	var ids []string
	if b, err := dir.ReadFile(vol); err == nil {
		ids = strings.Fields(string(b))
	}
	if slices.Contains(ids, id) {
		return nil
	}
	ids = append(ids, id)
	tmp := "." + vol + ".tmp"
	if err := dir.WriteFile(tmp, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return dir.Rename(tmp, vol)
}

// forgetImageCopyNames removes the names of copies that volumes the pod
// no longer has left in its directory (a change of volumes replaced the
// pod's sandbox, and with it the containers that mounted them, before its
// volumes are prepared again), so that those copies may be reclaimed.
func (r *Runner) forgetImageCopyNames(pod *v1.Pod) {
	d, err := openPodDirs(r.cfg.RootDir, string(pod.UID))
	if err != nil {
		return
	}
	defer d.Close()
	// That very directory, not (by a symlink) another pod's, whose names
	// would be forgotten and its copies reclaimed under its containers.
	dir, err := d.openDir(false, "volumes", imageVolumePlugin)
	if err != nil {
		return
	}
	defer dir.Close()
	ents, err := fs.ReadDir(dir.FS(), ".")
	if err != nil {
		return
	}
	want := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			want[pod.Spec.Volumes[i].Name] = true
		}
	}
	for _, e := range ents {
		if want[e.Name()] {
			continue
		}
		if err := dir.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("image copy name not removed", "pod", podKey(pod), "volume", e.Name(), "err", err)
		}
	}
}

// makeImageCopy makes <name> in the images directory root (whose real
// path is real), the copy of image id (ref for messages), unless it is
// there, and returns its real path. The copy is extracted in a directory
// of its own and renamed into place whole.
func (r *Runner) makeImageCopy(ctx context.Context, root *os.Root, real, ref, id, name string) (string, error) {
	dst := filepath.Join(real, name)
	if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
		return dst, nil
	} else if err == nil {
		return "", fmt.Errorf("%s is not a directory: refused", dst)
	}
	ex, ok := r.raw.(engine.ImageFilesystemExporter)
	if !ok {
		return "", configErrorf("the container engine cannot export an image's filesystem: image volumes are not supported on it")
	}
	tmp := extractPrefix + name[:12] + "-" + randomSuffix()
	if err := root.Mkdir(tmp, 0o700); err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			if err := root.RemoveAll(tmp); err != nil {
				r.log.Warn("partial image copy not removed", "dir", filepath.Join(real, tmp), "err", err)
			}
		}
	}()
	r.log.Info("copying image filesystem for image volumes", "image", ref, "id", shortImageID(id), "dir", dst)
	start := r.clock.Now()
	rc, err := ex.ExportImageFilesystem(ctx, id)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	tr, err := root.OpenRoot(tmp)
	if err != nil {
		rc.Close()
		return "", err
	}
	st, err := extractTree(rc, tr)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("export: %w", cerr)
	}
	if err == nil {
		// Containers of any user must reach in, unless the image says.
		if fi, serr := tr.Lstat("."); serr == nil && fi.Mode().Perm() == 0o700 {
			err = tr.Chmod(".", 0o755)
		}
	}
	tr.Close()
	if err != nil {
		return "", err
	}
	if err := root.Rename(tmp, name); err != nil {
		// Another podrun of the root dir made it meanwhile: use theirs.
		if fi, serr := root.Lstat(name); serr == nil && fi.IsDir() {
			return dst, nil
		}
		return "", err
	}
	done = true
	r.log.Info("image filesystem copied", "image", ref, "dir", dst, "took", r.clock.Since(start),
		"skipped_special_files", st.Skipped)
	return dst, nil
}

// openImagesDir opens <root-dir>/images (making it) within the root dir,
// and returns it with its real path.
func (r *Runner) openImagesDir() (*os.Root, string, error) {
	top, topReal, err := openRootDir(r.cfg.RootDir)
	if err != nil {
		return nil, "", err
	}
	defer top.Close()
	if err := top.MkdirAll(imagesDir, 0o700); err != nil {
		return nil, "", err
	}
	root, err := top.OpenRoot(imagesDir)
	if err != nil {
		return nil, "", err
	}
	real, err := rootRealPath(root)
	if err != nil {
		root.Close()
		return nil, "", err
	}
	if want := filepath.Join(topReal, imagesDir); real != want {
		root.Close()
		return nil, "", fmt.Errorf("%s is %s (a symlink): refused", want, real)
	}
	return root, real, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func shortImageID(id string) string {
	return shortID(strings.TrimPrefix(id, "sha256:"))
}

// ImageVolumeImages returns the IDs of the images whose copies pods' image
// volumes use (as their pod directories name them): image GC must keep
// them, as it keeps the images of containers.
func (r *Runner) ImageVolumeImages() map[string]bool {
	out := map[string]bool{}
	for _, id := range r.namedImageCopies() {
		out[id] = true
	}
	return out
}

// namedImageCopies returns the image IDs the pod directories name, by
// copy name.
func (r *Runner) namedImageCopies() map[string]string {
	out := map[string]string{}
	root, _, err := openRootDir(r.cfg.RootDir)
	if err != nil {
		return out
	}
	defer root.Close()
	pods, err := fs.ReadDir(root.FS(), "pods")
	if err != nil {
		return out
	}
	for _, p := range pods {
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join("pods", p.Name(), "volumes", imageVolumePlugin)
		vols, err := fs.ReadDir(root.FS(), dir)
		if err != nil {
			continue
		}
		for _, v := range vols {
			if !v.Type().IsRegular() || strings.HasPrefix(v.Name(), ".") {
				continue
			}
			b, err := root.ReadFile(filepath.Join(dir, v.Name()))
			if err != nil {
				continue
			}
			for _, id := range strings.Fields(string(b)) {
				if name, err := imageCopyName(id); err == nil {
					out[name] = id
				}
			}
		}
	}
	return out
}

// reclaimImageCopies removes the copies no pod directory names, and
// copies left half-made by a podrun that died while making them. It does
// nothing while a pod (of any podrun of the root dir) is naming or making
// a copy: it is tried again at the next housekeeping.
func (r *Runner) reclaimImageCopies() {
	if _, err := os.Lstat(filepath.Join(r.cfg.RootDir, imagesDir)); err != nil {
		return // no image volume ever: nothing to make either
	}
	root, real, err := r.openImagesDir()
	if err != nil {
		return
	}
	defer root.Close()
	unlock, ok, err := lockImages(root, true)
	if err != nil {
		r.log.Warn("image copies not reclaimed", "err", err)
		return
	}
	if !ok {
		return // a copy is being named or made: at the next round
	}
	defer unlock()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil || len(entries) == 0 {
		return
	}
	named := r.namedImageCopies()
	for _, e := range entries {
		if _, ok := named[e.Name()]; ok {
			continue
		}
		if !strings.HasPrefix(e.Name(), extractPrefix) && !imageIDHex.MatchString(e.Name()) {
			continue // not podrun's
		}
		p := filepath.Join(real, e.Name())
		if err := root.RemoveAll(e.Name()); err != nil {
			r.log.Warn("image copy not removed", "dir", p, "err", err)
			continue
		}
		r.log.Info("removed image copy no pod uses", "dir", p)
	}
}

// reclaimImageCopiesAsync runs reclaimImageCopies in the background, one at
// a time: removing a copy may take a while, and housekeeping must not.
func (r *Runner) reclaimImageCopiesAsync(ctx context.Context) {
	if ctx.Err() != nil || !r.copies.reclaiming.CompareAndSwap(false, true) {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.copies.reclaiming.Store(false)
		r.reclaimImageCopies()
	}()
}

// ReclaimImageCopies removes the image volumes' copies that no pod uses
// (no pod directory names), unless a pod is naming or making one now: for
// commands that remove pods without a sync loop (down, once --rm).
func (r *Runner) ReclaimImageCopies() { r.reclaimImageCopies() }
