package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

type downOptions struct {
	*globalOptions
	Paths []string
	All   bool
	// Grace overrides the pods' terminationGracePeriodSeconds when >= 0.
	Grace time.Duration
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
	type target struct {
		uid, name string
		pod       *v1.Pod // nil with --all: hooks need the spec
	}
	var targets []target
	if !opts.All {
		_, pods, err := loadPods(ctx, opts.globalOptions, opts.Paths)
		if err != nil {
			return err
		}
		for _, ps := range pods {
			targets = append(targets, target{string(ps.Pod.UID), ps.Pod.Namespace + "/" + ps.Pod.Name, ps.Pod})
		}
	}
	rt, err := connect(ctx, opts.globalOptions)
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
			targets = append(targets, target{uid, ref.Namespace + "/" + ref.Name, nil})
		}
	}
	errs := make(chan error, len(targets))
	for _, t := range targets {
		go func() {
			// Below zero: each pod's own grace period.
			if err := r.Teardown(ctx, t.pod, t.uid, opts.Grace); err != nil {
				errs <- fmt.Errorf("remove %s: %w", t.name, err)
				return
			}
			fmt.Fprintf(opts.Out, "pod %s removed\n", t.name)
			errs <- nil
		}()
	}
	var all []error
	for range targets {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
