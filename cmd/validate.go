package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type validateOptions struct {
	*globalOptions
	Paths []string
	// AllowPrivileged is once's and watch's flag: without it a privileged
	// container is an error, as they refuse it.
	AllowPrivileged bool
	// RuntimeClasses is once's and watch's flag: a runtimeClassName that
	// neither it nor a RuntimeClass of the arguments declares is an error.
	RuntimeClasses runtimeClassOptions
}

func newValidateCmd(g *globalOptions, runF func(context.Context, *validateOptions) error) *cobra.Command {
	opts := &validateOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "validate PATH|URL|- ...",
		Short: "Decode and validate manifests; errors name the file, line and field",
		Long: `Decode and validate the manifest files, directories and http(s) URLs given (-
reads standard input), merged as once merges them, and report every problem with its file,
line and field: invalid manifests, definitions that conflict, and what
makes pods that are each valid unable to run as written: two pods asking
for one host port (the later one is refused), a ConfigMap, Secret, key or
imagePullSecret that no argument defines, a privileged container without
--allow-privileged, a runtimeClassName that neither --runtime-class nor a
RuntimeClass of the arguments declares. An empty file is a warning.

Exit status: 0 all good, 2 a problem found.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			if err := opts.RuntimeClasses.parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return validateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.AllowPrivileged, "allow-privileged", false,
		"allow privileged containers, as once and watch do with this flag")
	addRuntimeClassFlag(cmd.Flags(), &opts.RuntimeClasses)
	return cmd
}

// validateRun reads and merges the arguments as once does, and refuses
// what once and watch would refuse or fail at for the manifests' sake:
// invalid manifests, conflicting definitions (in once's and watch's
// words), and the problems between objects (crossCheck). It needs no
// engine.
func validateRun(ctx context.Context, opts *validateOptions) error {
	updates, err := readArgs(ctx, opts.globalOptions, opts.Paths)
	if err != nil {
		return err
	}
	d := mergeArgs(updates)
	// The warnings first: they stand whatever else is wrong.
	writeWarnings(opts.Out, d.Warnings)
	list := append(conflictList(d.Conflicts), problemList(crossCheck(d, opts.AllowPrivileged, opts.RuntimeClasses.Classes))...)
	if len(list) > 0 {
		return badInput(list)
	}
	for _, p := range d.Pods() {
		fmt.Fprintf(opts.Out, "%s: pod %s/%s (uid %s) is valid\n", d.From(p), p.Namespace, p.Name, p.UID)
	}
	return nil
}
