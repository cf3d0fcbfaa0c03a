package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/podrun/podrun/runner"
)

type psOptions struct {
	*globalOptions
	Output string
}

func newPsCmd(g *globalOptions, runF func(context.Context, *psOptions) error) *cobra.Command {
	opts := &psOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List podrun's pods on this node, from the container runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.Output {
			case "", "wide", "json", "yaml":
			default:
				return badInputf("--output %q: want wide, json or yaml", opts.Output)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return psRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

func psRun(ctx context.Context, opts *psOptions) error {
	rt, err := connect(ctx, opts.globalOptions)
	if err != nil {
		return err
	}
	defer rt.Close()
	pods, err := runner.Observe(ctx, rt, "docker")
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	if opts.Output == "json" || opts.Output == "yaml" {
		return writeList(opts.Out, opts.Output, pods)
	}
	return writePodTable(opts.Out, pods, opts.Output == "wide", time.Now())
}

// writePodTable prints kubectl's columns: NAMESPACE NAME READY STATUS
// RESTARTS AGE (and IP, NODE with wide).
func writePodTable(w io.Writer, pods []*v1.Pod, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE"
	if wide {
		header += "\tIP\tCONTAINERS"
	}
	fmt.Fprintln(tw, header)
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			restarts += cs.RestartCount
		}
		age := "-"
		if !p.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(p.CreationTimestamp.Time))
		}
		line := fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%d\t%s", p.Namespace, p.Name, ready, len(p.Status.ContainerStatuses),
			podStatusText(p), restarts, age)
		if wide {
			ip := p.Status.PodIP
			if ip == "" {
				ip = "<none>"
			}
			var names []string
			for _, cs := range p.Status.ContainerStatuses {
				names = append(names, cs.Name)
			}
			line += "\t" + ip + "\t" + strings.Join(names, ",")
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// podStatusText is kubectl's STATUS column: a container's waiting or
// terminated reason when there is one, else the phase.
func podStatusText(p *v1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return "Init:" + w.Reason
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return "Init:" + t.Reason
		}
	}
	reason := ""
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "" && p.Status.Phase != v1.PodSucceeded:
			reason = cs.State.Terminated.Reason
		}
	}
	if reason != "" && p.Status.Phase != v1.PodRunning {
		return reason
	}
	if reason == "CrashLoopBackOff" || reason == "ImagePullBackOff" || reason == "ErrImagePull" {
		return reason
	}
	if p.Status.Phase == v1.PodSucceeded {
		return "Completed"
	}
	return phase(p)
}
