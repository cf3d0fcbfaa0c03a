package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
	"github.com/spf13/cobra"
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
		Use:   "down PATH|- ... | --all",
		Short: "Stop and remove pods gracefully, with their pod directories",
		Long: `Stop the pods of the manifests given (or, with --all, every pod podrun made
on this node) gracefully: SIGTERM (or the image's STOPSIGNAL), then SIGKILL
after the pod's terminationGracePeriodSeconds. Then remove their containers,
sandboxes and pod directories.`,
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
		"grace period for every pod (default: each pod's terminationGracePeriodSeconds; 30s for --all)")
	return cmd
}

func downRun(ctx context.Context, opts *downOptions) error {
	// names are the pods' namespace/name, by UID, for the report.
	names := map[string]string{}
	var targets []runner.TeardownTarget
	if !opts.All {
		updates, err := readArgs(ctx, opts.globalOptions, opts.Paths)
		if err != nil {
			return err
		}
		for _, w := range manifestWarnings(updates) {
			opts.Log.Debug("manifest warning", "warning", w)
		}
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
		for _, p := range d.Pods() {
			targets = append(targets, runner.TeardownTarget{UID: string(p.UID), Pod: p})
			names[string(p.UID)] = p.Namespace + "/" + p.Name
		}
	}
	rt, err := opts.Engine(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	r := newTeardownRunner(opts.globalOptions, rt)
	if opts.All {
		refs, err := r.RuntimePods(ctx)
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		for uid, ref := range refs {
			// No spec: hooks cannot run, the sandbox's grace period applies.
			targets = append(targets, runner.TeardownTarget{UID: uid})
			names[uid] = ref.Namespace + "/" + ref.Name
		}
	}
	// Reported as each pod is done; below zero, opts.Grace is each pod's own.
	var all []error
	r.TeardownPods(ctx, targets, opts.Grace, func(t runner.TeardownTarget, err error) {
		if err != nil {
			all = append(all, fmt.Errorf("remove %s: %w", names[t.UID], err))
			return
		}
		fmt.Fprintf(opts.Out, "pod %s removed\n", names[t.UID])
	})
	// The image volumes' copies the removed pods used, unless other pods
	// of the root dir use them.
	r.ReclaimImageCopies()
	return errors.Join(all...)
}
