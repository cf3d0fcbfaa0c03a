package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	cases := []struct {
		path    string
		typ     *v1.HostPathType
		wantErr string
	}{
		{filepath.Join(dir, "new/dir"), typ(v1.HostPathDirectoryOrCreate), ""},
		{file, typ(v1.HostPathDirectoryOrCreate), "is not a directory"},
		{dir, typ(v1.HostPathDirectory), ""},
		{filepath.Join(dir, "missing"), typ(v1.HostPathDirectory), "is not a directory"},
		{filepath.Join(dir, "made/file"), typ(v1.HostPathFileOrCreate), ""},
		{dir, typ(v1.HostPathFileOrCreate), "is not a file"},
		{file, typ(v1.HostPathFile), ""},
		{dir, typ(v1.HostPathFile), "is not a file"},
		{file, typ(v1.HostPathSocket), "is not a socket"},
		{"/dev/null", typ(v1.HostPathCharDev), ""},
		{file, typ(v1.HostPathBlockDev), "is not a block device"},
		{filepath.Join(dir, "anything"), typ(v1.HostPathUnset), ""},
		{filepath.Join(dir, "anything"), nil, ""},
	}
	for _, tc := range cases {
		err := checkHostPath(&v1.HostPathVolumeSource{Path: tc.path, Type: tc.typ})
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s (%v): err %v, want %q", tc.path, tc.typ, err, tc.wantErr)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "new/dir")); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate made nothing")
	}
	if fi, err := os.Stat(filepath.Join(dir, "made/file")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate made nothing")
	}
}

// TestVolumesAndTeardown prepares an emptyDir on disk, one in memory (a
// tmpfs: podrun runs as root, as these tests do), and ConfigMap and Secret
// volumes, then removes the pod directory, unmounting the tmpfs.
func TestVolumesAndTeardown(t *testing.T) {
	root := t.TempDir()
	pod := &v1.Pod{}
	pod.UID, pod.Namespace = "uid-1", "default"
	size := resource.MustParse("1Mi")
	mode := int32(0o600)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a", Path: "sub/a.conf"}}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: &mode}}},
	}
	objs := NewObjects()
	cm := &v1.ConfigMap{Data: map[string]string{"a": "A", "b": "B"}}
	cm.Name, cm.Namespace = "cfg", "default"
	sec := &v1.Secret{Data: map[string][]byte{"token": []byte("t")}}
	sec.Name, sec.Namespace = "sec", "default"
	objs.Set([]*v1.ConfigMap{cm}, []*v1.Secret{sec})

	dir := podDir(root, "uid-1")
	vols, err := prepareVolumes(pod, dir, objs, podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(vols["mem"].HostPath); err != nil || !mounted {
		t.Fatalf("memory emptyDir is not a mount: %v %v", mounted, err)
	}
	// Modes as the kubelet's: a disk emptyDir 0777, a tmpfs tmpfs's own
	// 1777 (a subPath made in it takes that on).
	for name, want := range map[string]os.FileMode{"disk": 0o777, "mem": 0o777 | os.ModeSticky} {
		if fi, err := os.Stat(vols[name].HostPath); err != nil || fi.Mode()&^os.ModeDir != want {
			t.Errorf("emptyDir %s: mode %v (%v), want %v", name, fi.Mode(), err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(vols["cfg"].HostPath, "sub/a.conf")); string(b) != "A" {
		t.Errorf("configMap item: %q", b)
	}
	if _, err := os.Stat(filepath.Join(vols["cfg"].HostPath, "b")); err == nil {
		t.Errorf("configMap key not in items was written")
	}
	if fi, err := os.Stat(filepath.Join(vols["sec"].HostPath, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode: %v %v", fi, err)
	}
	if !vols["cfg"].ReadOnly || vols["disk"].ReadOnly {
		t.Errorf("read-only flags: %+v", vols)
	}
	// Preparing again keeps the emptyDir's data.
	os.WriteFile(filepath.Join(vols["disk"].HostPath, "keep"), []byte("x"), 0o644)
	if _, err := prepareVolumes(pod, dir, objs, podEnv{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vols["disk"].HostPath, "keep")); err != nil {
		t.Errorf("emptyDir lost its data on a second prepare")
	}

	if err := removePodDir(root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("pod dir still there: %v", err)
	}
	if mounts, _ := mountsUnder(root); len(mounts) != 0 {
		t.Fatalf("mounts left: %v", mounts)
	}
}

// TestPodDirectoriesClosedToOtherUsers: what podrun keeps for pods (a
// Secret's files, of mode 0644 by default; an emptyDir, world-writable, in
// which a container may leave a setuid binary or a device node) is not
// reachable by a user other than root, whatever the root dir's own mode
// (0755 when podrun makes it): <root-dir>/pods is 0750, as the kubelet's,
// and one an older podrun made 0755 is closed when next used.
func TestPodDirectoriesClosedToOtherUsers(t *testing.T) {
	for _, existing := range []bool{false, true} {
		root := filepath.Join(t.TempDir(), "root")
		if existing {
			if err := os.MkdirAll(filepath.Join(root, "pods"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(root, "pods"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pod := &v1.Pod{}
		pod.UID, pod.Namespace = "uid-1", "default"
		pod.Spec.Volumes = []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		}
		objs := NewObjects()
		sec := &v1.Secret{Data: map[string][]byte{"token": []byte("t")}}
		sec.Name, sec.Namespace = "sec", "default"
		objs.Set(nil, []*v1.Secret{sec})
		vols, err := prepareVolumes(pod, podDir(root, "uid-1"), objs, podEnv{})
		if err != nil {
			t.Fatal(err)
		}
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(vols["sec"].HostPath, "token"), vols["scratch"].HostPath} {
			// Others reach p when they may search every directory from
			// the root dir's (the root dir itself is the admin's) down.
			reach := true
			for dir := filepath.Dir(p); within(realRoot, dir) && dir != realRoot; dir = filepath.Dir(dir) {
				fi, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o001 == 0 {
					reach = false
				}
			}
			if reach {
				t.Errorf("existing pods dir %v: %s is reachable by any user", existing, p)
			}
		}
		if err := removePodDir(root, "uid-1"); err != nil {
			t.Fatal(err)
		}
	}
}
