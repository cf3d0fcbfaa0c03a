package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

type downOptions struct {
	*globalOptions
	Paths []string
	All   bool
	// Grace overrides the pods' terminationGracePeriodSeconds when >= 0.
	Grace time.Duration
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (baseEngine, error)
}

func newDownCmd(g *globalOptions, runF func(context.Context, *downOptions) error) *cobra.Command {
	opts := &downOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "down PATH|URL|- ... | --all",
		Short: "Stop and remove pods gracefully, with their pod directories",
		Long: `Stop the pods of the manifests given (or, with --all, every pod podrun made
on this node) gracefully: SIGTERM (or the image's STOPSIGNAL), then SIGKILL
after the pod's terminationGracePeriodSeconds. Then remove their containers,
sandboxes and pod directories. A pod of the manifests that is not on the
node is said to be so, and is no error (exit 0).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			if opts.All == (len(args) > 0) {
				return badInputf("give manifest paths or --all, not both or neither")
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[baseEngine](g)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return downRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "remove every pod podrun made on this node")
	cmd.Flags().DurationVar(&opts.Grace, "grace-period", -1,
		"grace period for every pod (default: each pod's terminationGracePeriodSeconds; with --all, the one its sandbox recorded)")
	return cmd
}

func downRun(ctx context.Context, opts *downOptions) error {
	var targets []runner.TeardownTarget
	if !opts.All {
		updates, err := readArgs(ctx, opts.globalOptions, opts.Paths)
		if err != nil {
			return err
		}
		// As once and validate print them: an empty file, which takes
		// nothing down, is a warning naming it.
		writeWarnings(opts.ErrOut, manifestWarnings(updates))
		d := mergeArgs(updates)
		// The pods are the ones once and watch would run. A pod that two
		// arguments define is refused, as once refuses it: which of the
		// two runs depends on the order its sources were given in. Two
		// definitions of a ConfigMap or a Secret do not matter here.
		var podConflicts []source.Conflict
		for _, c := range d.Conflicts {
			if c.Kind == "pod" {
				podConflicts = append(podConflicts, c)
			}
		}
		if err := conflictError(podConflicts); err != nil {
			return err
		}
		targets = teardownTargets(d.Pods())
	}
	// Another node's root dir holds that node's pod directories and image
	// copies, which this node's removals must not touch.
	if err := opts.checkRootDir(); err != nil {
		return err
	}
	rt, err := opts.Engine(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	r := newTeardownRunner(opts.globalOptions, rt)
	// Reported as each pod is done; below zero, opts.Grace is each pod's own.
	var all []error
	done := func(t runner.TeardownTarget, err error) {
		if err != nil {
			all = append(all, fmt.Errorf("remove %s: %w", t.Name, err))
			return
		}
		fmt.Fprintf(opts.Out, "pod %s removed\n", t.Name)
	}
	if opts.All {
		if err := r.TeardownAll(ctx, opts.Grace, done); err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
	} else {
		// As kubectl delete --ignore-not-found: a pod that is not there
		// is what down wants, no error; but it is not reported removed.
		r.TeardownPodsFound(ctx, targets, opts.Grace, func(t runner.TeardownTarget, f runner.Found, err error) {
			if err != nil || f.OnNode {
				done(t, err)
				return
			}
			fmt.Fprintf(opts.Out, "pod %s not on this node: nothing to remove%s\n", t.Name, namesakesNote(f.Namesakes))
		})
	}
	// The image volumes' copies the removed pods used, unless other pods
	// of the root dir use them.
	r.ReclaimImageCopies()
	return errors.Join(all...)
}

// teardownTargets are pods to tear down, with their specs.
func teardownTargets(pods []*v1.Pod) []runner.TeardownTarget {
	out := make([]runner.TeardownTarget, len(pods))
	for i, p := range pods {
		out[i] = runner.TeardownTarget{UID: string(p.UID), Name: p.Namespace + "/" + p.Name, Pod: p}
	}
	return out
}

// namesakesNote says, after "pod X not on this node", which pods of that
// name from other manifests are (down leaves them), and how to remove
// them.
func namesakesNote(ns []runner.Namesake) string {
	var b strings.Builder
	for _, n := range ns {
		if n.Source == "" {
			fmt.Fprintf(&b, "; a pod of that name, uid %s, is (its source is not recorded: down --all removes it)", n.UID)
			continue
		}
		src := manifest.RedactedSource(n.Source)
		fmt.Fprintf(&b, "; a pod of that name from %s, uid %s, is (podrun down %s removes it)", src, n.UID, src)
	}
	return b.String()
}
