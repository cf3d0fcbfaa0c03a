package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podrun/podrun/engine"
)

// engineObjects are the sandbox and container, as the runtime lists them,
// that a runner makes of pod's spec (its first container).
func engineObjects(pod *v1.Pod) (*engine.Sandbox, *engine.Container) {
	c := &pod.Spec.Containers[0]
	return &engine.Sandbox{Hash: SandboxHash(pod)},
		&engine.Container{Name: c.Name, Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c)}
}

// keepBoth writes pod's sandbox record and its first container's.
func keepBoth(root string, pod *v1.Pod) (sbErr, cErr error) {
	c := &pod.Spec.Containers[0]
	return writeRecord(root, string(pod.UID), podSandboxKey(pod), sandboxRecord(pod)),
		writeRecord(root, string(pod.UID), podContainerKey(c), containerRecord(c))
}

func TestSpecRecordRoundTrip(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "MODE", Value: "ü <&>"}}
	// What the JSON of a container holds beyond strings reads back to the
	// same hashes: quantities (one not in canonical form), int-or-string.
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.5"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("1e9")},
	}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		PeriodSeconds: 3}
	for range 2 { // a second write of the same spec replaces the file
		if sbErr, cErr := keepBoth(e.root, pod); sbErr != nil || cErr != nil {
			t.Fatal(sbErr, cErr)
		}
	}
	specs := filepath.Join(e.root, "pods", "uid-1", "specs")
	sbFile := filepath.Join(specs, "sandbox", SandboxHash(pod)+".json")
	cFile := filepath.Join(specs, "containers", "c", ContainerHash(c)+"-"+ResourcesHash(c)+".json")
	for f, want := range map[string][]byte{sbFile: sandboxRecord(pod), cFile: containerRecord(c)} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %s, want 0600", f, fi.Mode())
		}
		if dfi, err := os.Stat(filepath.Dir(f)); err != nil || dfi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", filepath.Dir(f), dfi.Mode(), err)
		}
		if got, _ := os.ReadFile(f); !bytes.Equal(got, want) {
			t.Errorf("%s: %s, want %s", f, got, want)
		}
		ents, _ := os.ReadDir(filepath.Dir(f))
		if len(ents) != 1 {
			t.Errorf("%s holds %d files (a temporary file left?)", filepath.Dir(f), len(ents))
		}
	}

	recs := openRecords(e.root)
	defer recs.Close()
	sb, ctr := engineObjects(pod)
	if got := recs.of("uid-1").sandbox(sb); !bytes.Equal(got, sandboxRecord(pod)) {
		t.Errorf("sandbox record read back: %s", got)
	}
	if got := recs.of("uid-1").container(ctr); !bytes.Equal(got, containerRecord(c)) {
		t.Errorf("container record read back: %s", got)
	}
	if got := recs.of("uid-2").container(ctr); got != nil {
		t.Errorf("another pod's record: %s", got)
	}
	if got := openRecords(filepath.Join(e.base, "none")).of("uid-1").container(ctr); got != nil {
		t.Errorf("a record of a root dir that does not exist: %s", got)
	}
	if _, err := os.Stat(filepath.Join(e.base, "none")); err == nil {
		t.Error("reading made the root dir")
	}

	// What a record's name does not say is no record: torn, another
	// spec's, the same spec under another container's name.
	other := pod.DeepCopy()
	other.Spec.Containers[0].Image = "img:2"
	for what, data := range map[string][]byte{
		"torn":           containerRecord(c)[:20],
		"empty":          {},
		"another spec":   containerRecord(&other.Spec.Containers[0]),
		"another's name": bytes.Replace(containerRecord(c), []byte(`"name":"c"`), []byte(`"name":"d"`), 1),
	} {
		if err := os.WriteFile(cFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := recs.of("uid-1").container(ctr); got != nil {
			t.Errorf("%s record read as %s", what, got)
		}
	}
	if err := os.WriteFile(sbFile, append(sandboxRecord(pod), ' '), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := recs.of("uid-1").sandbox(sb); got != nil {
		t.Errorf("a sandbox record one byte off read as %s", got)
	}

	// Hashes are read from labels: what is not lowercase hex is not a
	// path.
	for _, h := range []string{"", "../../../outside/sentinel", "ABCD", "zz", strings.Repeat("a", 130)} {
		bad := &engine.Sandbox{Hash: h}
		if got := recs.of("uid-1").sandbox(bad); got != nil {
			t.Errorf("sandbox hash %q read %s", h, got)
		}
		if err := writeRecord(e.root, "uid-1", sandboxKey(bad), []byte("{}")); err == nil {
			t.Errorf("sandbox hash %q written", h)
		}
	}
}

// TestSpecRecordBounds: a record larger than maxRecordBytes is not kept,
// nor read; a FIFO or a directory in a record's place is no record and
// blocks nothing.
func TestSpecRecordBounds(t *testing.T) {
	e := newConfineEnv(t)
	pod := confinedPod("uid-1", nil, "")
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", maxRecordBytes)}}
	if err := writeRecord(e.root, "uid-1", podContainerKey(c), containerRecord(c)); !errors.Is(err, errRecordTooLarge) {
		t.Fatalf("a record of %d bytes: %v", len(containerRecord(c)), err)
	}
	dir := filepath.Join(e.root, "pods", "uid-1", "specs", "containers", "c")
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s made for a record not kept", dir)
	}
	// One too large on disk (whatever put it there) is not read, even
	// though it is what its name says.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, ContainerHash(c)+"-"+ResourcesHash(c)+".json")
	if err := os.WriteFile(file, containerRecord(c), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := openRecords(e.root)
	defer recs.Close()
	_, ctr := engineObjects(pod)
	if got := recs.of("uid-1").container(ctr); got != nil {
		t.Errorf("a record of %d bytes read", len(got))
	}

	os.Remove(file)
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() { done <- recs.of("uid-1").container(ctr) }()
	select {
	case got := <-done:
		if got != nil {
			t.Errorf("a FIFO read as %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO in a record's place blocks")
	}
	os.Remove(file)
	if err := os.Mkdir(file, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := recs.of("uid-1").container(ctr); got != nil {
		t.Errorf("a directory read as %s", got)
	}
}

// TestSpecRecordsConfined: a hostile pod uid or container name, or a
// symlink planted anywhere on a record's path, cannot make writing,
// reading, pruning or removing records touch anything outside the root
// dir, nor another pod's records; the checks are the runner's own, not
// the manifest validation's.
func TestSpecRecordsConfined(t *testing.T) {
	hostile := []string{"../../victim", "../../outside", "/abs", "a/b", "..", ".", "", "x\x00y", "../victim",
		"../../../outside/dir"}
	for _, name := range hostile {
		t.Run(fmt.Sprintf("uid %q", name), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod(name, nil, "")
			if sbErr, cErr := keepBoth(e.root, pod); sbErr == nil || cErr == nil {
				t.Errorf("written: %v, %v", sbErr, cErr)
			}
			recs := openRecords(e.root)
			defer recs.Close()
			sb, ctr := engineObjects(pod)
			if recs.of(name).sandbox(sb) != nil || recs.of(name).container(ctr) != nil {
				t.Error("read")
			}
			if err := pruneRecords(e.root, name, nil); err == nil {
				t.Error("pruned")
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
		t.Run(fmt.Sprintf("container %q", name), func(t *testing.T) {
			e := newConfineEnv(t)
			before := snapshot(t, e.base, e.root)
			pod := confinedPod("uid-1", nil, "")
			pod.Spec.Containers[0].Name = name
			if _, cErr := keepBoth(e.root, pod); cErr == nil {
				t.Error("written")
			}
			recs := openRecords(e.root)
			defer recs.Close()
			if _, ctr := engineObjects(pod); recs.of("uid-1").container(ctr) != nil {
				t.Error("read")
			}
			if err := pruneRecords(e.root, "uid-1", map[recordKey]bool{podContainerKey(&pod.Spec.Containers[0]): true}); err != nil {
				t.Error(err)
			}
			sameSnapshot(t, before, snapshot(t, e.base, e.root))
		})
	}

	pod := confinedPod("uid-1", nil, "")
	sbFile := "pods/uid-1/specs/sandbox/" + SandboxHash(pod) + ".json"
	for _, tc := range []struct {
		link, target string
		// refused: writing the records fails (a file's symlink is
		// replaced by the rename, which is no failure).
		refused bool
	}{
		{"pods/uid-1/specs", "outside", true},
		{"pods/uid-1/specs", "../../../outside", true},
		{"pods/uid-1/specs/containers", "outside/dir", true},
		{"pods/uid-1/specs/containers/c", "../../../../../victim", true},
		{"pods/uid-1/specs/sandbox", "outside", true},
		{sbFile, "outside/sentinel", false},
		{sbFile, "../../../../../outside/sentinel", false},
		{"pods/uid-1", "outside", true},
		{"pods", "outside", true},
		// Symlinks that stay in the root dir, to another pod's records.
		{"pods/uid-1/specs", "../uid-2/specs", true},
		{"pods/uid-1/specs/containers/c", "../../../uid-2/specs/containers/c", true},
		{"pods/uid-1", "uid-2", true},
	} {
		t.Run(tc.link+"->"+tc.target, func(t *testing.T) {
			e := newConfineEnv(t)
			// uid-2's records, which nothing of uid-1's may touch.
			pod2 := confinedPod("uid-2", nil, "")
			if sbErr, cErr := keepBoth(e.root, pod2); sbErr != nil || cErr != nil {
				t.Fatal(sbErr, cErr)
			}
			uid2 := filepath.Join(e.root, "pods", "uid-2")
			link := filepath.Join(e.root, tc.link)
			target := tc.target
			if target == "outside" || strings.HasPrefix(target, "outside/") {
				target = filepath.Join(e.base, target) // absolute
			}
			if tc.link == "pods" {
				os.RemoveAll(link)
			}
			os.MkdirAll(filepath.Dir(link), 0o755)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, e.base, e.root)
			var others map[string]string
			if tc.link != "pods" {
				others = snapshot(t, uid2, "")
			}

			sbErr, cErr := keepBoth(e.root, pod)
			if refused := sbErr != nil || cErr != nil; refused != tc.refused {
				t.Errorf("records written: %v, %v; want refused: %v", sbErr, cErr, tc.refused)
			}
			recs := openRecords(e.root)
			sb, ctr := engineObjects(pod)
			for what, got := range map[string][]byte{"sandbox": recs.of("uid-1").sandbox(sb), "container": recs.of("uid-1").container(ctr)} {
				// Only the records themselves can be read, through
				// any path.
				if got != nil && !bytes.Equal(got, sandboxRecord(pod)) && !bytes.Equal(got, containerRecord(&pod.Spec.Containers[0])) {
					t.Errorf("%s record read as %s", what, got)
				}
			}
			recs.Close()
			pruneRecords(e.root, "uid-1", nil)
			rerr := removePodDir(e.root, "uid-1")

			sameSnapshot(t, before, snapshot(t, e.base, e.root))
			if tc.link != "pods" {
				sameSnapshot(t, others, snapshot(t, uid2, ""))
			}
			if rerr == nil {
				if _, err := os.Lstat(filepath.Join(e.root, "pods/uid-1")); err == nil {
					t.Errorf("removePodDir returned nil, but the pod dir is there")
				}
			}
		})
	}
}

// TestPruneSpecRecords: what keep names stays, every other record goes,
// with a temporary file a dead write left and the directories of
// containers with no record left; what is not podrun's to follow (a
// symlink in a container's place) is refused, never followed.
func TestPruneSpecRecords(t *testing.T) {
	e := newConfineEnv(t)
	a := confinedPod("uid-1", nil, "")
	a.Spec.Containers[0].Name = "a"
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "img:2"
	a2.Spec.HostNetwork = true
	b := a.DeepCopy()
	b.Spec.Containers[0].Name = "b"
	for _, p := range []*v1.Pod{a, a2, b} {
		if sbErr, cErr := keepBoth(e.root, p); sbErr != nil || cErr != nil {
			t.Fatal(sbErr, cErr)
		}
	}
	specs := filepath.Join(e.root, "pods", "uid-1", "specs")
	tmp := filepath.Join(specs, "containers", "a", ".x.json.ABC.tmp")
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(specs, "containers", "out")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e.base, e.root)
	err := pruneRecords(e.root, "uid-1", map[recordKey]bool{podSandboxKey(a): true, podContainerKey(&a.Spec.Containers[0]): true})
	if err == nil || !strings.Contains(err.Error(), "out") {
		t.Errorf("prune past a symlink: %v, want it refused", err)
	}
	sameSnapshot(t, before, snapshot(t, e.base, e.root))

	var left []string
	filepath.WalkDir(specs, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(specs, p)
			left = append(left, rel)
		}
		return nil
	})
	c := &a.Spec.Containers[0]
	want := []string{
		"containers/a/" + ContainerHash(c) + "-" + ResourcesHash(c) + ".json",
		"containers/out",
		"sandbox/" + SandboxHash(a) + ".json",
	}
	if strings.Join(left, "\n") != strings.Join(want, "\n") {
		t.Errorf("left:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(specs, "containers", "b")); err == nil {
		t.Error("b's directory kept, with no record in it")
	}
}
