package runner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Pod directories live under <root-dir>/pods/<uid>, as the kubelet's do:
// volumes/<plugin>/<name> for the volumes podrun makes, containers/ for
// termination-message files. podDir is that path as a string, for a uid
// already checked to be a safe name: everything podrun makes there goes
// through a podDirs (poddir.go).
func podDir(rootDir string, uid string) string {
	return filepath.Join(rootDir, "pods", uid)
}

// volumeSource is a prepared volume: a host path to bind into containers.
type volumeSource struct {
	// HostPath is the real path (symlinks resolved) of a volume podrun
	// made, under the root dir, or a hostPath volume's path as declared.
	HostPath string
	// Image, in place of HostPath, is the image (by ID) of an image volume
	// the engine mounts itself.
	Image    string
	ReadOnly bool // the volume is never writable (configMap, secret, ...)
	Host     bool // a hostPath volume: the one declared way out of the root dir
}

// prepareVolumes makes every volume of the pod ready on the host and returns
// them by name. dir is the pod's directory, podDir(rootDir, pod.UID). It is
// idempotent: a volume already made is kept (an emptyDir keeps its data),
// and generated files are rewritten only when they change.
func prepareVolumes(pod *v1.Pod, dir string, objs *Objects, pe podEnv) (map[string]volumeSource, error) {
	rootDir, err := rootOfPodDir(dir, string(pod.UID))
	if err != nil {
		return nil, err
	}
	return prepareVolumesIn(pod, rootDir, objs, pe)
}

// rootOfPodDir is the root dir of the pod directory dir of uid, which must
// be a safe name.
func rootOfPodDir(dir, uid string) (string, error) {
	if err := checkName("pod uid", uid); err != nil {
		return "", err
	}
	suffix := filepath.Join("pods", uid)
	switch {
	case dir == suffix:
		return ".", nil
	case strings.HasSuffix(dir, "/"+suffix):
		if root := strings.TrimSuffix(dir, "/"+suffix); root != "" {
			return root, nil
		}
		return "/", nil
	}
	return "", fmt.Errorf("%s is not a pod directory of pod %s", dir, uid)
}

// prepareVolumesIn is prepareVolumes with the pod directory given by the root
// dir.
func prepareVolumesIn(pod *v1.Pod, rootDir string, objs *Objects, pe podEnv) (map[string]volumeSource, error) {
	dirs := lazyPodDirs{rootDir: rootDir, uid: string(pod.UID)}
	defer dirs.close()
	out := make(map[string]volumeSource, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image != nil {
			continue // the runner's (prepareImageVolumes): it needs the engine
		}
		src, err := prepareVolume(pod, vol, dirs.get, objs, pe)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = src
	}
	return out, nil
}

// refreshVolumeFiles rewrites the files of the pod's configMap, secret,
// downwardAPI and projected volumes from objs and pe, as the kubelet's
// volume manager does at the syncs of a running pod: each file that
// changed is swapped in whole, and removed keys are removed, so the
// containers see the new content without a restart (but through a subPath
// mount, which bound the file it found at the container's start). Each
// volume is done alone: one whose files cannot be computed (a ConfigMap
// gone, a token refused) keeps its files, and the others are still
// rewritten. dir is the pod's directory, podDir(rootDir, pod.UID). The
// volumes must have been made (prepareVolumes) before.
func refreshVolumeFiles(pod *v1.Pod, dir string, objs *Objects, pe podEnv) error {
	rootDir, err := rootOfPodDir(dir, string(pod.UID))
	if err != nil {
		return err
	}
	dirs := lazyPodDirs{rootDir: rootDir, uid: string(pod.UID)}
	defer dirs.close()
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if !generatedVolume(vol) {
			continue
		}
		if _, err := prepareVolume(pod, vol, dirs.get, objs, pe); err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
		}
	}
	return errors.Join(errs...)
}

// generatedVolume reports whether podrun writes the files of vol from
// objects and the pod (configMap, secret, downwardAPI, projected).
func generatedVolume(vol *v1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.DownwardAPI != nil || vol.Projected != nil
}

// lazyPodDirs opens (and makes) the root dir only for a volume that lives
// there: a pod of hostPath volumes alone needs none.
type lazyPodDirs struct {
	rootDir, uid string
	d            *podDirs
}

