package main

import (
	"context"
	"fmt"
	"log"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
)

// DaemonCPU is the CPU an engine's daemon (dockerd, containerd) spent in
// a steady-state window with podrun watching, and over a window as long
// with the same containers and podrun stopped: the difference is what
// podrun makes it spend. The daemon is shared with whatever else runs on
// the machine, so both include its noise.
type DaemonCPU struct {
	WithPodrun, Alone float64 // % of one core
}

// Caused is the CPU podrun makes the daemon spend (% of one core).
func (d DaemonCPU) Caused() float64 { return d.WithPodrun - d.Alone }

// dockerdPID is the pid of the machine's dockerd.
func dockerdPID() (int, error) {
	out, err := exec.Command("pidof", "dockerd").Output()
	if err != nil {
		return 0, fmt.Errorf("find dockerd: %w", err)
	}
	return strconv.Atoi(strings.Fields(string(out))[0])
}

// daemonCPUMeter reads pid's CPU time at the start of a window and returns
// its use over the window, in % of one core, when called again.
func daemonCPUMeter(pid int) (func() (float64, error), error) {
	p0, err := benchkit.ReadProc(pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	return func() (float64, error) {
		p1, err := benchkit.ReadProc(pid)
		if err != nil {
			return 0, err
		}
		return 100 * (p1.CPU - p0.CPU).Seconds() / time.Since(t0).Seconds(), nil
	}, nil
}

// daemonAlone stops podrun (SIGTERM: its pods keep running) and measures
// the daemon pid's CPU over window with the same containers and no podrun.
func daemonAlone(pr *benchkit.Proc, pid int, window time.Duration) (float64, error) {
	if err := pr.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		return 0, fmt.Errorf("stop podrun watch: %w", err)
	}
	time.Sleep(5 * time.Second) // podrun's stop (its last requests) is not the daemon alone
	meter, err := daemonCPUMeter(pid)
	if err != nil {
		return 0, err
	}
	time.Sleep(window)
	return meter()
}

// logDockerdCPU logs a steady state's CPU with dockerd's share.
func logDockerdCPU(n int, label string, podrunCPU float64, d DaemonCPU) {
	log.Printf("steady %3d pods %-18s: podrun CPU %.2f%%, dockerd CPU %.2f%% with podrun, %.2f%% alone: podrun + what it causes %.2f%% of one core",
		n, label, podrunCPU, d.WithPodrun, d.Alone, podrunCPU+d.Caused())
}

// idleCPUTarget is issue 15's bound on podrun plus the dockerd CPU it
// causes on an idle node (% of one core).
const idleCPUTarget = 0.3

// dockerdTable reports podrun's CPU with the dockerd CPU it causes, and
// the verdict against idleCPUTarget.
func dockerdTable(b *strings.Builder, ss []Steady) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("CPU podrun makes dockerd spend: dockerd's CPU (`/proc/<pid>/stat`) over the window with podrun watching, " +
		"and over a window as long right after, with the same containers running and podrun stopped (SIGTERM, +5 s); " +
		"the difference is podrun's doing. dockerd is shared with whatever else runs here, so both carry its noise.\n\n")
	p("| pods | subject | podrun CPU (%%) | dockerd with podrun (%%) | dockerd alone (%%) | dockerd caused (%%) | podrun + caused (%% of one core) |\n")
	p("|---:|---|---:|---:|---:|---:|---:|\n")
	for _, s := range ss {
		d := s.Dockerd
		p("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", s.Pods, s.Subject, s.CPUPercent, d.WithPodrun, d.Alone, d.Caused(), s.CPUPercent+d.Caused())
	}
	p("\n")
	for _, s := range ss {
		total := s.CPUPercent + s.Dockerd.Caused()
		verdict := "within"
		if total > idleCPUTarget {
			verdict = "**not** within"
		}
		p("**Verdict (%s, %d pods, idle):** podrun plus the dockerd CPU it causes took %.2f %% of one core: %s the %.1f %% target.\n\n",
			s.Subject, s.Pods, total, verdict, idleCPUTarget)
	}
}

// settleRelist waits (up to 3 min) until podrun's relist period has grown
// to its cap (podrun_relist_period_seconds), so that the steady window
// is the idle node's and not the end of the period's growth. A podrun
// without that series (one from before it) is not waited for.
func settleRelist(ctx context.Context, url string) {
	const series, relistCap = "podrun_relist_period_seconds", 60
	period := func() (float64, bool) {
		m, err := benchkit.Metrics(ctx, url, series)
		v, ok := m[""]
		return v, err == nil && ok
	}
	if _, ok := period(); !ok {
		return
	}
	if _, err := benchkit.WaitFor(ctx, 3*time.Minute, time.Second, "the relist period to reach its cap", func() (bool, error) {
		v, _ := period()
		return v >= relistCap, nil
	}); err != nil {
		log.Printf("steady: %v; measuring anyway", err)
	}
}
