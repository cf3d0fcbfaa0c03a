//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
	"github.com/podrun/podrun/health"
	v1 "k8s.io/api/core/v1"
)

// The multi-kill scenarios' pods: 10 pods of 2 containers, 30 objects with
// their sandboxes.
const (
	mkPods  = 10
	mkKills = 3
)

var mkContainers = []string{"c0", "c1"}

// TestKillThriceDuringOnce: `podrun once` of 10 pods of 2 containers is
// SIGKILLed at three random points of the bring-up (run again after each
// kill), then run to its end: it must exit 0 with each pod holding exactly
// one running sandbox and one running container per declared container,
// and nothing else of the node (no exited or created leftover); `down
// --all` then leaves nothing.
func TestKillThriceDuringOnce(t *testing.T) {
	multiKill(t, "once", newSummary(t, "kill x3 during once"))
}

// TestKillThriceDuringWatch is TestKillThriceDuringOnce for `podrun
// watch`: watch is SIGKILLed at three random points of the bring-up,
// started again after each kill; a last watch must converge to the same
// state, keep it when stopped (SIGTERM leaves the pods running), and `down
// --all` then leaves nothing.
func TestKillThriceDuringWatch(t *testing.T) {
	multiKill(t, "watch", newSummary(t, "kill x3 during watch"))
}

func multiKill(t *testing.T, mode string, sum *summary) {
	trials := count("MULTIKILL_TRIALS", 10, 2)
	total := mkPods * (1 + len(mkContainers))
	var points [][]int
	var converge []time.Duration
	for i := 0; i < trials; i++ {
		at, took, err := multiKillTrial(t, mode)
		points = append(points, at)
		converge = append(converge, took)
		sum.trial(err)
		outcome := "held"
		if err != nil {
			outcome = "failed (above)"
		}
		t.Logf("trial %d: %s killed at progress %v of %d; the last %s took %s; %s",
			i+1, mode, at, 2*total, mode, took.Round(10*time.Millisecond), outcome)
	}
	sum.note("%d pods x %d containers; %d SIGKILLs per trial at progress (objects made + running, of %d): %v",
		mkPods, len(mkContainers), mkKills, 2*total, points)
	sum.note("last %s converged: median %s, max %s", mode,
		median(converge).Round(100*time.Millisecond), maxDur(converge).Round(100*time.Millisecond))
}