func (l *lazyPodDirs) get() (*podDirs, error) {
	if l.d != nil {
		return l.d, nil
	}
	var err error
	l.d, err = openPodDirs(l.rootDir, l.uid)
	return l.d, err
}

func (l *lazyPodDirs) close() {
	if l.d != nil {
		l.d.Close()
	}
}

func prepareVolume(pod *v1.Pod, vol *v1.Volume, dirs func() (*podDirs, error), objs *Objects, pe podEnv) (volumeSource, error) {
	if vol.HostPath != nil {
		if err := checkHostPath(vol.HostPath); err != nil {
			return volumeSource{}, err
		}
		return volumeSource{HostPath: vol.HostPath.Path, Host: true}, nil
	}
	if vol.EmptyDir == nil && !generatedVolume(vol) {
		return volumeSource{}, configErrorf("volume type is not supported by podrun")
	}
	if err := checkName("volume name", vol.Name); err != nil {
		return volumeSource{}, err
	}
	if vol.EmptyDir != nil {
		d, err := dirs()
		if err != nil {
			return volumeSource{}, err
		}
		p, err := makeEmptyDir(d, vol.Name, vol.EmptyDir)
		if err == nil {
			err = volumeFSGroup(pod, d, false, "volumes", emptyDirPlugin, vol.Name)
		}
		return volumeSource{HostPath: p}, err
	}
	files, plugin, err := volumeFiles(pod, vol, objs, pe)
	if err != nil {
		return volumeSource{}, err
	}
	if _, _, ok := podFSGroup(pod); ok {
		// Written with the group's bits already, so that a refresh finds
		// them as they should be and rewrites nothing.
		for name, f := range files {
			f.Mode |= fsGroupReadOnly
			files[name] = f
		}
	}
	d, err := dirs()
	if err != nil {
		return volumeSource{}, err
	}
	p, err := writeVolumeFiles(d, d.rel("volumes", plugin, vol.Name), files)
	if err == nil {
		err = volumeFSGroup(pod, d, true, "volumes", plugin, vol.Name)
	}
	return volumeSource{HostPath: p, ReadOnly: true}, err
}

// volumeFSGroup applies the pod's fsGroup, if it has one, to the volume at
// parts in the pod directory.
func volumeFSGroup(pod *v1.Pod, d *podDirs, readOnly bool, parts ...string) error {
	gid, policy, ok := podFSGroup(pod)
	if !ok {
		return nil
	}
	vr, err := d.openDir(false, parts...)
	if err != nil {
		return err
	}
	defer vr.Close()
	return applyFSGroup(vr, gid, policy, readOnly)
}

// checkHostPath applies a hostPath volume's type, creating what
// DirectoryOrCreate and FileOrCreate ask for.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	if !filepath.IsAbs(hp.Path) || strings.ContainsRune(hp.Path, 0) {
		return configErrorf("hostPath %q is not an absolute path", hp.Path)
	}
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath %s: %w", hp.Path, err)
	}
	mismatch := func(want string) error {
		return configErrorf("hostPath type check failed: %s is not a %s", hp.Path, want)
	}
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			// 0755 as the kubelet makes it.
			return os.MkdirAll(hp.Path, 0o755)
		}
		if !fi.IsDir() {
			return mismatch("directory")
		}
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return mismatch("directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			// The kubelet does not make the parent; kubeadm's paths always
			// have one, and a user expects "OrCreate" to work, so podrun
			// does.
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if !fi.Mode().IsRegular() {
			return mismatch("file")
		}
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return mismatch("file")
		}
	case v1.HostPathSocket:
		if !exists || fi.Mode()&fs.ModeSocket == 0 {
			return mismatch("socket")
		}
	case v1.HostPathCharDev:
		if !exists || fi.Mode()&fs.ModeCharDevice == 0 {
			return mismatch("character device")
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
			return mismatch("block device")
		}
	default:
		return configErrorf("hostPath type %q is not known", t)
	}
	return nil
}

// emptyDirPlugin is the directory, in a pod's volumes, of its emptyDirs.
const emptyDirPlugin = "kubernetes.io~empty-dir"

