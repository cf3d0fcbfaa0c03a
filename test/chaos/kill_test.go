//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
)

// TestKillDuringBringUp: podrun once is SIGKILLed at a random moment of the
// bring-up of 20 pods (when a random number of their 40 containers exist),
// then run again: every pod must converge, with no duplicate container and
// nothing left over, and `down --all` must then remove everything.
func TestKillDuringBringUp(t *testing.T) {
	killDuringBringUp(t, "kill-during-bring-up", func() *node { return newNode(t, "chaos-kill") })
}

// TestKillDuringBringUpCRI is TestKillDuringBringUp on containerd (the
// CRI engine): a pod's objects are its sandbox and its container there.
func TestKillDuringBringUpCRI(t *testing.T) {
	killDuringBringUp(t, "kill-during-bring-up-cri", func() *node { return newCRINode(t, "chaos-kill-cri") })
}

func killDuringBringUp(t *testing.T, name string, newNode func() *node) {
	trials := count("KILL_TRIALS", 20, 3)
	const pods = 20
	sum := newSummary(t, name)
	var killedAt []int
	var converge []time.Duration
	for i := 0; i < trials; i++ {
		target := rand.IntN(2 * pods) // objects (sandboxes, containers) made when the kill lands
		at, took, err := killTrial(t, newNode(), pods, target)
		killedAt = append(killedAt, at)
		converge = append(converge, took)
		sum.trial(err)
		t.Logf("trial %d: killed with %d/%d objects made; restart converged in %s; err=%v", i+1, at, 2*pods, took.Round(10*time.Millisecond), err)
	}
	sum.note("killed with objects made: %v of %d", killedAt, 2*pods)
	sum.note("second once: median %s, max %s", median(converge).Round(100*time.Millisecond), maxDur(converge).Round(100*time.Millisecond))
}

func killTrial(t *testing.T, n *node, pods, target int) (int, time.Duration, error) {
	n.writePods("p", pods)
	ctx := ctxFor(t, 10*time.Minute)

	pr, err := n.p.Start("once", "--wait", "running", "--timeout", "5m", n.dir)
	if err != nil {
		return 0, 0, err
	}
	made := 0
	_, err = benchkit.WaitFor(ctx, 5*time.Minute, 10*time.Millisecond, "containers to appear", func() (bool, error) {
		if pr.Exited() {
			return true, nil
		}
		objs, err := n.view.objects(ctx, n.name)
		if err != nil {
			return false, err
		}
		made = len(objs)
		return made >= target, nil
	})
	exitedFirst := pr.Exited()
	pr.Kill()
	if err != nil {
		return made, 0, err
	}
	if exitedFirst {
		made = 2 * pods // it finished before the kill
	}

	res, err := n.p.Run(ctx, 6*time.Minute, "once", "--wait", "running", "--timeout", "5m", n.dir)
	if err != nil {
		return made, 0, err
	}
	if res.Code != 0 {
		return made, res.Took, fmt.Errorf("the second once exited %d:\n%s", res.Code, res.Stderr)
	}
	st, err := n.state(ctx)
	if err != nil {
		return made, res.Took, err
	}
	if len(st.cutShort) > 0 {
		t.Logf("%d starts cut short by the kill (containerd cancels them), run again: %v", len(st.cutShort), st.cutShort)
	}
	if err := st.check(2*pods, true); err != nil {
		return made, res.Took, fmt.Errorf("after the second once: %w\nits log ends:\n%s", err, tail(res.Stderr, 6000))
	}
	down, err := n.p.Run(ctx, 5*time.Minute, "down", "--all", "--grace-period", "0s")
	if err != nil {
		return made, res.Took, err
	}
	if down.Code != 0 {
		return made, res.Took, fmt.Errorf("down --all exited %d:\n%s", down.Code, down.Stderr)
	}
	if objs, err := n.view.objects(context.Background(), n.name); err != nil || len(objs) != 0 {
		return made, res.Took, fmt.Errorf("after down --all: %d objects left (%v)", len(objs), err)
	}
	return made, res.Took, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
