package cmd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podrun/podrun/engine"
)

type logsOptions struct {
	*globalOptions
	Pod        string
	Namespace  string
	Container  string
	Follow     bool
	Previous   bool
	Tail       int
	Timestamps bool
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (logEngine, error)
}

func newLogsCmd(g *globalOptions, runF func(context.Context, *logsOptions) error) *cobra.Command {
	opts := &logsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER]",
		Short: "Print a container's logs, as kubectl logs does",
		Long: `Print the logs of a container of a pod on this node. POD is the pod's name
(web-node1) or its manifest name (web). A pod with one app container needs
no -c (init and ephemeral containers aside, as with kubectl).
--previous prints the run before the current one (after a crash).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Pod = args[0]
			if opts.Follow && opts.Previous {
				return badInputf("--follow and --previous do not go together")
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[logEngine](g)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return logsRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Namespace, "namespace", "n", "default", "the pod's namespace")
	f.StringVarP(&opts.Container, "container", "c", "", "container name (needed when the pod has several app containers)")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "stream the logs")
	f.BoolVarP(&opts.Previous, "previous", "p", false, "print the previous run's logs")
	f.IntVar(&opts.Tail, "tail", -1, "lines from the end to print (-1: all)")
	f.BoolVar(&opts.Timestamps, "timestamps", false, "prefix each line with its time")
	return cmd
}

func logsRun(ctx context.Context, opts *logsOptions) error {
	rt, err := opts.Engine(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	all, err := rt.ListContainers(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	if err := onePod(ctx, rt, all, opts); err != nil {
		return err
	}
	c, err := pickContainer(all, opts)
	if err != nil {
		return err
	}
	// Both streams to standard output, in the order written, as kubectl
	// logs prints them: `podrun logs web | grep` sees what httpd logs on
	// its stderr. The engine writes them from one goroutine.
	return rt.ContainerLogs(ctx, c.ID, engine.LogOptions{Follow: opts.Follow, Tail: opts.Tail, Timestamps: opts.Timestamps},
		opts.Out, opts.Out)
}

// pickContainer finds the run of the container whose logs are asked for.
func pickContainer(all []*engine.Container, opts *logsOptions) (*engine.Container, error) {
	var runs []*engine.Container
	for _, c := range all {
		if opts.asks(c.Pod) {
			runs = append(runs, c)
		}
	}
	if len(runs) == 0 {
		return nil, badInputf("no pod %s/%s on node %s (see podrun ps)", opts.Namespace, opts.Pod, opts.NodeName)
	}
	names, apps := map[string]bool{}, map[string]bool{}
	for _, c := range runs {
		names[c.Name] = true
		if c.Type == engine.ContainerTypeApp {
			apps[c.Name] = true
		}
	}
	name := opts.Container
	if name == "" {
		// As kubectl: init and ephemeral containers are not candidates,
		// so a pod with one app container (the bundled web example, with
		// its init container) needs no -c.
		switch {
		case len(apps) == 1:
			name = sortedSet(apps)[0]
		case len(names) == 1:
			name = runs[0].Name
		default:
			return nil, badInputf("pod %s has several containers; choose one with -c: %s", opts.Pod, strings.Join(sortedSet(names), ", "))
		}
	}
	if !names[name] {
		return nil, badInputf("pod %s has no container %q; it has: %s", opts.Pod, name, strings.Join(sortedSet(names), ", "))
	}
	var mine []*engine.Container
	for _, c := range runs {
		if c.Name == name {
			mine = append(mine, c)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Attempt > mine[j].Attempt })
	if opts.Previous {
		// As kubectl: the previous run is the container's lastState. While
		// the newest run is dead (a crash loop waiting out its back-off)
		// that is the newest run itself, and it is the one GC keeps.
		prev := 1
		if mine[0].State == engine.StateExited {
			prev = 0
		}
		if len(mine) <= prev {
			return nil, badInputf("container %s of pod %s has no previous run", name, opts.Pod)
		}
		return mine[prev], nil
	}
	return mine[0], nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
