package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestObjectsSetReportsContentChanges(t *testing.T) {
	cm := func(name string, data map[string]string) *v1.ConfigMap {
		c := &v1.ConfigMap{Data: data}
		c.Name, c.Namespace = name, "ns"
		return c
	}
	sec := func(name string, typ v1.SecretType, v string) *v1.Secret {
		s := &v1.Secret{Type: typ, Data: map[string][]byte{"k": []byte(v)}}
		s.Name, s.Namespace = name, "ns"
		return s
	}
	o := NewObjects()
	if got := o.Set([]*v1.ConfigMap{cm("a", map[string]string{"k": "1"}), cm("b", nil)}, []*v1.Secret{sec("s", "", "x")}); len(got) != 3 {
		t.Fatalf("first Set: %v, want all three", got)
	}
	// The same content again (new objects, a nil map for an empty one).
	if got := o.Set([]*v1.ConfigMap{cm("a", map[string]string{"k": "1"}), cm("b", map[string]string{})}, []*v1.Secret{sec("s", "", "x")}); len(got) != 0 {
		t.Fatalf("a re-send changed %v", got)
	}
	got := o.Set([]*v1.ConfigMap{cm("a", map[string]string{"k": "2"}), cm("c", nil)},
		[]*v1.Secret{sec("s", v1.SecretTypeOpaque, "x")})
	want := map[objectRef]bool{
		{Namespace: "ns", Name: "a"}: true, {Namespace: "ns", Name: "b"}: true, {Namespace: "ns", Name: "c"}: true,
		{Secret: true, Namespace: "ns", Name: "s"}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%+v not reported changed", k)
		}
	}
}

func TestRefersToAny(t *testing.T) {
	pod := &v1.Pod{}
	pod.Namespace = "ns"
	pod.Spec.Volumes = []v1.Volume{{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "vol-secret"}}}}}}}}
	pod.Spec.InitContainers = []v1.Container{{Name: "i", EnvFrom: []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "env-cm"}}}}}}
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
	for ref, want := range map[objectRef]bool{
		{Secret: true, Namespace: "ns", Name: "vol-secret"}: true,
		{Namespace: "ns", Name: "env-cm"}:                   true,
		{Secret: true, Namespace: "ns", Name: "pull"}:       true,
		{Namespace: "ns", Name: "vol-secret"}:               false, // a ConfigMap of that name
		{Secret: true, Namespace: "other", Name: "pull"}:    false,
	} {
		if got := refersToAny(pod, map[objectRef]bool{ref: true}); got != want {
			t.Errorf("refersToAny(%+v) = %v, want %v", ref, got, want)
		}
	}
}

// TestVolumeKeyTurnsIntoDirectory: a rewrite where a file's path becomes a
// directory (and back) works, and leaves no empty directory or temporary
// file behind.
func TestVolumeKeyTurnsIntoDirectory(t *testing.T) {
	d, err := openPodDirs(t.TempDir(), "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rel := d.rel("volumes", "kubernetes.io~configmap", "v")
	write := func(files map[string]string) string {
		t.Helper()
		vf := map[string]volumeFile{}
		for k, v := range files {
			vf[k] = volumeFile{Data: []byte(v), Mode: 0o644}
		}
		dir, err := writeVolumeFiles(d, rel, vf)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	list := func(dir string) map[string]string {
		out := map[string]string{}
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && p != dir {
				r, _ := filepath.Rel(dir, p)
				b, _ := os.ReadFile(p)
				if fi.IsDir() {
					out[r+"/"] = ""
				} else {
					out[r] = string(b)
				}
			}
			return nil
		})
		return out
	}
	dir := write(map[string]string{"a": "1", "x/y/z": "2"})
	write(map[string]string{"a/b": "3", "x": "4"})
	if got := list(dir); len(got) != 3 || got["a/b"] != "3" || got["x"] != "4" {
		t.Fatalf("after the turn: %v", got)
	}
	write(map[string]string{"a": "5"})
	if got := list(dir); len(got) != 1 || got["a"] != "5" {
		t.Fatalf("after the turn back: %v", got)
	}
}

func TestTokenRefreshTime(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		life, want time.Duration
	}{
		{time.Hour, 48 * time.Minute},
		{3607 * time.Second, 2885600 * time.Millisecond},
		{10 * time.Minute, 8 * time.Minute},
		{48 * time.Hour, 24 * time.Hour}, // 24 h at the latest
	} {
		if got := tokenRefreshTime(t0, t0.Add(tc.life)).Sub(t0); got != tc.want {
			t.Errorf("life %s: refresh after %s, want %s", tc.life, got, tc.want)
		}
	}
}

// TestVolumeFilePathStartingWithDotDotRefused: a file path the API lets
// through, such as a projected token's "./..podrun-tmp" in a pod of the
// apiserver (which the manifest package does not check), is refused
// before anything is written: the names starting with ".." are the
// volume's own (its temporary file).
func TestVolumeFilePathStartingWithDotDotRefused(t *testing.T) {
	d, err := openPodDirs(t.TempDir(), "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rel := d.rel("volumes", "kubernetes.io~projected", "v")
	for _, name := range []string{"./" + volumeTempFile, "..data", "./..x/token"} {
		files := map[string]volumeFile{"ok": {Data: []byte("a"), Mode: 0o644}, name: {Data: []byte("token"), Mode: 0o600}}
		if _, err := writeVolumeFiles(d, rel, files); err == nil || !isConfigError(err) {
			t.Errorf("%q: %v, want a configError", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.real, rel, "ok")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was written though the set was refused: %v", err)
	}
}
