// Command harness runs podrun's benchmarks against the real Docker Engine
// and writes docs/benchmarks.md (bench/run.sh builds what it needs and
// calls it; `make bench`). Each scenario measures podrun and its reference
// side by side in the same run, repeated, and reports medians:
//
//   - bring-up: N pods with `podrun once --wait running` vs bench/bound
//     (the same Engine API calls, in goroutines, nothing else); with
//     --cri-endpoint also on containerd, vs bench/bound -cri-endpoint;
//   - update reaction: under `podrun watch` with 50 pods, one container's
//     command is edited; from the file write to the new container running,
//     vs Docker's own create + start of that container;
//   - steady state: `podrun watch` with 10..100 pods: RSS, CPU and Docker
//     API calls per minute (podrun's own counter, and a counting proxy in
//     front of the engine's socket);
//   - teardown: `podrun down DIR` and `down --all` of N pods vs Docker's
//     parallel force removal of their containers.
//
// With --podrun-before, a second podrun binary (the code before a change)
// is measured in the same run, for before/after figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/client"
	internalapi "k8s.io/cri-api/pkg/apis"

	"github.com/podrun/podrun/bench/benchkit"
)

type config struct {
	podrun, before, bound string
	beforeLabel           string
	runs                  int
	sizes                 []int
	updatePods            int
	updateTrials          int
	steady                time.Duration
	steadySizes           []int
	eventTrials           int
	stuck                 time.Duration
	teardownPods          int
	micro, microBefore    string
	notes                 string
	out, jsonOut          string
	only                  map[string]bool
	command               string
	criEndpoint           string
}

func main() {
	var c config
	var sizes, steadySizes, only string
	flag.StringVar(&c.podrun, "podrun", "bin/podrun-bench", "podrun binary to measure")
	flag.StringVar(&c.before, "podrun-before", "", "a podrun binary of the code before a change, measured in the same run")
	flag.StringVar(&c.beforeLabel, "before-label", "before", "what --podrun-before is (a git ref)")
	flag.StringVar(&c.bound, "bound", "bin/bound", "the bench/bound binary")
	flag.IntVar(&c.runs, "runs", 5, "repetitions of each measurement")
	flag.StringVar(&sizes, "sizes", "1,10,50", "pod counts for bring-up")
	flag.IntVar(&c.updatePods, "update-pods", 50, "pods running under watch in the update benchmark")
	flag.IntVar(&c.updateTrials, "update-trials", 0, "edits in the update benchmark (0: --runs)")
	flag.DurationVar(&c.steady, "steady", 60*time.Second, "how long each steady-state measurement lasts")
	flag.StringVar(&steadySizes, "steady-sizes", "10,100", "pod counts for the steady state")
	flag.IntVar(&c.eventTrials, "event-trials", 3, "containers killed after each steady-state window, to measure an event's cost")
	flag.DurationVar(&c.stuck, "stuck", 30*time.Second, "how long a pod that cannot start is watched")
	flag.IntVar(&c.teardownPods, "teardown-pods", 100, "running pods removed in the teardown benchmark")
	flag.StringVar(&c.micro, "micro", "", "output of go test -bench (micro-benchmarks), to report")
	flag.StringVar(&c.microBefore, "micro-before", "", "the same, of the code before")
	flag.StringVar(&c.notes, "notes", "bench/notes.md", "markdown included in the doc (what changed, and why)")
	flag.StringVar(&c.out, "out", "docs/benchmarks.md", "the doc to write ('' for none)")
	flag.StringVar(&c.jsonOut, "json", "", "also write the results as JSON here")
	flag.StringVar(&only, "only", "bringup,update,steady,stuck,teardown", "scenarios to run")
	flag.StringVar(&c.criEndpoint, "cri-endpoint", "", "a CRI runtime (unix:///...): bring-up is measured on it as well, when it answers")
	flag.StringVar(&c.command, "command", "make bench", "the command line to show in the doc")
	flag.Parse()
	c.sizes = ints(sizes)
	c.steadySizes = ints(steadySizes)
	c.only = map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		c.only[strings.TrimSpace(s)] = true
	}
	if c.updateTrials == 0 {
		c.updateTrials = c.runs
	}
	log.SetFlags(log.Ltime)
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			log.Fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

// subject is one podrun binary under measurement.
type subject struct {
	Label string
	Bin   string
}