// makeEmptyDir makes the emptyDir name of the pod: a directory, or a tmpfs
// for medium Memory. It returns its real path.
func makeEmptyDir(d *podDirs, name string, ed *v1.EmptyDirVolumeSource) (string, error) {
	rel := d.rel("volumes", emptyDirPlugin, name)
	what := "emptyDir " + strconv.Quote(name)
	if err := d.root.MkdirAll(rel, 0o777); err != nil {
		return "", refused(what, err)
	}
	f, err := d.root.Open(rel)
	if err != nil {
		return "", refused(what, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: %s is not a directory: refused", what, rel)
	}
	p, err := d.realPath(f, rel)
	if err != nil {
		return "", err
	}
	// World-writable as the kubelet makes it, whatever the umask.
	if err := f.Chmod(0o777); err != nil {
		return "", err
	}
	if ed.Medium != v1.StorageMediumMemory {
		return p, nil
	}
	mounted, err := isMountPoint(p)
	if err != nil || mounted {
		return p, err
	}
	// The kubelet mounts tmpfs without a mode: tmpfs's own, 1777 (sticky
	// and world-writable, as /tmp), which a subPath made in it takes on.
	opts := "mode=1777"
	if ed.SizeLimit != nil && !ed.SizeLimit.IsZero() {
		opts += ",size=" + strconv.FormatInt(ed.SizeLimit.Value(), 10)
	}
	// Onto the directory opened above, whatever its path names by now.
	if err := unix.Mount("tmpfs", fdPath(f), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", p, err)
	}
	return p, nil
}

// volumeFile is one file of a generated volume.
type volumeFile struct {
	Data []byte
	Mode os.FileMode
}

// volumeFiles computes the files of a configMap, secret, downwardAPI or
// projected volume. A serviceAccountToken source asks pe.Token for its
// token (the apiserver's TokenRequest, in cluster mode).
func volumeFiles(pod *v1.Pod, vol *v1.Volume, objs *Objects, pe podEnv) (map[string]volumeFile, string, error) {
	files := map[string]volumeFile{}
	var err error
	switch {
	case vol.ConfigMap != nil:
		s := vol.ConfigMap
		err = addConfigMapFiles(files, pod, objs, s.Name, s.Items, s.DefaultMode, s.Optional)
		return files, "kubernetes.io~configmap", err
	case vol.Secret != nil:
		s := vol.Secret
		err = addSecretFiles(files, pod, objs, s.SecretName, s.Items, s.DefaultMode, s.Optional)
		return files, "kubernetes.io~secret", err
	case vol.DownwardAPI != nil:
		err = addDownwardFiles(files, pod, vol.DownwardAPI.Items, vol.DownwardAPI.DefaultMode, pe)
		return files, "kubernetes.io~downward-api", err
	}
	p := vol.Projected
	for _, src := range p.Sources {
		switch {
		case src.ConfigMap != nil:
			s := src.ConfigMap
			err = addConfigMapFiles(files, pod, objs, s.Name, s.Items, p.DefaultMode, s.Optional)
		case src.Secret != nil:
			s := src.Secret
			err = addSecretFiles(files, pod, objs, s.Name, s.Items, p.DefaultMode, s.Optional)
		case src.DownwardAPI != nil:
			err = addDownwardFiles(files, pod, src.DownwardAPI.Items, p.DefaultMode, pe)
		case src.ServiceAccountToken != nil:
			err = addTokenFile(files, src.ServiceAccountToken, p.DefaultMode, pe)
		default:
			err = configErrorf("projected source is not supported by podrun (only configMap, secret, downwardAPI and serviceAccountToken)")
		}
		if err != nil {
			return nil, "", err
		}
	}
	return files, "kubernetes.io~projected", nil
}

func fileMode(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

func addKeyFiles(files map[string]volumeFile, data map[string][]byte, items []v1.KeyToPath, def *int32, what string, opt bool) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = volumeFile{Data: v, Mode: fileMode(nil, def)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if opt {
				continue
			}
			return configErrorf("key %q not found in %s", it.Key, what)
		}
		files[it.Path] = volumeFile{Data: v, Mode: fileMode(it.Mode, def)}
	}
	return nil
}

