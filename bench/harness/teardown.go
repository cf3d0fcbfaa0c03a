package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/podrun/podrun/bench/benchkit"
)

// Teardown is one way of removing N running pods, every repetition.
type Teardown struct {
	Subject string
	Pods    int
	Seconds []float64
}

// dockerRemoval is the Teardown subject of the reference.
const dockerRemoval = "docker rm -f, parallel"

// teardownRatio is the target: podrun's teardown within 1.3x of Docker's
// parallel removal of the same containers.
const teardownRatio = 1.3

// teardown measures, runs times, `podrun down DIR` and `podrun down --all`
// of n pods of each subject, and Docker's parallel force removal of the
// same pods' containers, each after a bring-up of its own with `podrun
// once` (not timed). The order alternates from run to run.
func (e *env) teardown(ctx context.Context, n int) ([]Teardown, error) {
	var ms []measure
	for _, s := range e.subs {
		ms = append(ms,
			measure{"down DIR (" + s.Label + ")", func() (float64, error) { return e.downTimed(ctx, s, n, false) }},
			measure{"down --all (" + s.Label + ")", func() (float64, error) { return e.downTimed(ctx, s, n, true) }})
	}
	ms = append(ms, measure{dockerRemoval, func() (float64, error) { return e.dockerRemoveTimed(ctx, n) }})
	secs, err := e.alternate(fmt.Sprintf("teardown of %d pods", n), ms)
	if err != nil {
		return nil, err
	}
	out := make([]Teardown, len(ms))
	for i, m := range ms {
		out[i] = Teardown{Subject: m.label, Pods: n, Seconds: secs[i]}
	}
	return out, nil
}

// upForTeardown brings n pods up on a node of its own with subject s's
// `podrun once`, and returns the node, its manifest and root dirs, and
// what removes them all when the measurement is over.
func (e *env) upForTeardown(ctx context.Context, s subject, n int) (*benchkit.Podrun, string, func(), error) {
	node := track(benchkit.NodeName("bench-down"))
	dir, root := e.dirs(node)
	done := func() {
		e.cleanup(node)
		os.RemoveAll(filepath.Dir(dir))
	}
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		done()
		return nil, "", nil, err
	}
	p := &benchkit.Podrun{Bin: s.Bin, Node: node, Root: root, Infra: e.infra}
	res, err := p.Run(ctx, 10*time.Minute, "once", "--wait", "running", "--timeout", "5m", dir)
	if err == nil && res.Code != 0 {
		err = fmt.Errorf("podrun once exited %d:\n%s", res.Code, lastLines(res.Stderr, 20))
	}
	if err == nil {
		err = e.checkRunning(ctx, node, 2*n)
	}
	if err != nil {
		done()
		return nil, "", nil, err
	}
	return p, dir, done, nil
}

// downTimed times `podrun down DIR` (or `down --all`) of n running pods
// (the wall time of the process), and checks that nothing is left.
func (e *env) downTimed(ctx context.Context, s subject, n int, all bool) (float64, error) {
	p, dir, done, err := e.upForTeardown(ctx, s, n)
	if err != nil {
		return 0, err
	}
	defer done()
	args := []string{dir}
	if all {
		args = []string{"--all"}
	}
	res, err := p.Run(ctx, 10*time.Minute, "down", args...)
	if err != nil {
		return 0, err
	}
	if res.Code != 0 {
		return 0, fmt.Errorf("podrun down exited %d:\n%s", res.Code, lastLines(res.Stderr, 20))
	}
	if err := e.checkGone(ctx, p.Node); err != nil {
		return 0, err
	}
	return res.Took.Seconds(), nil
}

// dockerRemoveTimed times the reference: the force removal of n running
// pods' containers (listed first, not timed), one goroutine per container,
// through the Docker client.
func (e *env) dockerRemoveTimed(ctx context.Context, n int) (float64, error) {
	p, _, done, err := e.upForTeardown(ctx, e.subs[0], n)
	if err != nil {
		return 0, err
	}
	defer done()
	cs, err := benchkit.List(ctx, e.cli, p.Node)
	if err != nil {
		return 0, err
	}
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := e.checkGone(ctx, p.Node); err != nil {
		return 0, err
	}
	return took.Seconds(), nil
}

// checkGone fails when any container of node is left.
func (e *env) checkGone(ctx context.Context, node string) error {
	cs, err := benchkit.List(ctx, e.cli, node)
	if err != nil {
		return err
	}
	if len(cs) > 0 {
		return fmt.Errorf("%d containers left", len(cs))
	}
	return nil
}

// renderTeardown writes the Teardown section of the doc.
func renderTeardown(b *strings.Builder, ts []Teardown) {
	if len(ts) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Teardown\n\n")
	p("N running pods (brought up with `podrun once`, not timed), then `podrun down DIR` or `podrun down --all` (the wall time " +
		"of the process: start, manifests, list, every pod stopped and removed with its pod directory, exit), against Docker's own " +
		"parallel removal of the same pods' containers: a force remove (`rm -f`) of each, one goroutine per container, through " +
		"the Docker client (the list before it is not timed). Each measurement brings its pods up anew; all check that no " +
		"container is left.\n\n")
	p("| pods | subject | median (s) | all runs (s) | / docker |\n|---:|---|---:|---|---:|\n")
	ref := map[int]float64{}
	for _, t := range ts {
		if t.Subject == dockerRemoval {
			ref[t.Pods] = median(t.Seconds)
		}
	}
	for _, t := range ts {
		ratio := "—"
		if t.Subject != dockerRemoval && ref[t.Pods] > 0 {
			ratio = fmt.Sprintf("**%.2fx**", median(t.Seconds)/ref[t.Pods])
		}
		p("| %d | %s | %.2f | %s | %s |\n", t.Pods, t.Subject, median(t.Seconds), secs(t.Seconds), ratio)
	}
	p("\n")
	for _, t := range ts {
		if !strings.HasSuffix(t.Subject, "(podrun)") || ref[t.Pods] == 0 {
			continue
		}
		ratio := median(t.Seconds) / ref[t.Pods]
		verdict := "within"
		if ratio > teardownRatio {
			verdict = "**not** within"
		}
		p("**Verdict:** `podrun %s` of %d pods took %.2fx Docker's parallel removal in this run: %s the %.1fx target.\n\n",
			strings.TrimSuffix(t.Subject, " (podrun)"), t.Pods, ratio, verdict, teardownRatio)
	}
}