// Results is everything one run measured.
type Results struct {
	Started  time.Time
	Finished time.Time
	Machine  Machine
	Config   map[string]string
	Subjects []string
	BringUp  []BringUp
	Update   []Update
	Steady   []Steady
	Stuck    []Stuck
	Teardown []Teardown
	// CRIUpdate and CRIIdle are update reaction and idle cost on
	// containerd (containerd.go).
	CRIUpdate []Update
	CRIIdle   []CRIIdle
	// CRISkipped says why nothing was measured on containerd ("" when it
	// was).
	CRISkipped string
	Micro      []Micro
	Load       []string
	Retried    []string
}

type env struct {
	cfg   config
	cli   *client.Client
	infra string
	tmp   string
	subs  []subject
	// rs is the CRI runtime bring-up is also measured on; nil for none.
	rs internalapi.RuntimeService
	// retried lists the measurements that failed and were made again
	// (dockerd restarted by another test, say).
	retried []string
}

// again runs fn up to three times: a measurement that fails (the machine
// is shared: another engineer's test may restart dockerd under it) is made
// again once the engine answers, and the failure is recorded.
func again[T any](e *env, what string, fn func() (T, error)) (T, error) {
	var v T
	var err error
	for try := 1; try <= 3; try++ {
		if v, err = fn(); err == nil {
			return v, nil
		}
		log.Printf("%s failed (try %d): %v", what, try, err)
		e.retried = append(e.retried, fmt.Sprintf("%s: %s", what, firstLine(err.Error())))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		_, _ = benchkit.WaitFor(ctx, 5*time.Minute, time.Second, "the engine", func() (bool, error) {
			_, perr := e.cli.Ping(ctx)
			return perr == nil, nil
		})
		cancel()
		time.Sleep(5 * time.Second)
		if _, ierr := e.cli.ImageInspect(context.Background(), e.infra); ierr != nil {
			return v, fmt.Errorf("%w (and the infra image is gone: %v)", err, ierr)
		}
	}
	return v, err
}

