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

func validateRun(ctx context.Context, opts *validateOptions) error {
	_, pods, err := loadPods(ctx, opts.globalOptions, opts.Paths)
	if err != nil {
		return err
	}
	for _, ps := range pods {
		fmt.Fprintf(opts.Out, "%s: pod %s/%s (uid %s) is valid\n", ps.Source, ps.Pod.Namespace, ps.Pod.Name, ps.Pod.UID)
	}
	return nil
}
