package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
)

// Wait conditions of `once`.
const (
	waitRunning  = "running"
	waitReady    = "ready"
	waitComplete = "complete"
)

type onceOptions struct {
	*globalOptions
	Paths           []string
	Wait            string
	Timeout         time.Duration
	Output          string
	Remove          bool
	AllowPrivileged bool
	RuntimeClasses  runtimeClassOptions
	// ExtendedResources are the node's declared extended resources.
	ExtendedResources extendedResources
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (podEngine, error)
}

func newOnceCmd(g *globalOptions, runF func(context.Context, *onceOptions) error) *cobra.Command {
	opts := &onceOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "once PATH|URL|- ...",
		Short: "Start the pods of the manifests, wait until they are up (or done), report and exit",
		Long: `Start the pods of the manifest files, directories and http(s) URLs given (-
reads standard input), wait until every pod is running (--wait running), Ready (--wait
ready: readiness probes pass) or finished (--wait complete), print a report
and exit. Pods keep running after once exits;
--rm removes them after --wait complete. Running once again on unchanged
manifests changes nothing.

The arguments are merged as watch merges its sources: two that define the
same pod, ConfigMap or Secret conflict, reported as watch reports it, and
once then starts nothing (exit 2).

Exit status: 0 all pods good, 1 a pod failed or the wait timed out, 2 bad
input (nothing is started), 3 the Docker Engine cannot be reached.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			if err := opts.RuntimeClasses.parse(); err != nil {
				return err
			}
			switch opts.Wait {
			case waitRunning, waitReady, waitComplete:
			default:
				return badInputf("--wait %q: want running, ready or complete", opts.Wait)
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if opts.Remove && opts.Wait != waitComplete {
				return badInputf("--rm needs --wait complete")
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[podEngine](g)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return onceRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Wait, "wait", waitRunning, "what to wait for: running, ready (readiness probes pass) or complete")
	f.DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait (the last reading of the pods' state included)")
	f.StringVarP(&opts.Output, "output", "o", "table", "report format: table, json or yaml")
	f.BoolVar(&opts.Remove, "rm", false, "remove the pods after they complete (with --wait complete), within their longest grace period and a minute")
	f.BoolVar(&opts.AllowPrivileged, "allow-privileged", false, "allow privileged containers")
	addRuntimeClassFlag(f, &opts.RuntimeClasses)
	addExtendedResourceFlag(f, &opts.ExtendedResources)
	addPodMaxPIDsFlag(f, g)
	addSysctlFlag(f, g)
	return cmd
}

// onceRun reads the arguments as sources, merges them (source.Merger, as
// watch does), starts the pods on the engine and waits for them. Anything
// wrong with the manifests - invalid, conflicting, refused by policy - is
// bad input, whatever the engine answered, and nothing is started.
func onceRun(ctx context.Context, opts *onceOptions) error {
	// Reaching the engine and its `docker info` take about as long as
	// reading a few manifests, and both come before the first pod starts:
	// they run together. Bad input still decides the outcome.
	early := reachEarly(ctx, opts.Engine)
	defer early.discard()
	d, err := readMerged(ctx, opts.globalOptions, opts.Paths)
	if err != nil {
		return err
	}
	// Between objects: a privileged container without --allow-privileged
	// is refused here, where its line is known; a reference to an object
	// no argument defines is a warning (the containers wait with
	// CreateContainerConfigError); two pods' host ports are the sync
	// core's to decide (the later pod is refused, and the report says so).
	var privileged manifest.ErrorList
	for _, p := range crossCheck(d, opts.AllowPrivileged, opts.RuntimeClasses.Classes) {
		switch p.Reason {
		case runner.ReasonPrivileged:
			privileged = append(privileged, p.Error)
		case runner.ReasonNodePorts:
		default:
			// Now, not under the report: the wait may be long.
			opts.Log.Warn(p.Error.Error())
		}
	}
	if len(privileged) > 0 {
		return badInput(privileged)
	}
	podUps, refused := podUpdates(d.Changes, opts.AllowPrivileged)
	if len(refused) > 0 {
		return badInput(errors.Join(refused...))
	}
	if len(podUps) == 0 {
		// No report to put them under, and they may say why: an empty
		// file is a warning naming it.
		writeWarnings(opts.ErrOut, d.Warnings)
		fmt.Fprintln(opts.ErrOut, "podrun: the manifests define no pods")
		return nil
	}

	if err := opts.claimRootDir(); err != nil {
		return err
	}
	rt, err := early.take()
	if err != nil {
		return err
	}
	defer rt.Close()
	r, err := newRunner(ctx, opts.globalOptions, rt, opts.AllowPrivileged, opts.RuntimeClasses.tune, func(c *runner.Config) {
		c.ExtendedResources = opts.ExtendedResources
	})
	if err != nil {
		return err
	}
	r.SetObjects(d.ConfigMaps, d.Secrets)
	r.SetRuntimeClasses(d.RuntimeClasses)

	runCtx, stop := context.WithCancel(ctx)
	runUpdates := make(chan runner.PodUpdate, len(podUps))
	for _, u := range podUps {
		runUpdates <- u
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(runCtx, runUpdates)
	}()
	var pods []*v1.Pod
	for _, u := range podUps {
		pods = append(pods, u.Pods...)
	}

	result, waitErr := waitFor(ctx, r, pods, opts.Wait, opts.Timeout, opts.Clock)
	stop()
	<-done

	if err := writeReport(opts.Out, opts.Output, result); err != nil {
		return err
	}
	if opts.Output == "table" {
		writeWarnings(opts.Out, d.Warnings)
	} else {
		for _, w := range d.Warnings {
			opts.Log.Warn("manifest warning", "warning", w)
		}
	}
	if waitErr != nil {
		return podsFailed(waitErr)
	}
	if opts.Remove {
		if err := removePodsWithin(ctx, opts.Clock, r, pods); err != nil {
			return podsFailed(err)
		}
	}
	if failed := failedPods(result); len(failed) > 0 {
		return podsFailed(fmt.Errorf("pods failed: %v", failed))
	}
	return nil
}

// waitFor waits until every pod meets the condition and has converged, one
// has failed, or the timeout passes (on clk), and returns the pods with
// their last status. The timeout bounds all of it, the reading again
// below included.
//
// Converged (runner.SyncedPod) is what the status cannot show: that nothing
// of the pod runs that must not - a second sandbox, a container of an older
// attempt - which a podrun killed mid-bring-up can leave (its start requests
// may complete in the engine after the next podrun made the pod anew). The
// sync that finds such a pod stops what must not run; the next one finds it
// converged. Before it reports success, the pods' state is read again
// from the runtime (runner.Recheck): a status is as old as its pod's last
// sync, and a job that finished since (its container exited while another
// pod was still starting) must be seen finished, and have its sandbox
// stopped, before once exits and leaves no podrun to stop it.
// A failed pod ends the wait whatever else runs, once the sync
// that failed it has stopped what of it ran (a pod past its
// activeDeadlineSeconds is Failed first, then stopped): the report shows
// its containers terminated.
func waitFor(ctx context.Context, r *runner.Runner, pods []*v1.Pod, cond string, timeout time.Duration,
	clk clock.Clock) ([]*v1.Pod, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	// The deadline ends wctx, which the Recheck runs on too: --timeout is
	// the whole wait's, and an engine that does not answer the last
	// reading of the pods' state ends it as a timeout, not never.
	wctx, cancel := withClockTimeout(ctx, clk, timeout, errWaitTimedOut)
	defer cancel()
	uids := make([]string, len(pods))
	for i, p := range pods {
		uids[i] = string(p.UID)
	}
	// ended is the wait's result once wctx has ended: the deadline passed
	// (while rechecking, when it did), or ctx ended.
	ended := func(rechecking bool) ([]*v1.Pod, error) {
		current, converged := currentPods(r, pods)
		if !errors.Is(context.Cause(wctx), errWaitTimedOut) {
			return current, fmt.Errorf("interrupted while waiting for pods to be %s", cond)
		}
		if met, _ := conditionMet(current, cond); met && !converged {
			return current, fmt.Errorf("timed out after %s waiting for pods to be %s: "+
				"a pod still has a sandbox or container running that must be stopped (see the log)", timeout, cond)
		}
		if rechecking {
			return current, fmt.Errorf("timed out after %s waiting for pods to be %s: "+
				"the engine did not answer the last reading of their state", timeout, cond)
		}
		return current, fmt.Errorf("timed out after %s waiting for pods to be %s", timeout, cond)
	}
	for {
		changed := r.Changed()
		current, converged := currentPods(r, pods)
		met, failed := conditionMet(current, cond)
		if failed && failedSettled(r, current) {
			return current, nil
		}
		if met && converged {
			fresh, err := r.Recheck(wctx, uids)
			if err != nil {
				if wctx.Err() != nil {
					return ended(true)
				}
				return current, fmt.Errorf("pods are %s, but their state could not be read again: %w", cond, err)
			}
			select {
			case <-changed:
				continue // a status changed meanwhile (the reading may have caused it): look again
			default:
			}
			if fresh {
				return current, nil
			}
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return ended(false)
		}
	}
}

// errWaitTimedOut ends the context of a wait whose --timeout passed.
var errWaitTimedOut = errors.New("--timeout passed")

// withClockTimeout is context.WithTimeout on clk: ctx, ended with cause
// after d on clk. The goroutine that watches clk ends with the context
// (cancel, or ctx's end).
func withClockTimeout(ctx context.Context, clk clock.Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := clk.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(cause)
		case <-cctx.Done():
		}
	}()
	return cctx, func() { cancel(nil) }
}

// failedSettled reports whether every failed pod of pods (their last
// status) has nothing left running that must stop: its last sync found it
// converged.
func failedSettled(r *runner.Runner, pods []*v1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase != v1.PodFailed {
			continue
		}
		if _, converged, ok := r.SyncedPod(string(p.UID)); ok && !converged {
			return false
		}
	}
	return true
}

// currentPods returns the pods with their last status (the desired pod,
// without status, for one not synced yet), and whether every one was
// converged at that status.
func currentPods(r *runner.Runner, pods []*v1.Pod) ([]*v1.Pod, bool) {
	out := make([]*v1.Pod, len(pods))
	all := true
	for i, p := range pods {
		cur, converged, ok := r.SyncedPod(string(p.UID))
		if ok {
			out[i] = cur
		} else {
			out[i] = p
		}
		all = all && converged
	}
	return out, all
}

// conditionMet reports whether every pod meets cond, and whether any pod has
// failed (which ends the wait). A pod refused (runner.IsRefusal: its host
// ports, an extended resource, a sysctl, its OS, AppArmor, a name or uid
// another pod holds) has failed too, but never started: it does not end
// the wait, so that the other pods (the one holding the port among them)
// come up and are reported up; it fails the run at the end.
func conditionMet(pods []*v1.Pod, cond string) (met, failed bool) {
	met = true
	for _, p := range pods {
		switch p.Status.Phase {
		case v1.PodFailed:
			if runner.IsRefusal(p.Status.Reason) {
				continue
			}
			failed = true
		case v1.PodSucceeded:
		case v1.PodRunning:
			switch {
			case cond == waitComplete:
				met = false
			case cond == waitReady && !podReady(p):
				met = false
			case !allRunning(p):
				met = false
			}
		default:
			met = false
		}
	}
	return met, failed
}

// allRunning reports whether every app container of the pod runs (or has
// finished, and its restart policy and rules do not run it again).
func allRunning(p *v1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			continue
		}
		spec := &v1.Container{} // not in the spec: the pod's policy
		if i := slices.IndexFunc(p.Spec.Containers, func(c v1.Container) bool { return c.Name == cs.Name }); i >= 0 {
			spec = &p.Spec.Containers[i]
		}
		if t := cs.State.Terminated; t != nil && !runner.RestartsAfterExit(p, spec, int(t.ExitCode)) {
			continue
		}
		return false
	}
	return len(p.Status.ContainerStatuses) > 0
}

// podReady reports whether the pod's Ready condition is true.
func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func failedPods(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase == v1.PodFailed {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// removalBound is how long a removal of pods may take: the longest grace
// period of theirs (30 s, the default, at least) and a minute more for
// the engine's calls. The pods are torn down together, their grace periods
// overlapping, so the longest one bounds the stops. It is not --timeout:
// that is how long the pods may take to come up or complete, and says
// nothing of how long they take to stop; a removal cut short inside a grace
// period leaves pods on the node that were meant to go (and a long
// --timeout, for a long job, would let a removal the engine never answers
// hang as long). watch --stop-pods-on-exit is bounded the same way.
func removalBound(pods []*v1.Pod) time.Duration {
	longest := 30 * time.Second
	for _, p := range pods {
		longest = max(longest, runner.GracePeriod(p)) // the one the teardown waits
	}
	return longest + time.Minute
}

// errRemovalTimedOut ends the context of a removal that ran out of time.
var errRemovalTimedOut = errors.New("removal bound passed")

// removePodsWithin is removePods bounded by removalBound on clk. A removal
// that runs out of time, or is interrupted (ctx), says which pods it left
// on the node.
func removePodsWithin(ctx context.Context, clk clock.Clock, r *runner.Runner, pods []*v1.Pod) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	bound := removalBound(pods)
	rctx, cancel := withClockTimeout(ctx, clk, bound, errRemovalTimedOut)
	defer cancel()
	left, err := removePods(rctx, r, pods)
	if err == nil || rctx.Err() == nil {
		return err
	}
	what := "interrupted while removing the pods"
	if errors.Is(context.Cause(rctx), errRemovalTimedOut) {
		what = fmt.Sprintf("timed out after %s removing the pods", bound)
	}
	return fmt.Errorf("%s; left on the node: %s (podrun down of the same manifests removes them): %w",
		what, strings.Join(left, ", "), err)
}

// removePods stops and removes pods and their directories, in parallel,
// then the image volumes' copies no pod uses any more. left are the pods
// (namespace/name, sorted) it could not remove.
func removePods(ctx context.Context, r *runner.Runner, pods []*v1.Pod) (left []string, err error) {
	var all []error
	r.TeardownPods(ctx, teardownTargets(pods), -1, func(t runner.TeardownTarget, err error) {
		if err != nil {
			left = append(left, t.Name)
			all = append(all, fmt.Errorf("remove %s: %w", t.Name, err))
		}
	})
	r.ReclaimImageCopies()
	sort.Strings(left)
	return left, errors.Join(all...)
}