// connectCRI connects to the CRI runtime at endpoint and checks that it
// answers; else it returns nil and why bring-up on it is skipped.
func connectCRI(ctx context.Context, endpoint string) (internalapi.RuntimeService, string) {
	const setUp = "bash hack/containerd.sh sets up podrun's private containerd"
	if endpoint == "" {
		return nil, "no CRI endpoint given (" + setUp + "; bench/run.sh then measures on it)"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, err := benchkit.CRI(ctx, endpoint)
	if err == nil {
		if _, err = rs.Version(ctx, ""); err != nil {
			rs.Close(ctx)
		}
	}
	if err != nil {
		return nil, fmt.Sprintf("no CRI runtime answers at %s (%s): %s", endpoint, setUp, firstLine(err.Error()))
	}
	return rs, ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func run(c config) error {
	ctx := context.Background()
	cli, err := benchkit.Docker()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("the benchmarks need a running Docker Engine (bash hack/setup.sh): %w", err)
	}
	if _, err := cli.ImageInspect(ctx, benchkit.TestImage); err != nil {
		return fmt.Errorf("the benchmarks need %s (bash hack/setup.sh): %w", benchkit.TestImage, err)
	}
	tmp, err := os.MkdirTemp("", "podrun-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// One infra image for podrun and the bound alike, made from the
	// measured binary (as podrun makes its own on an air-gapped box).
	benchkit.CleanUpOnInterrupt(cli)
	benchkit.OnInterrupt(func() { os.RemoveAll(tmp) })
	infra, removeInfra, err := benchkit.InfraImage(ctx, cli, c.podrun, filepath.Base(tmp))
	if err != nil {
		return err
	}
	defer removeInfra()
	benchkit.OnInterrupt(removeInfra)

	e := &env{cfg: c, cli: cli, infra: infra, tmp: tmp, subs: []subject{{"podrun", c.podrun}}}
	if c.before != "" {
		e.subs = append(e.subs, subject{"podrun before", c.before})
	}
	res := &Results{Started: time.Now().UTC(), Machine: machine(ctx, cli), Config: map[string]string{
		"runs": strconv.Itoa(c.runs), "sizes": fmt.Sprint(c.sizes), "update pods": strconv.Itoa(c.updatePods),
		"update trials": strconv.Itoa(c.updateTrials), "steady": c.steady.String(), "steady sizes": fmt.Sprint(c.steadySizes),
		"event trials": strconv.Itoa(c.eventTrials), "stuck": c.stuck.String(), "teardown pods": strconv.Itoa(c.teardownPods),
		"infra image": infra, "before": c.beforeLabel,
	}}
	for _, s := range e.subs {
		res.Subjects = append(res.Subjects, s.Label)
	}
	res.Load = append(res.Load, "start: "+loadNote())
	log.Printf("benchmarks: %s; infra image %s", res.Machine.String(), infra)

	if c.only["bringup"] || c.only["update"] || c.only["steady"] {
		rs, skipped := connectCRI(ctx, c.criEndpoint)
		if rs != nil {
			defer rs.Close(ctx)
		} else {
			log.Printf("containerd skipped: %s", skipped)
		}
		e.rs, res.CRISkipped = rs, skipped
	}
	if c.only["bringup"] {
		for _, n := range c.sizes {
			b, err := e.bringUp(ctx, n)
			if err != nil {
				return fmt.Errorf("bring-up of %d pods: %w", n, err)
			}
			res.BringUp = append(res.BringUp, b...)
		}
	}
	if c.only["update"] {
		for _, s := range e.subs {
			u, err := again(e, "update reaction ("+s.Label+")", func() (Update, error) { return e.update(ctx, s) })
			if err != nil {
				return fmt.Errorf("update reaction (%s): %w", s.Label, err)
			}
			res.Update = append(res.Update, u)
		}
		for _, s := range e.subs {
			if e.rs == nil {
				break
			}
			u, err := again(e, "update reaction on containerd ("+s.Label+")", func() (Update, error) { return e.criUpdate(ctx, s) })
			if err != nil {
				return fmt.Errorf("update reaction on containerd (%s): %w", s.Label, err)
			}
			res.CRIUpdate = append(res.CRIUpdate, u)
		}
	}
	if c.only["steady"] {
		for _, n := range c.steadySizes {
			for _, s := range e.subs {
				st, err := again(e, fmt.Sprintf("steady state of %d pods (%s)", n, s.Label), func() (Steady, error) { return e.steadyState(ctx, s, n) })
				if err != nil {
					return fmt.Errorf("steady state of %d pods (%s): %w", n, s.Label, err)
				}
				res.Steady = append(res.Steady, st)
			}
		}
		for _, n := range c.steadySizes {
			for _, s := range e.subs {
				if e.rs == nil {
					break
				}
				st, err := again(e, fmt.Sprintf("idle on containerd, %d pods (%s)", n, s.Label), func() (CRIIdle, error) { return e.criIdle(ctx, s, n) })
				if err != nil {
					return fmt.Errorf("idle on containerd, %d pods (%s): %w", n, s.Label, err)
				}
				res.CRIIdle = append(res.CRIIdle, st)
			}
		}
	}
	if c.only["stuck"] {
		for _, kind := range []string{"image absent, pull policy Never", "host port taken"} {
			for _, s := range e.subs {
				st, err := again(e, fmt.Sprintf("stuck pod, %s (%s)", kind, s.Label), func() (Stuck, error) { return e.stuck(ctx, s, kind) })
				if err != nil {
					return fmt.Errorf("stuck pod, %s (%s): %w", kind, s.Label, err)
				}
				res.Stuck = append(res.Stuck, st)
			}
		}
	}
	if c.only["teardown"] {
		t, err := e.teardown(ctx, c.teardownPods)
		if err != nil {
			return fmt.Errorf("teardown of %d pods: %w", c.teardownPods, err)
		}
		res.Teardown = t
	}
	if c.micro != "" {
		m, err := parseMicro(c.micro, "")
		if err != nil {
			return err
		}
		res.Micro = append(res.Micro, m...)
	}
	if c.microBefore != "" {
		m, err := parseMicro(c.microBefore, c.beforeLabel)
		if err != nil {
			return err
		}
		res.Micro = append(res.Micro, m...)
	}
	res.Load = append(res.Load, "end: "+loadNote())
	res.Retried = e.retried
	res.Finished = time.Now().UTC()

	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	doc := render(res, c)
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(doc), 0o644); err != nil {
			return err
		}
		log.Printf("wrote %s", c.out)
	} else {
		fmt.Print(doc)
	}
	return nil
}
