package runner

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/engine"
)

// FuzzPodDirConfinement builds a pod from the fuzz input (its uid, volume
// names, configMap keys and item paths, downwardAPI paths, subPath and
// subPathExpr, container name and termination message path, the ConfigMap
// itself), prepares its volumes and its container's mounts, keeps and
// reads back its spec records, plants symlinks in the pod directory as the
// input says (what a container writing its emptyDir, or anyone else, might
// do), does it all again, prunes the records, then removes the pod
// directory, all against a root dir in a temporary directory. It checks
// that nothing outside the root dir was made, changed or removed, that
// every host path to be bound into a container resolves to a path under the
// root dir, and that a record read back is the one kept.
//
// The root dir lies a few levels below the temporary directory, and inputs
// with more '..' elements than that are skipped, so that even a broken
// build cannot reach above the temporary directory by '..' alone; planted
// symlinks point into the temporary directory only. No hostPath volumes
// (their paths are the host's by design) and no tmpfs.
func FuzzPodDirConfinement(f *testing.F) {
	type seed struct {
		uid, names, cmKey, itemKey, itemPath, downward, subPath, subPathExpr, ctr, termPath string
		items                                                                               bool
		subVol, attempt                                                                     uint8
		plant                                                                               []byte
	}
	for _, s := range []seed{
		{uid: "uid-1", names: "scratch,cfg,meta", cmKey: "a", itemKey: "a", itemPath: "sub/a.conf", downward: "name",
			subPath: "data", ctr: "c", termPath: "/dev/termination-log", items: true},
		{uid: "../../../../../outside", names: "scratch,cfg,meta", cmKey: "a", itemKey: "a", itemPath: "a", downward: "n",
			subPath: "x", ctr: "c", termPath: "/t"},
		{uid: "/abs", names: "s,c,m", cmKey: "k", itemKey: "k", itemPath: "p", downward: "d", ctr: "c", termPath: "/t"},
		{uid: "a/b", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t"},
		{uid: "..", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t"},
		{uid: ".", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t"},
		{uid: "u", names: "../../../../outside,c,m", cmKey: "k", ctr: "c", termPath: "/t"},
		{uid: "u", names: "s,../../x,m", cmKey: "k", ctr: "c", termPath: "/t"},
		{uid: "u", names: "s,c,m", cmKey: "../../../../../outside/new", ctr: "c"},
		{uid: "u", names: "s,c,m", cmKey: "k", itemKey: "k", itemPath: "../../../../../outside/sentinel", items: true, ctr: "c"},
		{uid: "u", names: "s,c,m", cmKey: "k", itemKey: "k", itemPath: "/abs/x", items: true, ctr: "c"},
		{uid: "u", names: "s,c,m", cmKey: "k", itemKey: "k", itemPath: "a/../../b", items: true, ctr: "c"},
		{uid: "u", names: "s,c,m", cmKey: "k", downward: "../../../outside/x", ctr: "c"},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "../../../../../outside", termPath: "/t"},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c/d", termPath: "/t", attempt: 3},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "../../../../outside"},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "/etc"},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "k", subVol: 1},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPathExpr: "$(HOME)/../..", subPath: "a"},
		// A symlink planted in the emptyDir where the subPath goes, to the
		// outside directory (absolute, then relative), then to a file.
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "esc", termPath: "/t", plant: []byte{12, 0}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "esc/new", termPath: "/t", plant: []byte{4, 1}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "esc", termPath: "/t", plant: []byte{12, 2}},
		// The pod directory's components replaced by symlinks out.
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{0, 0}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{1, 1}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{2, 0, 7, 1}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{10, 0}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{11, 1}},
		{uid: "u", names: "s,c,m", cmKey: "k", itemKey: "k", itemPath: "d/f", items: true, ctr: "c", termPath: "/t",
			plant: []byte{6, 0, 5, 2, 8, 2, 9, 7}},
		// A symlink to a directory inside the root, and a dangling one.
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", subPath: "in", termPath: "/t", plant: []byte{12, 4, 3, 6}},
		// The spec records' directories and files replaced by symlinks.
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{13, 0}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{14, 1, 15, 3}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{16, 4}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "c", termPath: "/t", plant: []byte{17, 2, 18, 2}},
		{uid: "u", names: "s,c,m", cmKey: "k", ctr: "../../../../../outside/dir", termPath: "/t"},
	} {
		if s.downward == "" {
			s.downward = "d"
		}
		f.Add(s.uid, s.names, s.cmKey, s.itemKey, s.itemPath, s.downward, s.subPath, s.subPathExpr, s.ctr, s.termPath,
			s.items, s.subVol, s.attempt, s.plant)
	}
	f.Fuzz(func(t *testing.T, uid, names, cmKey, itemKey, itemPath, downward, subPath, subPathExpr, ctr, termPath string,
		items bool, subVol, attempt uint8, plant []byte) {
		strs := []string{uid, names, cmKey, itemKey, itemPath, downward, subPath, subPathExpr, ctr}
		dots := 0
		for _, s := range strs {
			dots += strings.Count(s, "..")
		}
		// The root dir is 5 levels below base (base/a/b/c/root/pods).
		if dots > 5 {
			t.Skip("more '..' than levels between the root dir and the temporary directory")
		}

		base := t.TempDir()
		t.Cleanup(func() { unmountUnder(t, base) }) // subPath binds a refused teardown left
		root := filepath.Join(base, "a", "b", "c", "root")
		outside := filepath.Join(base, "outside")
		for _, d := range []string{root, filepath.Join(outside, "dir"), filepath.Join(root, "inroot")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{filepath.Join(outside, "sentinel"), filepath.Join(outside, "dir", "sentinel"),
			filepath.Join(base, "a", "sentinel"), filepath.Join(base, "a", "b", "c", "sentinel")} {
			if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, base, root)

		vn := strings.SplitN(names, ",", 3)
		for len(vn) < 3 {
			vn = append(vn, "v"+strconv.Itoa(len(vn)))
		}
		pod := &v1.Pod{}
		pod.UID, pod.Name, pod.Namespace = types.UID(uid), "p", "default"
		cmSrc := &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}
		if items {
			cmSrc.Items = []v1.KeyToPath{{Key: itemKey, Path: itemPath}}
		}
		pod.Spec.Volumes = []v1.Volume{
			{Name: vn[0], VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: vn[1], VolumeSource: v1.VolumeSource{ConfigMap: cmSrc}},
			{Name: vn[2], VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: downward, FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		}
		c := v1.Container{Name: ctr, Image: "img", TerminationMessagePath: termPath}
		for i, vol := range pod.Spec.Volumes {
			vm := v1.VolumeMount{Name: vol.Name, MountPath: "/v" + strconv.Itoa(i)}
			if i == int(subVol)%3 {
				vm.SubPath = subPath
			} else {
				vm.SubPathExpr = subPathExpr
			}
			c.VolumeMounts = append(c.VolumeMounts, vm)
		}
		pod.Spec.Containers = []v1.Container{c}
		cm := &v1.ConfigMap{Data: map[string]string{cmKey: "data"}, BinaryData: map[string][]byte{cmKey + ".bin": {0, 1}}}
		if items && itemKey != cmKey {
			cm.Data[itemKey] = "item"
		}
		cm.Name, cm.Namespace = "cfg", "default"
		objs := NewObjects()
		objs.Set([]*v1.ConfigMap{cm}, nil)
		r := &Runner{cfg: Config{RootDir: root, Objects: objs}}

		underRoot := func(what, p string) {
			t.Helper()
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				t.Fatalf("%s %s: %v", what, p, err)
			}
			if !within(realRoot, real) {
				t.Fatalf("%s %s resolves to %s, outside the root dir %s", what, p, real, realRoot)
			}
		}
		ctrSpec := &pod.Spec.Containers[0]
		sbKey, ctrKey := podSandboxKey(pod), podContainerKey(ctrSpec)
		records := func() {
			writeRecord(root, uid, sbKey, sandboxRecord(pod))
			writeRecord(root, uid, ctrKey, containerRecord(ctrSpec))
			recs := openRecords(root)
			defer recs.Close()
			sb := &engine.Sandbox{Hash: sbKey.hash}
			c := &engine.Container{Name: ctr, Hash: ctrKey.hash, ResourcesHash: ctrKey.resources}
			if got := recs.of(uid).sandbox(sb); got != nil && !bytes.Equal(got, sandboxRecord(pod)) {
				t.Fatalf("sandbox record read as %s", got)
			}
			if got := recs.of(uid).container(c); got != nil && !bytes.Equal(got, containerRecord(ctrSpec)) {
				t.Fatalf("container record read as %s", got)
			}
		}
		setup := func() {
			records()
			vols, err := prepareVolumes(pod, podDir(root, uid), objs, podEnv{})
			if err != nil {
				return
			}
			for name, src := range vols {
				underRoot("volume "+strconv.Quote(name), src.HostPath)
			}
			cfg, err := r.containerConfig(pod, &pod.Spec.Containers[0], engine.ContainerTypeApp, int(attempt), vols, podEnv{})
			if err != nil {
				return
			}
			for _, m := range cfg.Mounts {
				underRoot("mount "+m.ContainerPath, m.HostPath)
			}
		}

		setup()
		if checkName("uid", uid) == nil {
			plantSymlinks(t, root, base, outside, uid, vn, itemPath, downward, subPath, ctr, int(attempt), plant,
				sbKey.file(), ctrKey.file())
		}
		setup()
		pruneRecords(root, uid, map[recordKey]bool{sbKey: true})
		rmErr := removePodDir(root, uid)

		sameSnapshot(t, before, snapshot(t, base, root))
		if rmErr == nil && checkName("uid", uid) == nil {
			if _, err := os.Lstat(filepath.Join(root, "pods", uid)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("removePodDir returned nil, but the pod dir: %v", err)
			}
		}
	})
}