// multiKillTrial runs one trial on a node of its own and returns the
// progress at which each kill landed and how long the last podrun took to
// converge.
func multiKillTrial(t *testing.T, mode string) ([]int, time.Duration, error) {
	n := newNode(t, "chaos-kill3")
	if err := writeMultiPods(n.dir, "m", mkPods, mkContainers); err != nil {
		return nil, 0, err
	}
	ctx := ctxFor(t, 15*time.Minute)
	total := mkPods * (1 + len(mkContainers))
	args := func() []string {
		if mode == "once" {
			return []string{"--wait", "running", "--timeout", "5m", n.dir}
		}
		return []string{"--path", n.dir, "--healthz-port", "0"}
	}

	// Three points of the bring-up, in order; progress counts objects made
	// and objects running, so creates and starts are both hit.
	var targets []int
	for range mkKills {
		targets = append(targets, rand.IntN(2*total))
	}
	slices.Sort(targets)
	var at []int
	for k, target := range targets {
		pr, err := n.p.Start(mode, args()...)
		if err != nil {
			return at, 0, err
		}
		progress, polls := 0, 0
		_, err = benchkit.WaitFor(ctx, 5*time.Minute, 10*time.Millisecond, fmt.Sprintf("progress %d", target), func() (bool, error) {
			exited := pr.Exited() // before the list: what it made is all listed
			cs, err := benchkit.List(ctx, docker, n.name)
			if err != nil {
				return false, err
			}
			polls++
			progress = len(cs)
			for _, c := range cs {
				if c.State == "running" {
					progress++
				}
			}
			return exited || progress >= target, nil
		})
		if err == nil && !pr.Exited() && polls == 1 {
			// An earlier run got past this point: kill this one at a
			// random moment of its start (listing, adopting) instead.
			time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
		}
		exited := pr.Exited()
		pr.Kill()
		if err != nil {
			return at, 0, fmt.Errorf("kill %d: %w\n%s", k+1, err, pr.Stderr(4000))
		}
		if exited {
			if mode == "watch" {
				return at, 0, fmt.Errorf("kill %d: podrun watch exited by itself:\n%s", k+1, pr.Stderr(4000))
			}
			// once got to its end first: the kill found nothing to kill.
			t.Logf("kill %d: once ended by itself first (exit %d, progress %d; target %d)",
				k+1, pr.Cmd.ProcessState.ExitCode(), progress, target)
		}
		at = append(at, progress)
	}

	var took time.Duration
	if mode == "once" {
		res, err := n.p.Run(ctx, 6*time.Minute, "once", args()...)
		if err != nil {
			return at, 0, err
		}
		took = res.Took
		if res.Code != 0 {
			return at, took, fmt.Errorf("the last once exited %d:\n%s\n%s", res.Code, n.census(ctx), tailLines(res.Stderr, 40))
		}
		if err := n.checkPods(ctx, "m", mkPods, mkContainers); err != nil {
			return at, took, fmt.Errorf("after the last once: %w\n%s", err, tailLines(res.Stderr, 40))
		}
	} else {
		// The last watch serves /pods: converged means it has synced every
		// pod itself (adopted or made), not only that the engine shows the
		// state an earlier watch left. Only then is it stopped.
		pr, err := n.p.Start("watch", "--path", n.dir, "--healthz-port", "0")
		if err != nil {
			return at, 0, err
		}
		defer func() {
			if !pr.Exited() {
				pr.Kill()
			}
		}()
		var last error
		took, err = benchkit.WaitFor(ctx, 3*time.Minute, 100*time.Millisecond, "convergence", func() (bool, error) {
			if pr.Exited() {
				return false, fmt.Errorf("podrun watch exited:\n%s", pr.Stderr(4000))
			}
			if last = n.checkPods(ctx, "m", mkPods, mkContainers); last != nil {
				return false, nil
			}
			last = watchSynced(ctx, filepath.Join(n.root, health.SocketName), mkPods)
			return last == nil, nil
		})
		if err != nil {
			return at, took, fmt.Errorf("the last watch: %v: %v\n%s", err, last, tailLines(pr.Stderr(20000), 40))
		}
		if err := pr.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
			return at, took, fmt.Errorf("the last watch, stopped with SIGTERM: %v\n%s", err, tailLines(pr.Stderr(20000), 40))
		}
		if err := n.checkPods(ctx, "m", mkPods, mkContainers); err != nil {
			return at, took, fmt.Errorf("after the last watch stopped: %w", err)
		}
	}

	down, err := n.p.Run(ctx, 5*time.Minute, "down", "--all", "--grace-period", "0s")
	if err != nil {
		return at, took, err
	}
	if down.Code != 0 {
		return at, took, fmt.Errorf("down --all exited %d:\n%s", down.Code, down.Stderr)
	}
	if cs, err := benchkit.List(ctx, docker, n.name); err != nil || len(cs) != 0 {
		return at, took, fmt.Errorf("after down --all: %d containers left (%v)\n%s", len(cs), err, n.census(ctx))
	}
	return at, took, nil
}

// writeMultiPods writes count pods named <prefix>-NNN, each with the
// containers named (sleep 3600; killed at once when stopped).
func writeMultiPods(dir, prefix string, count int, containers []string) error {
	for i := 0; i < count; i++ {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n", name)
		for _, c := range containers {
			fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n", c, benchkit.TestImage)
		}
		if err := benchkit.WriteFile(filepath.Join(dir, name+".yaml"), b.String()); err != nil {
			return err
		}
	}
	return nil
}

// podCensus counts the node's objects by pod, by container ("POD" for the
// sandbox) and by Docker state.
type podCensus map[string]map[string]map[string]int

func (n *node) podCensus(ctx context.Context) (podCensus, error) {
	cs, err := benchkit.List(ctx, docker, n.name)
	if err != nil {
		return nil, err
	}
	out := podCensus{}
	for _, c := range cs {
		pod, name, _ := strings.Cut(benchkit.Key(c, n.name), "/")
		if out[pod] == nil {
			out[pod] = map[string]map[string]int{}
		}
		if out[pod][name] == nil {
			out[pod][name] = map[string]int{}
		}
		out[pod][name][c.State]++
	}
	return out, nil
}

