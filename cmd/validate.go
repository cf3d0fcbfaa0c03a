package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type validateOptions struct {
	*globalOptions
	Paths []string
}

func newValidateCmd(g *globalOptions, runF func(context.Context, *validateOptions) error) *cobra.Command {
	opts := &validateOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "validate PATH|- ...",
		Short: "Decode and validate manifests; errors name the file, line and field",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return validateRun(cmd.Context(), opts)
		},
	}
}

// validateRun reads and merges the arguments as once does, and refuses
// what once would refuse for the manifests' sake: invalid manifests,
// conflicting definitions (in once's and watch's words). It needs no
// engine.
func validateRun(ctx context.Context, opts *validateOptions) error {
	d, err := readMerged(ctx, opts.globalOptions, opts.Paths)
	if err != nil {
		return err
	}
	for _, p := range d.Pods() {
		fmt.Fprintf(opts.Out, "%s: pod %s/%s (uid %s) is valid\n", d.From(p), p.Namespace, p.Name, p.UID)
	}
	writeWarnings(opts.Out, d.Warnings)
	return nil
}
