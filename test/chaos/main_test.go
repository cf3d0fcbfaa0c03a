//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/podrun/podrun/bench/benchkit"
)

var (
	podrunBin string
	infra     string
	docker    *client.Client
	full      = os.Getenv("CHAOS_FULL") == "1"
)

// count is n in the full form, short in the short one; CHAOS_<NAME>
// overrides both.
func count(name string, n, short int) int {
	if v, err := strconv.Atoi(os.Getenv("CHAOS_" + name)); err == nil {
		return v
	}
	if full {
		return n
	}
	return short
}

// duration is count for durations (CHAOS_<NAME>=90s).
func duration(name string, d, short time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv("CHAOS_" + name)); err == nil {
		return v
	}
	if full {
		return d
	}
	return short
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "podrun-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	podrunBin = os.Getenv("CHAOS_PODRUN")
	if podrunBin == "" {
		podrunBin = filepath.Join(dir, "podrun")
		if err := benchkit.BuildPodrun("../..", podrunBin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	docker, err = benchkit.Docker()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := docker.Ping(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "the chaos suite needs a running Docker Engine; run hack/setup.sh:", err)
		return 1
	}
	if _, err := docker.ImageInspect(ctx, benchkit.TestImage); err != nil {
		fmt.Fprintf(os.Stderr, "the chaos suite needs the image %s; run hack/setup.sh: %v\n", benchkit.TestImage, err)
		return 1
	}
	benchkit.CleanUpOnInterrupt(docker)
	benchkit.OnInterrupt(func() { os.RemoveAll(dir) })
	ref, remove, err := benchkit.InfraImage(ctx, docker, podrunBin, "chaos-"+filepath.Base(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	benchkit.OnInterrupt(remove)
	infra = ref
	code := m.Run()
	remove()
	form := "short"
	if full {
		form = "full"
	}
	fmt.Printf("\nchaos summary (%s form, %s):\n", form, time.Since(start).Round(time.Second))
	for _, line := range summaries() {
		fmt.Println(line)
	}
	return code
}

// summary counts one scenario's trials.
type summary struct {
	name                 string
	trials, held, failed int
	skipped              string
	notes                []string
	start                time.Time
	took                 time.Duration
	mu                   sync.Mutex
	t                    *testing.T
}

var (
	sumMu sync.Mutex
	sums  []*summary
)

func newSummary(t *testing.T, name string) *summary {
	s := &summary{name: name, start: time.Now(), t: t}
	sumMu.Lock()
	sums = append(sums, s)
	sumMu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		s.took = time.Since(s.start)
		s.mu.Unlock()
	})
	return s
}

// trial records one trial: held when err is nil (else the test fails).
func (s *summary) trial(err error) {
	s.t.Helper()
	s.mu.Lock()
	s.trials++
	if err == nil {
		s.held++
	} else {
		s.failed++
	}
	n := s.trials
	s.mu.Unlock()
	if err != nil {
		s.t.Errorf("%s trial %d: %v", s.name, n, err)
	}
}

// note adds a figure to the summary line.
func (s *summary) note(format string, args ...any) {
	s.mu.Lock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *summary) skip(why string) {
	s.mu.Lock()
	s.skipped = why
	s.mu.Unlock()
	s.t.Skip(why)
}

func summaries() []string {
	sumMu.Lock()
	defer sumMu.Unlock()
	var out []string
	for _, s := range sums {
		s.mu.Lock()
		line := fmt.Sprintf("chaos: %-22s trials=%-3d held=%-3d failed=%-3d took=%s", s.name, s.trials, s.held, s.failed, s.took.Round(time.Second))
		if s.skipped != "" {
			line += " SKIPPED: " + s.skipped
		}
		if len(s.notes) > 0 {
			line += " | " + strings.Join(s.notes, "; ")
		}
		s.mu.Unlock()
		out = append(out, line)
	}
	return out
}