// census is the node's objects, pod by pod, for an error message.
func (n *node) census(ctx context.Context) string {
	pc, err := n.podCensus(ctx)
	if err != nil {
		return "census: " + err.Error()
	}
	pods := make([]string, 0, len(pc))
	for pod := range pc {
		pods = append(pods, pod)
	}
	return "census (pod: container state=count):\n" + pc.format(pods, nil)
}

// checkPods checks that pods <prefix>-000... each have exactly one running
// sandbox and one running container of each name in containers, and that
// the node has nothing else. The error shows, pod by pod, what is there by
// state.
func (n *node) checkPods(ctx context.Context, prefix string, pods int, containers []string) error {
	pc, err := n.podCensus(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := 0; i < pods; i++ {
		want[fmt.Sprintf("%s-%03d", prefix, i)] = true
	}
	wantNames := append([]string{"POD"}, containers...)
	bad := map[string]bool{}
	for pod := range want {
		for _, name := range wantNames {
			if st := pc[pod][name]; len(st) != 1 || st["running"] != 1 {
				bad[pod] = true
			}
		}
	}
	for pod, names := range pc {
		if !want[pod] {
			bad[pod] = true
			continue
		}
		for name := range names {
			if !slices.Contains(wantNames, name) {
				bad[pod] = true
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	var badPods []string
	for pod := range bad {
		badPods = append(badPods, pod)
	}
	return fmt.Errorf("%d of %d pods not as declared (want, each, POD running=1 and %s running=1, nothing else); pod: container state=count:\n%s",
		len(bad), pods, strings.Join(containers, ", "), pc.format(badPods, wantNames))
}

// format writes one line per pod of pods: "m-003: POD running=1
// exited=1, c0 running=1, c1 (none)" (each of names is shown, "(none)"
// when missing), then the totals of every pod by state.
func (pc podCensus) format(pods, names []string) string {
	pods = slices.Clone(pods)
	sort.Strings(pods)
	var b strings.Builder
	totals := map[string]int{}
	for _, pod := range pc {
		for _, st := range pod {
			for s, k := range st {
				totals[s] += k
			}
		}
	}
	for _, pod := range pods {
		shown := slices.Clone(names)
		for name := range pc[pod] {
			if !slices.Contains(shown, name) {
				shown = append(shown, name)
			}
		}
		sort.Slice(shown, func(i, j int) bool {
			if (shown[i] == "POD") != (shown[j] == "POD") {
				return shown[i] == "POD"
			}
			return shown[i] < shown[j]
		})
		var parts []string
		for _, name := range shown {
			if st := pc[pod][name]; len(st) > 0 {
				parts = append(parts, name+" "+formatStates(st))
			} else {
				parts = append(parts, name+" (none)")
			}
		}
		fmt.Fprintf(&b, "  %s: %s\n", pod, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "  all pods: %s", formatStates(totals))
	return b.String()
}

// formatStates is "running=2 exited=1", running first.
func formatStates(st map[string]int) string {
	states := make([]string, 0, len(st))
	for s := range st {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool {
		if (states[i] == "running") != (states[j] == "running") {
			return states[i] == "running"
		}
		return states[i] < states[j]
	})
	var parts []string
	for _, s := range states {
		parts = append(parts, s+"="+strconv.Itoa(st[s]))
	}
	return strings.Join(parts, " ")
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// watchSynced reports (as an error, nil when so) whether the watch serving
// socket shows pods pods in /pods, each with every container running.
func watchSynced(ctx context.Context, socket string, pods int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podrun/pods", nil)
	if err != nil {
		return err
	}
	resp, err := health.SocketClient(socket, 30*time.Second).Do(req)
	if err != nil {
		return fmt.Errorf("the watch's /pods: %w", err)
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("the watch's /pods: %w", err)
	}
	if len(list.Items) != pods {
		return fmt.Errorf("the watch's /pods lists %d pods, want %d", len(list.Items), pods)
	}
	for _, p := range list.Items {
		if len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("the watch has not synced %s yet", p.Name)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return fmt.Errorf("the watch shows %s/%s not running", p.Name, cs.Name)
			}
		}
	}
	return nil
}
