package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/engine"
)

// confineEnv is a temporary root dir next to directories podrun must never
// touch: base/outside (with sentinel files) and base/victim.
type confineEnv struct {
	base, root, outside, victim string
}

func newConfineEnv(t testing.TB) *confineEnv {
	t.Helper()
	base := t.TempDir()
	e := &confineEnv{
		base:    base,
		root:    filepath.Join(base, "root"),
		outside: filepath.Join(base, "outside"),
		victim:  filepath.Join(base, "victim"),
	}
	for _, d := range []string{e.root, filepath.Join(e.outside, "dir"), e.victim} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unmountUnder(t, base) })
	for p, data := range map[string]string{
		filepath.Join(e.outside, "sentinel"):        "outside",
		filepath.Join(e.outside, "dir", "sentinel"): "outside/dir",
		filepath.Join(e.victim, "sentinel"):         "victim",
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// snapshot describes every file under dir but the subtree skip, without
// following symlinks: type, mode, owner, content and link target.
// unmountUnder unmounts what a test left mounted under dir (subPath binds
// of a pod it did not tear down), so that its temporary directory can go.
func unmountUnder(t testing.TB, dir string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return
	}
	mounts, err := mountsUnder(real)
	if err != nil {
		t.Error(err)
		return
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
}

func snapshot(t testing.TB, dir, skip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %s", fi.Mode(), ownerOf(fi))
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

func ownerOf(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	return ""
}

// sameSnapshot fails t with what changed between two snapshots.
func sameSnapshot(t testing.TB, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for p, d := range before {
		if a, ok := after[p]; !ok {
			diffs = append(diffs, "removed "+p)
		} else if a != d {
			diffs = append(diffs, fmt.Sprintf("changed %s: %s -> %s", p, d, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "created "+p)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("outside the root dir:\n%s", strings.Join(diffs, "\n"))
	}
}

// isConfigError reports whether err makes the container's waiting reason
// CreateContainerConfigError.
func isConfigError(err error) bool {
	var ce *configError
	return errors.As(err, &ce)
}

// confinedPod is a pod of uid with an emptyDir "scratch", a configMap
// volume "cfg" (items as given) and a downwardAPI volume "meta".
func confinedPod(uid string, items []v1.KeyToPath, downward string) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = types.UID(uid), "p", "default"
	pod.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: items}}},
	}
	if downward != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "meta", VolumeSource: v1.VolumeSource{
			DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: downward, FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}})
	}
	pod.Spec.Containers = []v1.Container{{Name: "c", Image: "img", TerminationMessagePath: "/dev/termination-log"}}
	return pod
}

func confinedObjects(data map[string]string) *Objects {
	objs := NewObjects()
	cm := &v1.ConfigMap{Data: data}
	cm.Name, cm.Namespace = "cfg", "default"
	objs.Set([]*v1.ConfigMap{cm}, nil)
	return objs
}