// plantSymlinks replaces paths in the pod directory of uid by symlinks, as
// plant says: pairs of bytes, a place and a target. The places are made and
// replaced through an os.Root of the root dir, so the planting itself never
// leaves it; the targets are all in base. sbRecord and ctrRecord are the
// file names of the pod's spec records.
func plantSymlinks(t *testing.T, root, base, outside, uid string, vn []string, itemPath, downward, subPath, ctr string, attempt int, plant []byte,
	sbRecord, ctrRecord string) {
	pod := filepath.Join("pods", uid)
	empty := filepath.Join(pod, "volumes", "kubernetes.io~empty-dir", vn[0])
	cfg := filepath.Join(pod, "volumes", "kubernetes.io~configmap", vn[1])
	places := []string{
		filepath.Join(pod, "volumes"),
		filepath.Join(pod, "containers"),
		filepath.Join(pod, "volumes", "kubernetes.io~empty-dir"),
		empty,
		filepath.Join(empty, filepath.Dir(filepath.Clean("/"+subPath))),
		filepath.Join(cfg, filepath.Clean("/"+itemPath)),
		filepath.Join(cfg, filepath.Dir(filepath.Clean("/"+itemPath))),
		filepath.Join(pod, "containers", ctr),
		filepath.Join(pod, "containers", ctr, strconv.Itoa(attempt)+"-termination-log"),
		filepath.Join(pod, "volumes", "kubernetes.io~downward-api", vn[2], filepath.Clean("/"+downward)),
		pod,
		"pods",
		filepath.Join(empty, filepath.Clean("/"+subPath)),
		filepath.Join(pod, "specs"),
		filepath.Join(pod, "specs", "sandbox"),
		filepath.Join(pod, "specs", "containers"),
		filepath.Join(pod, "specs", "containers", ctr),
		filepath.Join(pod, "specs", "sandbox", sbRecord),
		filepath.Join(pod, "specs", "containers", ctr, ctrRecord),
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i+1 < len(plant) && i < 16; i += 2 {
		place := places[int(plant[i])%len(places)]
		if !filepath.IsLocal(place) {
			continue
		}
		dir := filepath.Join(root, filepath.Dir(place))
		rel := func(p string) string {
			s, err := filepath.Rel(dir, p)
			if err != nil {
				return p
			}
			return s
		}
		targets := []string{
			outside,
			rel(outside),
			filepath.Join(outside, "sentinel"),
			rel(filepath.Join(outside, "dir")),
			rel(filepath.Join(root, "inroot")),
			base,
			"dangling",
			rel(base),
		}
		target := targets[int(plant[i+1])%len(targets)]
		r.MkdirAll(filepath.Dir(place), 0o755)
		r.RemoveAll(place)
		r.Symlink(target, place)
	}
}