func addConfigMapFiles(files map[string]volumeFile, pod *v1.Pod, objs *Objects, name string, items []v1.KeyToPath, def *int32, opt *bool) error {
	cm := objs.ConfigMap(pod, name)
	if cm == nil {
		if optional(opt) {
			return nil
		}
		return errObjectNotFound(KindConfigMap, name)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeyFiles(files, data, items, def, "configmap "+strconv.Quote(name), optional(opt))
}

func addSecretFiles(files map[string]volumeFile, pod *v1.Pod, objs *Objects, name string, items []v1.KeyToPath, def *int32, opt *bool) error {
	sec := objs.Secret(pod, name)
	if sec == nil {
		if optional(opt) {
			return nil
		}
		return errObjectNotFound(KindSecret, name)
	}
	return addKeyFiles(files, sec.Data, items, def, "secret "+strconv.Quote(name), optional(opt))
}

func addDownwardFiles(files map[string]volumeFile, pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def *int32, pe podEnv) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(pod, it.FieldRef.FieldPath, pe)
		case it.ResourceFieldRef != nil:
			c := findContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return configErrorf("downwardAPI %s: no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			v, err = resourceFieldValue(c, it.ResourceFieldRef, pe)
		}
		if err != nil {
			return err
		}
		files[it.Path] = volumeFile{Data: []byte(v), Mode: fileMode(it.Mode, def)}
	}
	return nil
}

// addTokenFile adds the file of a projected serviceAccountToken source,
// with the volume's mode as the kubelet writes it (podrun sets no file
// owner: it has no fsGroup).
func addTokenFile(files map[string]volumeFile, tp *v1.ServiceAccountTokenProjection, def *int32, pe podEnv) error {
	if pe.Token == nil {
		return configErrorf("projected serviceAccountToken needs a cluster: podrun gets service account tokens " +
			"from the apiserver, in watch --kubeconfig")
	}
	tok, err := pe.Token(tp)
	if err != nil {
		return err
	}
	files[tp.Path] = volumeFile{Data: []byte(tok), Mode: fileMode(nil, def)}
	return nil
}

// writeVolumeFiles makes the directory rel (relative to the root dir) hold
// exactly files, and returns its real path. Entries that are not in files
// (keys removed from their object, a temporary file a crash left) are
// removed first, with the directories that then hold nothing wanted, so
// that a key may turn from a file into a directory or back. Then each file
// whose content or mode differs is written to a temporary name and renamed
// into place, so that a container never reads half a file; a container
// that has the directory mounted sees each new file at once. Every file
// path must be relative and without '..'; all of them are checked before
// anything is written or removed.
func writeVolumeFiles(d *podDirs, rel string, files map[string]volumeFile) (string, error) {
	want := make(map[string]bool, len(files))
	wantDirs := map[string]bool{}
	names := make([]string, 0, len(files))
	clean := make(map[string]string, len(files))
	for name := range files {
		c, err := cleanRelPath("volume path", name, false)
		if err != nil {
			return "", err
		}
		// The API lets a path such as "./..podrun-tmp" through (a pod of
		// the apiserver is not checked by the manifest package): the
		// names starting with ".." are the volume's own.
		if strings.HasPrefix(c, "..") {
			return "", configErrorf("volume path %q starts with '..' once cleaned, as the volume's own entries do: refused", name)
		}
		want[c] = true
		for dir := filepath.Dir(c); dir != "."; dir = filepath.Dir(dir) {
			wantDirs[dir] = true
		}
		names = append(names, name)
		clean[name] = c
	}
	slices.Sort(names)
	if err := d.root.MkdirAll(rel, 0o755); err != nil {
		return "", refused("volume directory", err)
	}
	vr, err := d.root.OpenRoot(rel)
	if err != nil {
		return "", refused("volume directory", err)
	}
	defer vr.Close()
	dir, err := rootRealPath(vr)
	if err != nil {
		return "", err
	}
	if want := filepath.Join(d.real, rel); dir != want {
		return "", fmt.Errorf("%s is %s (a symlink in the pod directory): refused", want, dir)
	}
	if err := removeUnwanted(vr, want, wantDirs); err != nil {
		return "", err
	}
	for _, name := range names {
		f, p := files[name], clean[name]
		if err := writeVolumeFile(vr, p, f); err != nil {
			return "", refused("volume path "+strconv.Quote(name), err)
		}
	}
	return dir, nil
}