func TestHostileUIDsRefused(t *testing.T) {
	for _, uid := range []string{"../../victim", "../../outside", "/abs", "a/b", "..", ".", "", "x\x00y", "../victim"} {
		t.Run(fmt.Sprintf("%q", uid), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod(uid, nil, "name")
			objs := confinedObjects(map[string]string{"a": "A"})
			if _, err := prepareVolumes(pod, podDir(e.root, uid), objs, podEnv{}); err == nil || !isConfigError(err) {
				t.Errorf("prepareVolumes: %v, want a configError", err)
			}
			r := &Runner{cfg: Config{RootDir: e.root, Objects: objs}}
			if _, err := r.containerConfig(pod, &pod.Spec.Containers[0], engine.ContainerTypeApp, 0, nil, podEnv{}); err == nil || !isConfigError(err) {
				t.Errorf("containerConfig (termination message file): %v, want a configError", err)
			}
			if err := removePodDir(e.root, uid); err == nil {
				t.Errorf("removePodDir: no error")
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
	}
}

func TestHostileNamesAndPathsRefused(t *testing.T) {
	hostile := []string{"../x", "../../victim/sentinel", "../../../outside/new", "/abs", "a/../../b",
		"a/..", "", ".", "./", "x\x00y", "..", "a/../b"}
	for _, p := range hostile {
		t.Run(fmt.Sprintf("item %q", p), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod("uid-1", []v1.KeyToPath{{Key: "a", Path: p}}, "")
			_, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(map[string]string{"a": "A"}), podEnv{})
			if err == nil || !isConfigError(err) {
				t.Errorf("prepareVolumes: %v, want a configError", err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
		t.Run(fmt.Sprintf("key %q", p), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			// No items: every key is a file name.
			pod := confinedPod("uid-1", nil, "")
			_, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(map[string]string{p: "A"}), podEnv{})
			if err == nil || !isConfigError(err) {
				t.Errorf("prepareVolumes: %v, want a configError", err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
		t.Run(fmt.Sprintf("downwardAPI %q", p), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod("uid-1", nil, "x")
			pod.Spec.Volumes[2].DownwardAPI.Items[0].Path = p
			_, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(nil), podEnv{})
			if err == nil || !isConfigError(err) {
				t.Errorf("prepareVolumes: %v, want a configError", err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
	}
	for _, name := range []string{"../../victim", "a/b", "..", "."} {
		t.Run(fmt.Sprintf("volume %q", name), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod("uid-1", nil, "")
			pod.Spec.Volumes[0].Name = name
			pod.Spec.Volumes[1].Name = name + "x"
			_, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(nil), podEnv{})
			if err == nil || !isConfigError(err) {
				t.Errorf("prepareVolumes: %v, want a configError", err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
		t.Run(fmt.Sprintf("container %q", name), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			if _, err := terminationMessageFile(e.root, "uid-1", name, 0); err == nil || !isConfigError(err) {
				t.Errorf("terminationMessageFile: %v, want a configError", err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
	}
}

// TestSubPathConfined: a subPath resolves within its volume, symlinks and
// all; one through a symlink a container planted pointing out is refused,
// and nothing is made outside.
func TestSubPathConfined(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	objs := confinedObjects(map[string]string{"a": "A"})
	hostDir := filepath.Join(e.base, "hostpath")
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{
		HostPath: &v1.HostPathVolumeSource{Path: hostDir}}})
	vols, err := prepareVolumes(pod, podDir(e.root, "uid-1"), objs, podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the pod's containers may have written into its volumes.
	scratch := vols["scratch"].HostPath
	for link, target := range map[string]string{
		filepath.Join(scratch, "abs"):         e.outside,
		filepath.Join(scratch, "rel"):         "../../../../../../outside",
		filepath.Join(scratch, "file"):        filepath.Join(e.outside, "sentinel"),
		filepath.Join(scratch, "inside"):      "data",
		filepath.Join(hostDir, "out"):         e.outside,
		filepath.Join(hostDir, "out-rel"):     "../outside",
		filepath.Join(scratch, "data", "sub"): "../../../../../../../outside/dir",
	} {
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, e.base, e.root)
	r := &Runner{cfg: Config{RootDir: e.root, Objects: objs}}
	config := func(vol, sub string) (*engine.ContainerConfig, error) {
		c := v1.Container{Name: "c", Image: "img",
			VolumeMounts: []v1.VolumeMount{{Name: vol, MountPath: "/m", SubPath: sub}}}
		return r.containerConfig(pod, &c, engine.ContainerTypeApp, 0, vols, podEnv{})
	}
	for _, tc := range []struct{ vol, sub string }{
		{"scratch", "abs"}, {"scratch", "abs/new"}, {"scratch", "rel"}, {"scratch", "rel/dir"},
		{"scratch", "file"}, {"scratch", "data/sub"}, {"scratch", "data/sub/new"}, {"scratch", "inside/sub/x"},
		{"scratch", "../x"}, {"scratch", "/etc"}, {"scratch", "a/../../x"}, {"cfg", "missing"},
		{"host", "out"}, {"host", "out/new"}, {"host", "out-rel"}, {"host", "../outside"},
	} {
		if _, err := config(tc.vol, tc.sub); err == nil || !isConfigError(err) {
			t.Errorf("subPath %q of %s: %v, want a configError", tc.sub, tc.vol, err)
		}
	}
	sameSnapshot(t, before, snapshot(t, e.base, e.root))

	// A subPath within the volume is made, and bound: through podrun's
	// own bind of it where a container may write the volume.
	for _, tc := range []struct{ vol, sub, want string }{
		{"scratch", "new/dir", filepath.Join(scratch, "new/dir")},
		{"scratch", "inside", filepath.Join(scratch, "data")},
		{"scratch", "inside/made", filepath.Join(scratch, "data/made")},
		{"scratch", ".", scratch},
		{"cfg", "a", filepath.Join(vols["cfg"].HostPath, "a")},
		{"host", "made", filepath.Join(hostDir, "made")},
	} {
		cfg, err := config(tc.vol, tc.sub)
		if err != nil {
			t.Errorf("subPath %q of %s: %v", tc.sub, tc.vol, err)
			continue
		}
		if tc.vol == "cfg" {
			// Never writable by a container: its real path is bound.
			if want, _ := filepath.EvalSymlinks(tc.want); cfg.Mounts[0].HostPath != want {
				t.Errorf("subPath %q of %s: host path %s, want %s", tc.sub, tc.vol, cfg.Mounts[0].HostPath, want)
			}
			continue
		}
		checkBound(t, e.root, tc.vol, cfg.Mounts[0].HostPath, tc.want)
	}
}

// checkBound checks that host, the path a subPath mount of container c of
// pod uid-1 hands the engine, is podrun's bind of want: its own path in
// the pod directory, a mount point of the very file want is.
func checkBound(t *testing.T, root, vol, host, want string) {
	t.Helper()
	realRoot, _ := filepath.EvalSymlinks(root)
	if dir := filepath.Join(realRoot, "pods", "uid-1", subPathDir, vol, "c"); filepath.Dir(host) != dir {
		t.Errorf("host path %s, want one in %s", host, dir)
	}
	if mounted, err := isMountPoint(host); err != nil || !mounted {
		t.Errorf("%s is not a mount point (%v)", host, err)
	}
	got, err1 := os.Stat(host)
	w, err2 := os.Stat(want)
	if err1 != nil || err2 != nil || !os.SameFile(got, w) {
		t.Errorf("%s is not a bind of %s (%v, %v)", host, want, err1, err2)
	}
}

// TestSubPathMode: a missing subPath is made with the volume directory's
// mode, setgid and sticky included, not podrun's umask (the kubelet's
// SafeMakeDir; the conformance spec "nonexistent volume subPath should
// have the correct mode and owner using FSGroup" expects dgtrwxrwxrwx);
// a directory that was there keeps its own (setgid by Linux inheritance).
func TestSubPathMode(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(nil), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	scratch := vols["scratch"].HostPath
	want := fs.ModePerm | fs.ModeSetgid | fs.ModeSticky
	if err := os.Chmod(scratch, want); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(scratch, "there"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := &Runner{cfg: Config{RootDir: e.root}}
	c := v1.Container{Name: "c", Image: "img",
		VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/m", SubPath: "there/a/b"}}}
	if _, err := r.containerConfig(pod, &c, engine.ContainerTypeApp, 0, vols, podEnv{}); err != nil {
		t.Fatal(err)
	}
	for dir, mode := range map[string]fs.FileMode{
		"there": 0o700 | fs.ModeSetgid, "there/a": want, "there/a/b": want,
	} {
		fi, err := os.Stat(filepath.Join(scratch, dir))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() &^ fs.ModeDir; got != mode {
			t.Errorf("%s: mode %v, want %v", dir, got, mode)
		}
	}
}

// TestSubPathExpr: a subPathExpr is expanded with the container's
// environment, as the kubelet does, and the result is held to the same
// confinement as a subPath.
func TestSubPathExpr(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	objs := confinedObjects(map[string]string{"a": "A"})
	vols, err := prepareVolumes(pod, podDir(e.root, "uid-1"), objs, podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{cfg: Config{RootDir: e.root, Objects: objs}}
	config := func(value string) (*engine.ContainerConfig, error) {
		c := v1.Container{Name: "c", Image: "img", Env: []v1.EnvVar{{Name: "WHERE", Value: value}},
			VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/m", SubPathExpr: "logs/$(WHERE)"}}}
		return r.containerConfig(pod, &c, engine.ContainerTypeApp, 0, vols, podEnv{})
	}
	cfg, err := config("web")
	if err != nil {
		t.Fatal(err)
	}
	checkBound(t, e.root, "scratch", cfg.Mounts[0].HostPath, filepath.Join(vols["scratch"].HostPath, "logs", "web"))
	before := snapshot(t, e.base, e.root)
	if _, err := config("../../../../outside"); err == nil || !isConfigError(err) {
		t.Errorf("a subPathExpr expanding to leave the volume: %v, want a configError", err)
	}
	sameSnapshot(t, before, snapshot(t, e.base, e.root))
}

// TestSubPathFIFO: a FIFO a container made where a subPath points does not
// hold podrun (an open for reading would wait for a writer).
func TestSubPathFIFO(t *testing.T) {
	root := t.TempDir()
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(root, "uid-1"), confinedObjects(nil), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(vols["scratch"].HostPath, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, p, err := subPathSource(vols["scratch"], "fifo")
		if err == nil {
			f.Close()
		}
		if err == nil && p != fifo {
			err = fmt.Errorf("host path %s, want %s", p, fifo)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subPath on a FIFO blocks")
	}
}

// TestSubPathDeviceNodeNotOpened: a device node a container made
// (CAP_MKNOD is among Docker's defaults) where a subPath points is not
// opened by podrun, which runs as root outside the container's device
// cgroup: the driver's open would run on the host. A node of a major no
// driver has fails any open (ENXIO); podrun only learns where it is.
func TestSubPathDeviceNodeNotOpened(t *testing.T) {
	root := t.TempDir()
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(root, "uid-1"), confinedObjects(nil), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(vols["scratch"].HostPath, "dev")
	// 240-254 are majors for local and experimental use: nothing here
	// registers 250.
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o644, int(unix.Mkdev(250, 0))); err != nil {
		t.Fatalf("mknod (the tests run as root): %v", err)
	}
	if f, err := os.Open(dev); err == nil {
		f.Close()
		t.Fatal("major 250 has a driver here: the test cannot tell an open from none")
	}
	f, p, err := subPathSource(vols["scratch"], "dev")
	if err == nil {
		f.Close()
	}
	if err != nil || p != dev {
		t.Fatalf("subPathSource = %q, %v; want %s, no error (the node is not opened)", p, err, dev)
	}
}

// TestTerminationMessageFileReplacesAPlantedSymlink: a symlink in place
// of a termination message file, to a file of the root dir (a node key,
// say), is replaced by the file podrun makes: the key is not truncated
// or made world-writable.
func TestTerminationMessageFileReplacesAPlantedSymlink(t *testing.T) {
	root := t.TempDir()
	key := filepath.Join(root, "pki", "node.key")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "pods", "uid-1", "containers", "c", "0-termination-log")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../pki/node.key", link); err != nil {
		t.Fatal(err)
	}
	p, err := terminationMessageFile(root, "uid-1", "c", 0)
	if b, err := os.ReadFile(key); err != nil || string(b) != "secret" {
		t.Errorf("the key now reads %q (%v)", b, err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key's mode: %v (%v)", fi.Mode(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o666 {
		t.Errorf("the termination message file: %v (%v), want a regular file, mode 0666", fi.Mode(), err)
	}
}

// TestPlantedPodDirSymlinks: a symlink in place of the pod directory's
// "volumes" or "containers" (or the pod directory itself, or "pods")
// pointing out is refused, and nothing outside is touched.
func TestPlantedPodDirSymlinks(t *testing.T) {
	// Which of volume setup and the termination message file must fail; a
	// planted symlink in place of a file podrun writes is replaced (rename
	// does not follow it), which is no failure.
	for _, tc := range []struct {
		link, target    string
		volErr, termErr bool
	}{
		{"pods/uid-1/volumes", "outside", true, false},
		{"pods/uid-1/volumes", "../../../outside", true, false},
		{"pods/uid-1/volumes/kubernetes.io~empty-dir", "outside", true, false},
		{"pods/uid-1/volumes/kubernetes.io~empty-dir/scratch", "outside", true, false},
		{"pods/uid-1/volumes/kubernetes.io~configmap/cfg", "../../../../../outside", true, false},
		{"pods/uid-1/volumes/kubernetes.io~configmap/cfg/a", "outside/sentinel", false, false},
		{"pods/uid-1/containers", "outside", false, true},
		{"pods/uid-1/containers/c", "../../../../outside/dir", false, true},
		{"pods/uid-1/containers/c/0-termination-log", "outside/sentinel", false, false},
		{"pods/uid-1", "outside", true, true},
		// Symlinks that stay in the root dir, to another pod's directory.
		{"pods/uid-1/volumes", "../uid-2/volumes", true, false},
		{"pods/uid-1/containers/c", "../../uid-2/containers/c", false, true},
		{"pods/uid-1", "uid-2", true, true},
		{"pods", "outside", true, true},
	} {
		t.Run(tc.link+"->"+tc.target, func(t *testing.T) {
			e := newConfineEnv(t)
			link := filepath.Join(e.root, tc.link)
			target := tc.target
			if target == "outside" || strings.HasPrefix(target, "outside/") {
				target = filepath.Join(e.base, target) // absolute
			}
			os.MkdirAll(filepath.Dir(link), 0o755)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, e.base, e.root)
			pod := confinedPod("uid-1", nil, "")
			objs := confinedObjects(map[string]string{"a": "A"})
			_, verr := prepareVolumes(pod, podDir(e.root, "uid-1"), objs, podEnv{})
			_, terr := terminationMessageFile(e.root, "uid-1", "c", 0)
			if (verr != nil) != tc.volErr {
				t.Errorf("prepareVolumes: %v, want an error: %v", verr, tc.volErr)
			}
			if (terr != nil) != tc.termErr {
				t.Errorf("terminationMessageFile: %v, want an error: %v", terr, tc.termErr)
			}
			rerr := removePodDir(e.root, "uid-1")
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
			if rerr == nil {
				if _, err := os.Lstat(filepath.Join(e.root, "pods/uid-1")); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("removePodDir returned nil, pod dir: %v", err)
				}
			}
		})
	}
}

// TestRemovePodDirKeepsSymlinkTargets: removing a pod directory in which
// symlinks point out removes the links, never what they point to.
func TestRemovePodDirKeepsSymlinkTargets(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(e.root, "uid-1"), confinedObjects(map[string]string{"a": "A"}), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := terminationMessageFile(e.root, "uid-1", "c", 0); err != nil {
		t.Fatal(err)
	}
	scratch := vols["scratch"].HostPath
	for link, target := range map[string]string{
		filepath.Join(scratch, "abs"):                      e.outside,
		filepath.Join(scratch, "rel"):                      "../../../../../../outside",
		filepath.Join(scratch, "file"):                     filepath.Join(e.outside, "sentinel"),
		filepath.Join(scratch, "deep/er/dir"):              filepath.Join(e.outside, "dir"),
		filepath.Join(e.root, "pods/uid-1/link"):           e.outside,
		filepath.Join(e.root, "pods/uid-1/containers/c/x"): e.victim,
		filepath.Join(e.root, "pods/uid-1/volumes/evil"):   "../../../../victim",
		filepath.Join(vols["cfg"].HostPath, "..", "extra"): e.outside,
	} {
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, e.base, e.root)
	if err := removePodDir(e.root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, before, snapshot(t, e.base, e.root))
	if _, err := os.Lstat(filepath.Join(e.root, "pods/uid-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("pod dir still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(e.outside, "dir", "sentinel")); err != nil || string(b) != "outside/dir" {
		t.Fatalf("outside file: %q %v", b, err)
	}
	// Removing it again, or a pod dir never made, is no error.
	if err := removePodDir(e.root, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if err := removePodDir(filepath.Join(e.base, "no-root"), "uid-1"); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeFilesUpdated: a changed key is rewritten, a removed key removed,
// a file left as it is when nothing changed.
func TestVolumeFilesUpdated(t *testing.T) {
	root := t.TempDir()
	pod := confinedPod("uid-1", nil, "")
	vols, err := prepareVolumes(pod, podDir(root, "uid-1"), confinedObjects(map[string]string{"a": "A", "b": "B", "c": "C"}), podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	dir := vols["cfg"].HostPath
	if real, _ := filepath.EvalSymlinks(dir); real != dir || !strings.HasPrefix(dir, root) && !strings.HasPrefix(dir, mustReal(t, root)) {
		t.Fatalf("volume host path %s is not a real path under %s", dir, root)
	}
	before, _ := os.Stat(filepath.Join(dir, "c"))
	if _, err := prepareVolumes(pod, podDir(root, "uid-1"), confinedObjects(map[string]string{"a": "A2", "c": "C"}), podEnv{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "A2" {
		t.Errorf("a: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed key b still there: %v", err)
	}
	if after, _ := os.Stat(filepath.Join(dir, "c")); !os.SameFile(before, after) {
		t.Errorf("unchanged key c was rewritten")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("volume holds %v", entries)
	}
}

func mustReal(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
