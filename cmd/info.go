package cmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/runner"
)

type infoOptions struct {
	*globalOptions
	Output string
	// Facts gathers the node's facts (node.Gather over the root dir and
	// the engine's image filesystem by default).
	Facts func(ctx context.Context) (*node.Facts, error)
	// OOM probes whether podrun may lower oom_score_adj, leaving its own
	// as it was (node.ProbeOOMScoreAdj by default); nil: not shown.
	OOM func() node.OOMProtection
}

func newInfoCmd(g *globalOptions, runF func(context.Context, *infoOptions) error) *cobra.Command {
	opts := &infoOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show this machine's facts: cores, memory, identity, kernel, and the disks podrun uses",
		Long: `Show what podrun knows of this machine, as a node's status would report it:
cores, memory, machine and boot IDs, kernel and OS, and the filesystems of
the root dir and of the engine's images (Docker's data root, or the CRI
runtime's image filesystem with --container-runtime-endpoint; image GC and
the low disk space threshold watch them), with their size and free space,
and whether podrun may give containers the kubelet's negative
oom_score_adj (it needs CAP_SYS_RESOURCE; without it, the lowest score is
podrun's own). The engine is asked for its images' place when it can be
reached; the rest needs no engine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if opts.Facts == nil {
				opts.Facts = func(ctx context.Context) (*node.Facts, error) { return gatherFacts(ctx, opts.globalOptions) }
			}
			if opts.OOM == nil {
				opts.OOM = func() node.OOMProtection {
					return node.ProbeOOMScoreAdj(node.SelfOOMScoreFile(), runner.OwnOOMScoreAdj, false)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return infoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// gatherFacts gathers the node's facts, with the filesystem of the
// engine's images (Docker's data root, or the CRI runtime's image
// filesystem with --container-runtime-endpoint) when the engine answers.
func gatherFacts(ctx context.Context, g *globalOptions) (*node.Facts, error) {
	paths := map[string]string{"root-dir": g.RootDir}
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rt, err := connect(ectx, g)
	if err == nil {
		defer rt.Close()
		var root string
		if root, err = rt.DataRoot(ectx); err == nil {
			paths["images"] = root
		}
	}
	if err != nil {
		fmt.Fprintf(g.ErrOut, "podrun: the engine's image filesystem is unknown (%v); not shown\n", err)
	}
	return node.Gather(paths)
}

func infoRun(ctx context.Context, opts *infoOptions) error {
	facts, err := opts.Facts(ctx)
	if facts == nil {
		return fmt.Errorf("node facts: %w", err)
	}
	if err != nil {
		fmt.Fprintf(opts.ErrOut, "podrun: some facts are missing: %v\n", err)
	}
	if opts.OOM != nil {
		p := opts.OOM()
		facts.OOMScoreAdj = &p
	}
	if opts.Output != "table" {
		return writeStructured(opts.Out, opts.Output, facts)
	}
	return writeFactsTable(opts.Out, facts)
}

func writeFactsTable(w io.Writer, f *node.Facts) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"HOSTNAME", f.Hostname},
		{"MACHINE ID", f.MachineID},
		{"SYSTEM UUID", f.SystemUUID},
		{"BOOT ID", f.BootID},
		{"KERNEL", f.KernelVersion},
		{"OS IMAGE", f.OSImage},
		{"ARCHITECTURE", f.Architecture},
		{"CPUS", fmt.Sprint(f.CPUs)},
		{"MEMORY", units.BytesSize(float64(f.MemoryBytes))},
		{"OOM SCORES", oomText(f.OOMScoreAdj)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], orNone(row[1]))
	}
	if len(f.Filesystems) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "FILESYSTEM\tPATH\tDEVICE\tSIZE\tAVAILABLE\tUSED")
		for _, fs := range f.Filesystems {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d%%\n", fs.Use, fs.Path, orNone(fs.Device),
				units.BytesSize(float64(fs.CapacityBytes)), units.BytesSize(float64(fs.AvailableBytes)), fs.UsedPercent())
		}
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// oomText says which oom_score_adj containers get.
func oomText(p *node.OOMProtection) string {
	switch {
	case p == nil:
		return ""
	case p.CanLower:
		return "the kubelet's (Guaranteed and node-critical -997, sandboxes -998)"
	}
	return fmt.Sprintf("not below %d, podrun's own (the kubelet's -997 and -998 are raised to it): %s", p.Own, p.Reason)
}