// node is one scenario's podrun world: its own node name, manifest and
// root directories, everything removed at the end, on Docker (newNode) or
// on a CRI runtime (newCRINode).
type node struct {
	t    *testing.T
	name string
	dir  string // manifests
	root string
	p    *benchkit.Podrun
	view view
}

func newNode(t *testing.T, prefix string) *node {
	t.Helper()
	n := &node{t: t, name: benchkit.NodeName(prefix), dir: t.TempDir(), root: t.TempDir(), view: dockerView{}}
	n.p = &benchkit.Podrun{Bin: podrunBin, Node: n.name, Root: n.root, Infra: infra}
	n.cleanupAtEnd()
	return n
}

// newCRINode is a node whose podrun runs its pods on the CRI runtime at
// criEndpoint (its sandbox image is the runtime's own).
func newCRINode(t *testing.T, prefix string) *node {
	t.Helper()
	n := &node{t: t, name: benchkit.NodeName(prefix), dir: t.TempDir(), root: t.TempDir(), view: criView{criRuntime(t)}}
	n.p = &benchkit.Podrun{Bin: podrunBin, Node: n.name, Root: n.root, Endpoint: criEndpoint()}
	n.cleanupAtEnd()
	return n
}

func (n *node) cleanupAtEnd() {
	untrack := benchkit.TrackNode(n.name)
	n.t.Cleanup(func() {
		defer untrack()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := n.view.cleanup(ctx, n.name); err != nil {
			n.t.Errorf("cleanup: %v", err)
		}
	})
}

// writePods writes count pods named <prefix>-NNN.
func (n *node) writePods(prefix string, count int) {
	n.t.Helper()
	if err := benchkit.WritePods(n.dir, prefix, count); err != nil {
		n.t.Fatal(err)
	}
}

// state describes the node's sandboxes and containers: running ones by
// key, duplicates, and objects not running.
type state struct {
	running  map[string]string // key -> ID
	dups     []string
	leftover []string
	// cutShort are exited containers whose start a kill cut short
	// (object.startCutShort), each of a container that runs again.
	cutShort []string
}

func (n *node) state(ctx context.Context) (state, error) {
	objs, err := n.view.objects(ctx, n.name)
	if err != nil {
		return state{}, err
	}
	st := state{running: map[string]string{}}
	for _, o := range objs {
		if o.startCutShort {
			st.cutShort = append(st.cutShort, o.key)
			continue
		}
		if !o.running {
			st.leftover = append(st.leftover, fmt.Sprintf("%s %.12s (%s)", o.key, o.id, o.state))
			continue
		}
		if prev, ok := st.running[o.key]; ok {
			st.dups = append(st.dups, fmt.Sprintf("%s runs twice: %.12s and %.12s", o.key, prev, o.id))
		}
		st.running[o.key] = o.id
	}
	sort.Strings(st.leftover)
	return st, nil
}

// converged checks that exactly want containers run, no two with one
// identity, and (when strict) that nothing else is there.
func (st state) check(want int, strict bool) error {
	switch {
	case len(st.dups) > 0:
		return fmt.Errorf("duplicates: %v", st.dups)
	case len(st.running) != want:
		return fmt.Errorf("%d containers run, want %d", len(st.running), want)
	case strict && len(st.leftover) > 0:
		return fmt.Errorf("leftover containers: %v", st.leftover)
	}
	for _, k := range st.cutShort {
		if st.running[k] == "" {
			return fmt.Errorf("%s: its start was cut short by the kill, and it does not run again", k)
		}
	}
	return nil
}

// waitConverged polls until check passes or timeout; it returns how long
// it took.
func (n *node) waitConverged(ctx context.Context, want int, strict bool, timeout time.Duration) (time.Duration, error) {
	var last error
	took, err := benchkit.WaitFor(ctx, timeout, 100*time.Millisecond, "convergence", func() (bool, error) {
		st, err := n.state(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		last = st.check(want, strict)
		return last == nil, nil
	})
	if err != nil {
		return took, fmt.Errorf("%w: %v", err, last)
	}
	return took, nil
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
