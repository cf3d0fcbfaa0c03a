//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
)

// TestDockerdRestart: dockerd is restarted under a running `podrun watch`
// with 20 pods (its containers stop with it); podrun must bring every pod
// back within CHAOS_DOCKERD_DEADLINE (10 s) of dockerd answering again,
// with no duplicate container. Where Docker alone needs longer than the
// deadline to make those 40 containers (measured right after, with
// benchkit.BringUpBound), the limit is 1.3x Docker's own time instead.
//
// Restarting dockerd breaks every other test that uses it: the scenario
// waits (up to CHAOS_DOCKERD_WAIT, 10 min) until no other Go test binary
// runs, and is skipped if one still does. CHAOS_DOCKERD=0 skips it.
func TestDockerdRestart(t *testing.T) {
	sum := newSummary(t, "dockerd-restart")
	if os.Getenv("CHAOS_DOCKERD") == "0" {
		sum.skip("CHAOS_DOCKERD=0")
	}
	trials := count("DOCKERD_TRIALS", 5, 1)
	deadline := duration("DOCKERD_DEADLINE", 10*time.Second, 10*time.Second)
	wait := duration("DOCKERD_WAIT", 10*time.Minute, 10*time.Minute)
	const pods = 20

	n := newNode(t, "chaos-dockerd")
	n.view = restartedDocker{sum: sum}
	n.writePods("p", pods)
	pr, err := n.p.Start("watch", "--path", n.dir, "--healthz-port", "0", "--file-check-frequency", "5s")
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	ctx := ctxFor(t, time.Duration(trials+2)*15*time.Minute)
	if _, err := n.waitConverged(ctx, 2*pods, true, 5*time.Minute); err != nil {
		t.Fatalf("bring-up: %v\n%s", err, pr.Stderr(4000))
	}
	var tooks, bounds []time.Duration
	for i := 0; i < trials; i++ {
		if others := waitAlone(wait); len(others) > 0 {
			sum.note("stopped after %d trials: other Go test binaries running: %s", i, strings.Join(others, "; "))
			if i == 0 {
				sum.skip("other Go test binaries were running for " + wait.String() + ": " + strings.Join(others, "; "))
			}
			break
		}
		back, err := benchkit.RestartDockerd(ctx, docker)
		if err != nil {
			t.Fatalf("restart dockerd: %v", err)
		}
		took, err := n.waitConverged(ctx, 2*pods, false, 5*time.Minute)
		took = time.Since(back)
		if pr.Exited() {
			err = fmt.Errorf("podrun watch exited: %s", pr.Stderr(4000))
		}
		tooks = append(tooks, took)
		// What Docker itself needs, now, for the same 40 containers.
		boundNode := benchkit.NodeName("chaos-dockerd-bound")
		untrack := benchkit.TrackNode(boundNode)
		bound, berr := benchkit.BringUpBound(ctx, docker, boundNode, infra, benchkit.TestImage, pods)
		if cerr := benchkit.Cleanup(ctx, docker, boundNode); cerr != nil {
			t.Errorf("cleanup: %v", cerr)
		}
		untrack()
		if berr == nil {
			bounds = append(bounds, bound)
		} else {
			bound = 0
		}
		// Within the deadline; or, on a machine where Docker alone needs
		// longer than that to make the same containers, within 1.3x of
		// Docker's own time (the bring-up benchmark's standard).
		if limit := max(deadline, bound*13/10); err == nil && took > limit {
			err = fmt.Errorf("converged %s after dockerd answered, over %s (the %s deadline, or 1.3x Docker's own %s)",
				took.Round(10*time.Millisecond), limit.Round(10*time.Millisecond), deadline, bound.Round(10*time.Millisecond))
		}
		t.Logf("trial %d: converged %s after dockerd answered; Docker alone makes %d pods in %s", i+1,
			took.Round(10*time.Millisecond), pods, bound.Round(10*time.Millisecond))
		if err != nil {
			if st, serr := n.state(ctx); serr == nil {
				t.Logf("running %d, duplicates %v, not running %v", len(st.running), st.dups, st.leftover)
			}
			t.Logf("podrun's log:\n%s", pr.Stderr(20000))
		}
		sum.trial(err)
		if pr.Exited() {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(tooks) > 0 {
		sum.note("converged after dockerd answered: %v (deadline %s); Docker alone, right after, for the same %d pods (create+start sandbox and app, in parallel): %v",
			roundAll(tooks), deadline, pods, roundAll(bounds))
	}
}

// restartedDocker is dockerView for the node whose dockerd is restarted
// under it. A container Docker left dead across the restart with its
// filesystem still mounted ("device or resource busy"), which no removal
// ends (seen with Docker 20.10 on kernel 6.18; an umount of the mount
// fails with EINVAL as well), is named in the summary instead of failing
// the scenario: what podrun must do held, and only a reboot rids the
// machine of it. Anything else left fails the cleanup as before.
type restartedDocker struct {
	dockerView
	sum *summary
}

func (v restartedDocker) cleanup(ctx context.Context, node string) error {
	err := v.dockerView.cleanup(ctx, node)
	if err == nil {
		return nil
	}
	left, lerr := benchkit.List(ctx, docker, node)
	if lerr != nil || len(left) == 0 {
		return err
	}
	var stuck []string
	for _, c := range left {
		ins, ierr := docker.ContainerInspect(ctx, c.ID)
		if ierr != nil || ins.State == nil || !ins.State.Dead || !strings.Contains(ins.State.Error, "device or resource busy") {
			return err
		}
		stuck = append(stuck, fmt.Sprintf("%s (%.12s)", strings.TrimPrefix(ins.Name, "/"), c.ID))
	}
	v.sum.note("left on the machine: %d container(s) Docker left dead across its restart and cannot remove, "+
		"their filesystem still mounted (device or resource busy, a Docker defect): %s", len(stuck), strings.Join(stuck, ", "))
	return nil
}

// waitAlone waits until no other Go test binary runs, up to wait, and
// returns those still running then.
func waitAlone(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		others := benchkit.OtherTestBinaries()
		if len(others) == 0 || time.Now().After(deadline) {
			return others
		}
		time.Sleep(5 * time.Second)
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}
