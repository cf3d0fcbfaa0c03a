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
// termination-message files.
func podDir(rootDir string, uid string) string {
	return filepath.Join(rootDir, "pods", uid)
}

// volumeSource is a prepared volume: a host path to bind into containers.
type volumeSource struct {
	HostPath string
	ReadOnly bool // the volume is never writable (configMap, secret, ...)
}

// prepareVolumes makes every volume of the pod ready on the host and returns
// them by name. It is idempotent: a volume already made is kept (an emptyDir
// keeps its data), and generated files are rewritten only when they change.
func prepareVolumes(pod *v1.Pod, dir string, objs *Objects, pe podEnv) (map[string]volumeSource, error) {
	out := make(map[string]volumeSource, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		src, err := prepareVolume(pod, vol, dir, objs, pe)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = src
	}
	return out, nil
}

func prepareVolume(pod *v1.Pod, vol *v1.Volume, dir string, objs *Objects, pe podEnv) (volumeSource, error) {
	switch {
	case vol.HostPath != nil:
		if err := checkHostPath(vol.HostPath); err != nil {
			return volumeSource{}, err
		}
		return volumeSource{HostPath: vol.HostPath.Path}, nil
	case vol.EmptyDir != nil:
		p := filepath.Join(dir, "volumes", "kubernetes.io~empty-dir", vol.Name)
		return volumeSource{HostPath: p}, makeEmptyDir(p, vol.EmptyDir)
	case vol.ConfigMap != nil, vol.Secret != nil, vol.DownwardAPI != nil, vol.Projected != nil:
		files, plugin, err := volumeFiles(pod, vol, objs, pe)
		if err != nil {
			return volumeSource{}, err
		}
		p := filepath.Join(dir, "volumes", plugin, vol.Name)
		return volumeSource{HostPath: p, ReadOnly: true}, writeVolumeFiles(p, files)
	}
	return volumeSource{}, configErrorf("volume type is not supported by podrun")
}

// checkHostPath applies a hostPath volume's type, creating what
// DirectoryOrCreate and FileOrCreate ask for.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
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

// makeEmptyDir makes an emptyDir: a directory, or a tmpfs for medium Memory.
func makeEmptyDir(p string, ed *v1.EmptyDirVolumeSource) error {
	if err := os.MkdirAll(p, 0o777); err != nil {
		return err
	}
	// World-writable as the kubelet makes it, whatever the umask.
	if err := os.Chmod(p, 0o777); err != nil {
		return err
	}
	if ed.Medium != v1.StorageMediumMemory {
		return nil
	}
	mounted, err := isMountPoint(p)
	if err != nil || mounted {
		return err
	}
	opts := "mode=0777"
	if ed.SizeLimit != nil && !ed.SizeLimit.IsZero() {
		opts += ",size=" + strconv.FormatInt(ed.SizeLimit.Value(), 10)
	}
	if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", p, err)
	}
	return nil
}

// volumeFile is one file of a generated volume.
type volumeFile struct {
	Data []byte
	Mode os.FileMode
}

// volumeFiles computes the files of a configMap, secret, downwardAPI or
// projected volume.
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
		default:
			err = configErrorf("projected source is not supported by podrun (only configMap, secret and downwardAPI)")
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
	cm := objs.ConfigMap(pod.Namespace, name)
	if cm == nil {
		if optional(opt) {
			return nil
		}
		return configErrorf("configmap %q not found", name)
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
	sec := objs.Secret(pod.Namespace, name)
	if sec == nil {
		if optional(opt) {
			return nil
		}
		return configErrorf("secret %q not found", name)
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

// writeVolumeFiles makes dir hold exactly files. Each file is written to a
// temporary name and renamed, so a container never reads half a file.
func writeVolumeFiles(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	want := map[string]bool{}
	for rel, f := range files {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return configErrorf("volume path %q leaves the volume", rel)
		}
		p := filepath.Join(dir, clean)
		want[p] = true
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() == f.Mode.Perm() {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
		if err := os.WriteFile(tmp, f.Data, f.Mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.Mode.Perm()); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	// Keys removed from the object go away from the volume too.
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || want[p] {
			return err
		}
		return os.Remove(p)
	})
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
		fields := strings.Fields(sc.Text())
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

// removePodDir unmounts what podrun mounted under a pod directory and removes
// it.
func removePodDir(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", m, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// ensureSubPath makes a subPath directory of a writable volume, as the
// kubelet does for a subPath that does not exist yet.
func ensureSubPath(p string, src volumeSource) error {
	if _, err := os.Stat(p); err == nil || src.ReadOnly {
		return nil
	}
	return os.MkdirAll(p, 0o755)
}
