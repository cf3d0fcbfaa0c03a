//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/podrun/podrun/bench/benchkit"
)

// TestCrashLoop: a container that exits at once, for CHAOS_CRASHLOOP (3 min;
// short form 50 s): podrun restarts it on the kubelet's back-off schedule
// (at once, then 10, 20, 40, 80, 160 s after each exit), and its CPU stays
// flat meanwhile.
func TestCrashLoop(t *testing.T) {
	sum := newSummary(t, "crash-loop")
	d := duration("CRASHLOOP", 3*time.Minute, 50*time.Second)
	n := newNode(t, "chaos-crash")
	pod := benchkit.Pod{Name: "crash", Command: []string{"sh", "-c", "exit 1"}}
	if err := benchkit.WriteFile(n.dir+"/crash.yaml", pod.YAML()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()

	// Docker's own record of every start and exit of the pod's container.
	msgs, errs := docker.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", benchkit.LabelNode+"="+n.name),
		filters.Arg("label", "io.podrun.container.name=app"),
		filters.Arg("event", "start"), filters.Arg("event", "die"))})
	type run struct{ start, die time.Time }
	var runs []run
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case m := <-msgs:
				at := time.Unix(0, m.TimeNano)
				switch m.Action {
				case events.ActionStart:
					runs = append(runs, run{start: at})
				case events.ActionDie:
					if len(runs) > 0 {
						runs[len(runs)-1].die = at
					}
				}
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()

	pr, err := n.p.Start("watch", "--path", n.dir, "--healthz-port", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	began := time.Now()
	// CPU, in windows of 10 s.
	var cpu []float64
	prev, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		t.Fatal(err)
	}
	prevAt := time.Now()
	for time.Since(began) < d {
		time.Sleep(min(10*time.Second, d-time.Since(began)+time.Millisecond))
		if pr.Exited() {
			t.Fatalf("podrun watch exited:\n%s", pr.Stderr(4000))
		}
		ps, err := benchkit.ReadProc(pr.Pid())
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		cpu = append(cpu, 100*(ps.CPU-prev.CPU).Seconds()/now.Sub(prevAt).Seconds())
		prev, prevAt = ps, now
	}
	cancel()
	<-collected

	// The schedule: the first restart at once, then 10 s doubling.
	var gaps []string
	var schedErr []string
	for i := 1; i < len(runs); i++ {
		if runs[i-1].die.IsZero() {
			continue
		}
		gap := runs[i].start.Sub(runs[i-1].die)
		want := time.Duration(0)
		if i > 1 {
			want = 10 * time.Second << (i - 2)
		}
		gaps = append(gaps, fmt.Sprintf("%.1fs (want %s)", gap.Seconds(), want))
		if gap < want-500*time.Millisecond || gap > want+3*time.Second {
			schedErr = append(schedErr, fmt.Sprintf("restart %d came %s after the exit, want %s", i, gap.Round(100*time.Millisecond), want))
		}
	}
	// Starts expected within d: at once, then exits + 10, 20, 40, 80, ...
	wantStarts := 2
	for elapsed, step := time.Duration(0), 10*time.Second; elapsed+step < d-5*time.Second; step *= 2 {
		elapsed += step
		wantStarts++
	}
	if len(runs) < wantStarts || len(runs) > wantStarts+1 {
		schedErr = append(schedErr, fmt.Sprintf("%d starts in %s, want %d", len(runs), d, wantStarts))
	}
	var err1 error
	if len(schedErr) > 0 {
		err1 = fmt.Errorf("back-off schedule: %s", strings.Join(schedErr, "; "))
	}
	sum.trial(err1)

	// Flat CPU: no window above 5% of a core, and the last windows no
	// busier than the first ones (beyond 1 point).
	var err2 error
	sorted := append([]float64(nil), cpu...)
	sort.Float64s(sorted)
	third := max(1, len(cpu)/3)
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	first, last := mean(cpu[:third]), mean(cpu[len(cpu)-third:])
	switch {
	case len(cpu) == 0:
		err2 = fmt.Errorf("no CPU sample")
	case sorted[len(sorted)-1] > 5:
		err2 = fmt.Errorf("CPU reached %.2f%% of a core in a 10 s window: %v", sorted[len(sorted)-1], roundF(cpu))
	case last > first+1:
		err2 = fmt.Errorf("CPU grew from %.2f%% to %.2f%% of a core: %v", first, last, roundF(cpu))
	}
	sum.trial(err2)
	sum.note("%s: %d starts; restart gaps %s; CPU per 10 s window %v %% of a core", d, len(runs), strings.Join(gaps, ", "), roundF(cpu))
}

func roundF(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}
