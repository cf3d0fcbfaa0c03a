package manifest

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func podNamed(name string) string {
	return strings.Replace(minimalPod, "name: web", "name: "+name, 1)
}

func podNames(s *Snapshot) []string {
	var names []string
	for _, p := range s.Pods {
		names = append(names, p.Name)
	}
	return names
}

func TestReadPathDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.yaml"), podNamed("b"), 0o644)
	writeFile(t, filepath.Join(dir, "a.yml"), podNamed("a"), 0o600) // kubeadm writes 0600
	writeFile(t, filepath.Join(dir, "c.json"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c"},"spec":{"containers":[{"name":"x","image":"y"}]}}`, 0o644)
	// Everything else an editor or a person leaves around is ignored.
	for _, name := range []string{".hidden.yaml", ".b.yaml.swp", "b.yaml.swp", "4913", "b.yaml~", "b.yaml.bak", "README.md", "x.yaml.orig"} {
		writeFile(t, filepath.Join(dir, name), "this: [is not valid", 0o644)
	}
	// Not recursive.
	writeFile(t, filepath.Join(dir, "sub", "d.yaml"), podNamed("d"), 0o644)

	var logs bytes.Buffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	snap, err := ReadPath(dir, opts)
	if err != nil {
		t.Fatalf("ReadPath: %v", err)
	}
	if got := strings.Join(podNames(snap), ","); got != "a-node1,b-node1,c-node1" {
		t.Errorf("pods = %s, want a, b, c in file name order", got)
	}
	if snap.Source != dir {
		t.Errorf("Source = %q, want %q", snap.Source, dir)
	}
	abs, _ := filepath.Abs(filepath.Join(dir, "a.yml"))
	if got := snap.Pods[0].Annotations[AnnotationSource]; got != abs {
		t.Errorf("pod source = %q, want the file's absolute path %q", got, abs)
	}
	if got := snap.Origin(snap.Pods[1]); got != filepath.Join(dir, "b.yaml")+":4" {
		t.Errorf("Origin = %q", got)
	}
	for _, name := range []string{".hidden.yaml", "4913", "b.yaml~", "b.yaml.bak", "sub"} {
		if n := strings.Count(logs.String(), filepath.Join(dir, name)+" "); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", name, n, logs.String())
		}
	}
}

// TestReadPathOddEntriesAreErrors: an entry with a manifest's name that is
// not a readable regular file is an error naming it, not something
// skipped (skipping it would remove the pods of a manifest replaced by
// it). A FIFO is not opened: that would block forever.
func TestReadPathOddEntriesAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"directory", func(p string) error { return os.MkdirAll(filepath.Join(p, "e"), 0o755) }, "is a directory"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"symlink loop", func(p string) error { return os.Symlink(filepath.Base(p), p) }, "too many levels of symbolic links"},
		// Regular files of size 0 whose reads are the kernel's (reading
		// /proc/kmsg would consume the kernel's log).
		{"procfs file", func(p string) error { return os.Symlink("/proc/self/status", p) }, "a file of procfs"},
		{"sysfs file", func(p string) error { return os.Symlink("/sys/devices/system/cpu/online", p) }, "a file of sysfs"},
		// A device node is judged without an open (which would run its
		// driver's: /dev/watchdog would arm). Major 250 (local use) has no
		// driver here: an open fails with ENXIO, which the message would show.
		{"device", func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o644, 250<<8) }, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.yaml"), podNamed("a"), 0o644)
			odd := filepath.Join(dir, "x.yaml")
			if err := tc.make(odd); err != nil {
				t.Skipf("cannot make it here: %v", err)
			}
			done := make(chan struct{})
			var err error
			go func() {
				defer close(done)
				_, err = ReadPath(dir, testOptions())
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadPath blocked")
			}
			if err == nil || !strings.Contains(err.Error(), odd) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadPath = %v, want an error naming %s: %s", err, odd, tc.want)
			}
		})
	}
}

// TestReadManifestFileSwappedForAFIFO: a manifest that flips between a
// regular file and a FIFO (a symlink to each, renamed over it) while it is
// read never blocks the reader: a look before the open would not do, as
// the file can change in between.
func TestReadManifestFileSwappedForAFIFO(t *testing.T) {
	dir := t.TempDir()
	good, fifo, target := filepath.Join(dir, "good"), filepath.Join(dir, "fifo"), filepath.Join(dir, "x.yaml")
	writeFile(t, good, podNamed("a"), 0o644)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		tmp := filepath.Join(dir, ".tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			dst := good
			if i%2 == 1 {
				dst = fifo
			}
			os.Remove(tmp)
			if err := os.Symlink(dst, tmp); err == nil {
				os.Rename(tmp, target)
			}
		}
	}()
	defer func() { close(stop); <-flipped }()
	done := make(chan int)
	go func() {
		n := 0
		for ; n < 20000; n++ {
			readManifestFile(target)
		}
		done <- n
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Opening the FIFO blocks until a writer comes: be that writer,
		// so that the reader's goroutine ends, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("readManifestFile blocked on a FIFO")
	}
}

func TestReadPathUIDIsPerFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), podNamed("web"), 0o644)
	fromDir, err := ReadPath(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadPath(filepath.Join(dir, "web.yaml"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if fromDir.Pods[0].UID != fromFile.Pods[0].UID {
		t.Errorf("the same file read through its directory or by name must give the same UID")
	}
}

func TestReadPathFileNamedExplicitly(t *testing.T) {
	// A file given by name is read whatever its name, as the kubelet does.
	path := filepath.Join(t.TempDir(), "web.manifest")
	writeFile(t, path, podNamed("web"), 0o600)
	snap, err := ReadPath(path, testOptions())
	if err != nil || len(snap.Pods) != 1 {
		t.Fatalf("ReadPath = %v, %v", snap, err)
	}
}

func TestReadPathTooLarge(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	writeFile(t, big, "# "+strings.Repeat("x", MaxFileSize)+"\n", 0o644)
	writeFile(t, filepath.Join(dir, "ok.yaml"), podNamed("ok"), 0o644)
	snap, err := ReadPath(dir, testOptions())
	if !IsInvalid(err) {
		t.Fatalf("err = %v, want an invalid-manifest error", err)
	}
	var list ErrorList
	errors.As(err, &list)
	if len(list) != 1 || list[0].Source != big || !strings.Contains(list[0].Message, "over the 10 MiB limit") {
		t.Errorf("errors = %v", list)
	}
	if len(snap.Pods) != 1 {
		t.Errorf("the other file's pods must still be reported")
	}
}

func TestReadPathCollectsErrorsOfAllFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: x\n    imag: y\n", 0o644)
	writeFile(t, filepath.Join(dir, "b.yaml"), "kind: [\n", 0o644)
	writeFile(t, filepath.Join(dir, "c.yaml"), podNamed("c"), 0o644)
	writeFile(t, filepath.Join(dir, "d.yaml"), podNamed("c"), 0o644)
	snap, err := ReadPath(dir, testOptions())
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		filepath.Join(dir, "a.yaml") + ":8: spec.containers[0].imag: unknown field",
		filepath.Join(dir, "b.yaml") + ":1: invalid YAML",
		filepath.Join(dir, "d.yaml") + ":4: metadata.name: pod default/c conflicts with the pod defined at " + filepath.Join(dir, "c.yaml") + ":4",
	}
	if len(list) != len(want) {
		t.Fatalf("errors:\n%v\nwant %d", list, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(list[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, list[i].Error(), w)
		}
	}
	if got := strings.Join(podNames(snap), ","); got != "c-node1" {
		t.Errorf("pods = %s", got)
	}
}

func TestReadPathMissing(t *testing.T) {
	_, err := ReadPath(filepath.Join(t.TempDir(), "nope"), testOptions())
	if !errors.Is(err, fs.ErrNotExist) || IsInvalid(err) {
		t.Errorf("err = %v, want a not-exist error that is not IsInvalid", err)
	}
}

func TestReadPathUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	// A file whose read fails whoever reads it (root ignores modes):
	// /proc/self/mem is a regular file whose offset 0 is never mapped, so
	// read(2) returns EIO.
	if err := os.Symlink("/proc/self/mem", filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPath(dir, testOptions())
	if err == nil || IsInvalid(err) {
		t.Errorf("err = %v, want an I/O error", err)
	}
}

func TestMergeKeepsTheFirst(t *testing.T) {
	a := mustParse(t, "a.yaml", podNamed("web"))
	b := mustParse(t, "b.yaml", podNamed("web")+"---\n"+podNamed("other"))
	merged, err := Merge("dir", a, b)
	if !IsInvalid(err) || !strings.Contains(err.Error(), "b.yaml:4: metadata.name: pod default/web conflicts with the pod defined at a.yaml:4") {
		t.Errorf("err = %v", err)
	}
	if got := strings.Join(podNames(merged), ","); got != "web-node1,other-node1" {
		t.Errorf("pods = %s", got)
	}
	if merged.Pods[0] != a.Pods[0] {
		t.Errorf("the first definition must win")
	}
}

// TestFileReaderParsesOnlyChangedBytes: a FileReader returns the snapshot
// of an earlier good read while a file's bytes are the same, parses them
// again once they change, and forgets what Keep leaves out.
func TestFileReaderParsesOnlyChangedBytes(t *testing.T) {
	path, r, read := readerOfOnePod(t)

	first := read()
	if again := read(); again != first {
		t.Errorf("the same bytes were parsed again")
	}
	want, err := ReadFile(path, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if first.Pods[0].UID != want.Pods[0].UID || contentHash(first) != contentHash(want) {
		t.Errorf("the reader's snapshot differs from ReadFile's")
	}

	writeFile(t, path, podNamed("api"), 0o600)
	edited := read()
	if edited == first || len(edited.Pods) != 1 || !strings.HasPrefix(edited.Pods[0].Name, "api") {
		t.Fatalf("an edit was not read: %v", podNames(edited))
	}

	// A broken edit is an error each time; back to the good bytes, their
	// read is the one kept.
	writeFile(t, path, "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, ima", 0o600)
	for range 2 {
		if _, err := r.Read(path); err == nil {
			t.Fatal("a broken manifest read without an error")
		}
	}
	writeFile(t, path, podNamed("api"), 0o600)
	if back := read(); back != edited {
		t.Errorf("the good bytes were parsed again after a broken edit")
	}

	r.Keep(nil)
	if after := read(); after == edited {
		t.Errorf("a file Keep left out kept its read")
	}
}

// readerOfOnePod writes a manifest of one pod, web, and returns its path,
// a FileReader, and a function that reads the file with it.
func readerOfOnePod(t *testing.T) (string, *FileReader, func() *Snapshot) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web.yaml")
	writeFile(t, path, podNamed("web"), 0o600)
	r, err := NewFileReader(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	return path, r, func() *Snapshot {
		t.Helper()
		snap, err := r.Read(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		return snap
	}
}

// contentHash is what tells two snapshots' pods apart: their config
// hashes, in order.
func contentHash(s *Snapshot) string {
	var hashes []string
	for _, p := range s.Pods {
		hashes = append(hashes, p.Annotations[AnnotationConfigHash])
	}
	return strings.Join(hashes, ",")
}

// TestFileReaderSkipsSettledFiles: a file read well after its last change
// is not read again while its stat is the same; any write to it, even one
// of the same size that sets the mtime back, or a file renamed over it, is
// read. A file read just after a change is read again next time: a second
// write within the same timestamp tick would not show in its stat.
func TestFileReaderSkipsSettledFiles(t *testing.T) {
	path, r, read := readerOfOnePod(t)
	dir := filepath.Dir(path)
	ctime := func() time.Time {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := stampOf(info)
		return time.Unix(0, st.ctime)
	}
	// The reader's clock starts at the file's last change, whatever time
	// the machine took to get here.
	now := ctime()
	r.opts.Now = func() time.Time { return now }
	reads := func(what string, want int, do func()) {
		t.Helper()
		before := r.reads
		do()
		if got := r.reads - before; got != want {
			t.Errorf("%s: the file was read %d times, want %d", what, got, want)
		}
	}
	// Where the kernel does not keep the stat itself, every read reads.
	settledReads := 0
	if !onLocalFilesystem(path) {
		settledReads = 2
	}

	var first *Snapshot
	reads("a file just written", 2, func() { first = read(); read() })
	now = now.Add(time.Minute) // the write is long past
	reads("the first read after the change settled", 1, func() { read() })
	reads("a settled file", settledReads, func() { read(); read() })

	// The same size, the mtime set back: the ctime tells. Where the
	// kernel's timestamps are per tick, write until the ctime moved, as
	// a real edit would be seconds later.
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	before := ctime()
	edited := strings.Replace(podNamed("web"), "web", "wex", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		writeFile(t, path, edited, 0o600)
		if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
			t.Fatal(err)
		}
		if !ctime().Equal(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file's ctime did not change in 10 s of writes")
		}
		time.Sleep(time.Millisecond)
	}
	var snap *Snapshot
	reads("a rewrite of the same size with its mtime set back", 1, func() { snap = read() })
	if snap == first || !strings.HasPrefix(snap.Pods[0].Name, "wex") {
		t.Fatalf("the rewrite was not parsed: %v", podNames(snap))
	}

	// A file renamed over it: another inode.
	now = now.Add(time.Minute)
	read()
	tmp := filepath.Join(dir, ".web.yaml.tmp")
	writeFile(t, tmp, podNamed("api"), 0o600)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if snap := read(); !strings.HasPrefix(snap.Pods[0].Name, "api") {
		t.Fatalf("the file renamed over it was not read: %v", podNames(snap))
	}
}
