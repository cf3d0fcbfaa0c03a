package cri

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

// TestPlanRotation: before a rotation, the oldest rotated files go so that
// maxFiles remain after it (the current log and the one it makes
// included), the others are gzipped, and what a compression cut short
// left is removed.
func TestPlanRotation(t *testing.T) {
	const l = "web_0.log."
	for _, tc := range []struct {
		name             string
		rotated          []string
		maxFiles         int
		remove, compress []string
	}{
		{name: "first rotation", maxFiles: 5},
		{name: "one to compress", rotated: []string{l + "20260102-030405"}, maxFiles: 5,
			compress: []string{l + "20260102-030405"}},
		{name: "at the limit", maxFiles: 4,
			rotated:  []string{l + "20260102-030407", l + "20260102-030405.gz", l + "20260102-030406.gz"},
			remove:   []string{l + "20260102-030405.gz"},
			compress: []string{l + "20260102-030407"}},
		{name: "two files keep none rotated", maxFiles: 2,
			rotated: []string{l + "20260102-030406", l + "20260102-030405.gz"},
			remove:  []string{l + "20260102-030405.gz", l + "20260102-030406"}},
		{name: "a compression cut short", maxFiles: 5,
			rotated: []string{l + "20260102-030405", l + "20260102-030405.gz", l + "20260102-030406.tmp", l + "20260102-030406"},
			remove:  []string{l + "20260102-030405", l + "20260102-030406.tmp"},
			// The finished .gz stays; the source of the cut one is
			// compressed again.
			compress: []string{l + "20260102-030406"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, compress := planRotation(tc.rotated, tc.maxFiles)
			if !slices.Equal(remove, tc.remove) || !slices.Equal(compress, tc.compress) {
				t.Errorf("remove %q, compress %q; want %q, %q", remove, compress, tc.remove, tc.compress)
			}
		})
	}
}

// TestRotatedNames: a rotated file is <log>.<time>, with .gz or .tmp;
// another container's log is never one, however it is named.
func TestRotatedNames(t *testing.T) {
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(rotatedTimeFormat)
	if stamp != "20260102-030405" {
		t.Fatalf("stamp %q, want the kubelet's 20260102-030405", stamp)
	}
	for _, name := range []string{"web_0.log.20260102-030405", "web_0.log.20260102-030405.gz", "web_0.log.20260102-030405.tmp"} {
		if !isRotated("web_0.log", name) {
			t.Errorf("isRotated(%q) = false", name)
		}
	}
	for _, name := range []string{"web_0.log", "web_0.log.", "web_0.log.x_0.log", "web_0.log.20260102-030405.gz.gz",
		"web_1.log.20260102-030405", "web_0.log.2026010-030405", "xweb_0.log.20260102-030405"} {
		if isRotated("web_0.log", name) {
			t.Errorf("isRotated(%q) = true", name)
		}
	}
}