// removeUnwanted removes from the volume vr every entry that is neither a
// file of want nor a directory of wantDirs. The walk (walkVolume) does not
// follow symlinks, and removes a symlink itself.
func removeUnwanted(vr *os.Root, want, wantDirs map[string]bool) error {
	var files, dirs []string
	err := walkVolume(vr, func(e walkEntry) error {
		switch {
		case e.p == ".":
		case e.fi.IsDir():
			if !wantDirs[e.p] {
				dirs = append(dirs, e.p)
			}
		case !want[e.p]:
			files = append(files, e.p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range files {
		if err := vr.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	// Deepest first: the walk lists a directory before what it holds.
	for _, p := range slices.Backward(dirs) {
		if err := vr.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// volumeTempFile is the name new files are written under before they are
// renamed into place: at the top of the volume, where no key or item path
// can be (the API refuses those that begin with '..').
const volumeTempFile = "..podrun-tmp"

// writeVolumeFile writes f at p in the volume vr, unless it is there already.
func writeVolumeFile(vr *os.Root, p string, f volumeFile) error {
	if old, err := vr.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
		if fi, err := vr.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == f.Mode.Perm() {
			return nil
		}
	}
	if dir := filepath.Dir(p); dir != "." {
		if err := vr.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	w, err := vr.OpenFile(volumeTempFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, f.Mode.Perm())
	if err != nil {
		return err
	}
	_, err = w.Write(f.Data)
	if err == nil {
		err = w.Chmod(f.Mode.Perm())
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return vr.Rename(volumeTempFile, p)
}

// isMountPoint reports whether p is a mount point, from /proc/self/mountinfo.
func isMountPoint(p string) (bool, error) {
	mounts, err := mountsUnder(p)
	if err != nil {
		return false, err
	}
	return slices.Contains(mounts, filepath.Clean(p)), nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Fields are separated by single spaces; the kernel escapes only
		// space, tab, newline and backslash in paths (unescapeMountPath),
		// so another whitespace (\v, \f, \r) may be part of one.
		fields := strings.Split(sc.Text(), " ")
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, sc.Err()
}

// makeSubPath makes the missing directories of the subPath clean in the
// volume vr with the volume directory's own mode, setgid and sticky bits
// included, as the kubelet does (its SafeMakeDir): a subPath made in an
// fsGroup volume stays group-writable for the pod, whatever podrun's umask.
func makeSubPath(vr *os.Root, clean string) error {
	if _, err := vr.Lstat(clean); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	vol, err := vr.Stat(".")
	if err != nil {
		return err
	}
	mode := vol.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSetuid | fs.ModeSticky)
	parts := strings.Split(clean, string(filepath.Separator))
	for i := range parts {
		dir := filepath.Join(parts[:i+1]...)
		err := vr.Mkdir(dir, mode.Perm())
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := vr.Chmod(dir, mode); err != nil {
			return err
		}
	}
	return nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// subPathSource opens what a volumeMount's subPath sub of the volume src
// names, resolved within the volume, which a container may have filled
// with symlinks (CVE-2017-1002101): an O_PATH handle of it (the caller
// closes it; bindSubPath binds it) and its real path then. sub must be a
// relative path without '..', and resolve inside the volume; a missing sub
// is made in a writable volume, as the kubelet does.
func subPathSource(src volumeSource, sub string) (*os.File, string, error) {
	clean, err := cleanRelPath("subPath", sub, true)
	if err != nil {
		return nil, "", err
	}
	what := "subPath " + strconv.Quote(sub)
	base := src.HostPath
	if src.Host {
		// The hostPath is declared; like Docker's bind, podrun makes it.
		if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(base, 0o755); err != nil {
				return nil, "", err
			}
		}
	}
	vr, err := os.OpenRoot(base)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	defer vr.Close()
	baseReal, err := rootRealPath(vr)
	if err != nil {
		return nil, "", err
	}
	if !src.Host && baseReal != base {
		return nil, "", fmt.Errorf("%s: volume directory %s moved to %s: refused", what, base, baseReal)
	}
	if !src.ReadOnly {
		if err := makeSubPath(vr, clean); err != nil {
			return nil, "", refused(what, err)
		}
	}
	// O_PATH: only a handle to learn where it is. What a container put
	// there is never opened for reading: a FIFO would hold podrun, and a
	// device node would run its driver's open on the host, as root,
	// outside the container's device cgroup.
	f, err := openPathBeneath(vr, clean)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", configErrorf("%s does not exist in the volume", what)
	}
	if err != nil {
		return nil, "", refused(what, err)
	}
	p, err := fileRealPath(f)
	if err == nil && !within(baseReal, p) {
		err = configErrorf("%s resolves to %s, outside its volume %s: refused", what, p, baseReal)
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, p, nil
}