// TestRotatedLogFilesConfined: the rotated files of a container's log are
// removed and compressed under its sandbox's log directory only: never
// through a link (a directory or a file), never another file.
func TestRotatedLogFilesConfined(t *testing.T) {
	base := t.TempDir()
	logDir, outside := filepath.Join(base, "logs"), filepath.Join(base, "outside")
	pod := filepath.Join(logDir, "pod_0")
	for _, d := range []string{pod, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "web_0.log.20260102-030404"), "outside")
	write(filepath.Join(pod, "web_0.log"), "current")
	write(filepath.Join(pod, "web_0.log.20260102-030405"), "old")
	write(filepath.Join(pod, "web_0.log.20260102-030406.gz"), "older")
	write(filepath.Join(pod, "web_0.log.x_0.log"), "another container's")
	if err := os.Symlink(filepath.Join(outside, "web_0.log.20260102-030404"), filepath.Join(pod, "web_0.log.20260102-030404")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(logDir, "link_0")); err != nil {
		t.Fatal(err)
	}
	r := &Runtime{logDir: logDir}

	dir, name, err := r.openLogDir(filepath.Join(pod, "web_0.log"))
	if err != nil || dir == nil || name != "web_0.log" {
		t.Fatalf("openLogDir: %v, %q, %v", dir, name, err)
	}
	rotated, err := rotatedLogs(dir, name)
	if err != nil || !slices.Equal(rotated, []string{"web_0.log.20260102-030405", "web_0.log.20260102-030406.gz"}) {
		t.Errorf("rotated logs %q, %v: want the two regular files", rotated, err)
	}
	if err := compressLog(dir, "web_0.log.20260102-030404"); err == nil {
		t.Error("compressed through a link")
	}
	if err := compressLog(dir, "web_0.log.20260102-030405"); err != nil {
		t.Fatal(err)
	}
	dir.Close()
	if got := gunzipFile(t, filepath.Join(pod, "web_0.log.20260102-030405.gz")); got != "old" {
		t.Errorf("compressed %q, want old", got)
	}
	if _, err := os.Stat(filepath.Join(pod, "web_0.log.20260102-030405")); !os.IsNotExist(err) {
		t.Errorf("the compressed log's source: %v, want gone", err)
	}

	if dir, _, err := r.openLogDir(filepath.Join(logDir, "link_0", "web_0.log")); dir != nil || err == nil {
		t.Errorf("openLogDir through a linked directory: %v, %v", dir, err)
	}
	for _, p := range []string{filepath.Join(logDir, "link_0", "web_0.log"), filepath.Join(outside, "web_0.log"), filepath.Join(pod, "web_0.log")} {
		if err := r.removeRotatedLogs("id", p); err != nil {
			t.Logf("remove rotated logs of %s: %v", p, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(pod, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if want := []string{"web_0.log", "web_0.log.20260102-030404", "web_0.log.x_0.log"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q (the current log, the link, another container's)", left, want)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "web_0.log.20260102-030404")); err != nil || string(b) != "outside" {
		t.Errorf("the file outside: %q, %v", b, err)
	}
}

func gunzipFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// TestRotateLogs, against containerd: a container that writes more than
// maxSize has its log rotated by each pass (the runtime reopens it: new
// output lands in a fresh file), at most maxFiles files stay, all but the
// newest rotated one gzipped; `logs` reads the current file, a followed
// read goes on across rotations, and removing the container removes every
// file.
func TestRotateLogs(t *testing.T) {
	r := newRuntime(t, "rt-rotate-"+randHex(6))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := testingclock.NewFakePassiveClock(t0)
	r.clock = clk
	stamp := func(n int) string {
		return "spam_0.log." + t0.Add(time.Duration(n)*time.Second).Format(rotatedTimeFormat)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: randHex(16), Name: "rotate", Namespace: "default"}, Hash: "h"}
	sbID, err := r.RunSandbox(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.RemoveSandbox(context.Background(), sbID) })
	// Each /tmp/go the test makes is one burst of about 200 KiB, ending
	// with the line burst-N.
	script := `trap 'exit 0' TERM; n=0; while :; do if [ -e /tmp/go ]; then rm /tmp/go; n=$((n+1));
		yes 0123456789abcdef | head -n 4000; echo burst-$n; fi; sleep 0.05; done`
	id, err := r.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "spam", Image: testImage, Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	const maxSize, maxFiles = 64 << 10, 3
	dir := r.sandboxLogDir(sb.Pod.UID, 0)
	current := filepath.Join(dir, "spam_0.log")
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	burst := func(n int) {
		t.Helper()
		if code, out, err := r.Exec(ctx, id, []string{"touch", "/tmp/go"}); err != nil || code != 0 {
			t.Fatalf("exec touch: %d %s %v", code, out, err)
		}
		waitUntil(ctx, t, fmt.Sprintf("burst-%d in the current log", n), func() bool {
			return strings.Contains(read(current), fmt.Sprintf(" burst-%d\n", n))
		})
	}
	files := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "spam_0.log") {
				names = append(names, e.Name())
			}
		}
		return names
	}

	// Below maxSize, nothing is rotated.
	if err := r.RotateLogs(ctx, maxSize, maxFiles); err != nil {
		t.Fatal(err)
	}
	if got := files(); !slices.Equal(got, []string{"spam_0.log"}) {
		t.Fatalf("files %q before any output, want the current log only", got)
	}

	var followed syncBuffer
	followCtx, stopFollow := context.WithCancel(ctx)
	followDone := make(chan error, 1)
	go func() {
		followDone <- r.ContainerLogs(followCtx, id, engine.LogOptions{Follow: true, Tail: -1}, &followed, nil)
	}()

	for n := 1; n <= 4; n++ {
		burst(n)
		clk.SetTime(t0.Add(time.Duration(n) * time.Second))
		if err := r.RotateLogs(ctx, maxSize, maxFiles); err != nil {
			t.Fatalf("rotation %d: %v", n, err)
		}
		if strings.Contains(read(current), fmt.Sprintf(" burst-%d\n", n)) {
			t.Fatalf("rotation %d: the current log still holds burst-%d: not reopened", n, n)
		}
		if rotated := read(filepath.Join(dir, stamp(n))); !strings.Contains(rotated, fmt.Sprintf(" burst-%d\n", n)) {
			t.Fatalf("rotation %d: the newest rotated log does not hold burst-%d", n, n)
		}
		waitUntil(ctx, t, fmt.Sprintf("burst-%d in the followed read", n), func() bool {
			return strings.Contains(followed.String(), fmt.Sprintf("burst-%d\n", n))
		})
	}
	// After four rotations, maxFiles files: the current log, the newest
	// rotated one as it was, and one older gzipped.
	if got, want := files(), []string{"spam_0.log", stamp(3) + ".gz", stamp(4)}; !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}
	if older := gunzipFile(t, filepath.Join(dir, stamp(3)+".gz")); !strings.Contains(older, " burst-3\n") {
		t.Errorf("the gzipped log does not hold burst-3")
	}

	// New output lands in the fresh file; `logs` reads it, and the
	// followed read, started four rotations ago, gets it too.
	burst(5)
	var tail bytes.Buffer
	if err := r.ContainerLogs(ctx, id, engine.LogOptions{Tail: 1}, &tail, nil); err != nil || tail.String() != "burst-5\n" {
		t.Errorf("logs --tail 1: %q, %v; want burst-5", tail.String(), err)
	}
	waitUntil(ctx, t, "burst-5 in the followed read", func() bool { return strings.Contains(followed.String(), "burst-5\n") })
	stopFollow()
	<-followDone

	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := files(); len(got) != 0 {
		t.Errorf("after RemoveContainer, files %q: want none", got)
	}
}

// waitUntil waits until ok holds, or fails the test when ctx ends first.
func waitUntil(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// syncBuffer is a bytes.Buffer one goroutine writes while another reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
