package cmd

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
	"github.com/podrun/podrun/nodeapi"
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
	// DaemonPods are the pods, with their status, of the podrun watch of
	// the root dir (asked on its socket by default); an error when none
	// answers. Only --previous asks.
	DaemonPods func(context.Context) ([]*v1.Pod, error)
}

func newLogsCmd(g *globalOptions, runF func(context.Context, *logsOptions) error) *cobra.Command {
	opts := &logsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER]",
		Short: "Print a container's logs, as kubectl logs does",
		Long: `Print the logs of a container of a pod on this node. POD is the pod's name
(web-node1) or its manifest name (web). A pod with one app container needs
no -c (init and ephemeral containers aside, as with kubectl).
--previous prints the container's previous run, its lastState as kubectl
shows it: the run that ended before the current one, or, while a crashed
container waits to be restarted, the run that crashed. A container that
never ran before its current run has none, and that is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Pod = args[0]
			if opts.Follow && opts.Previous {
				return badInputf("--follow and --previous do not go together")
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[logEngine](g)
			}
			if opts.DaemonPods == nil {
				opts.DaemonPods = func(ctx context.Context) ([]*v1.Pod, error) {
					return daemonPods(ctx, filepath.Join(g.RootDir, health.SocketName), g.NodeName)
				}
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
	name, runs, err := pickContainer(all, opts)
	if err != nil {
		return err
	}
	c := runs[0]
	if opts.Previous {
		if c, err = previousRun(ctx, opts, name, runs); err != nil {
			return err
		}
	}
	// Both streams to standard output, in the order written, as kubectl
	// logs prints them: `podrun logs web | grep` sees what httpd logs on
	// its stderr. The engine writes them from one goroutine.
	return rt.ContainerLogs(ctx, c.ID, engine.LogOptions{Follow: opts.Follow, Tail: opts.Tail, Timestamps: opts.Timestamps},
		opts.Out, opts.Out)
}

// pickContainer finds the container whose logs are asked for: its name and
// its runs, newest first.
func pickContainer(all []*engine.Container, opts *logsOptions) (string, []*engine.Container, error) {
	var runs []*engine.Container
	for _, c := range all {
		if opts.asks(c.Pod) {
			runs = append(runs, c)
		}
	}
	if len(runs) == 0 {
		return "", nil, badInputf("no pod %s/%s on node %s (see podrun ps)", opts.Namespace, opts.Pod, opts.NodeName)
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
			return "", nil, badInputf("pod %s has several containers; choose one with -c: %s", opts.Pod, strings.Join(sortedSet(names), ", "))
		}
	}
	if !names[name] {
		return "", nil, badInputf("pod %s has no container %q; it has: %s", opts.Pod, name, strings.Join(sortedSet(names), ", "))
	}
	var mine []*engine.Container
	for _, c := range runs {
		if c.Name == name {
			mine = append(mine, c)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Attempt > mine[j].Attempt })
	return name, mine, nil
}

// previousRun is the run of container name that --previous shows, as
// kubectl's: the container's lastState. The podrun watch of the root dir,
// when it runs the pod, says which run that is in the pod's status (while
// a crashed container waits out its back-off, the newest run, the one
// that crashed). Without a watch nothing restarts a container, so no run
// waits to be replaced: lastState is the newest run that ended before the
// newest one. A container that never ran before has none, and never a
// run that is still its current one: that is an error, as kubectl's.
func previousRun(ctx context.Context, opts *logsOptions, name string, runs []*engine.Container) (*engine.Container, error) {
	if p := daemonPod(ctx, opts, runs[0].Pod.UID); p != nil {
		id, err := nodeapi.LogContainerID(p, name, true)
		if err != nil {
			return nil, badInput(err)
		}
		for _, c := range runs {
			if c.ID == id {
				return c, nil
			}
		}
		return nil, badInputf("previous terminated container %q in pod %q is gone (its container %.12s was removed)", name, p.Name, id)
	}
	for _, c := range runs[1:] {
		if c.State != engine.StateRunning && c.State != engine.StateCreated {
			return c, nil
		}
	}
	return nil, badInputf("previous terminated container %q in pod %q not found", name, runs[0].Pod.Name)
}

// daemonPod is the pod of uid as the podrun watch of the root dir has it;
// nil when no watch answers or it does not run that pod (a once started
// it).
func daemonPod(ctx context.Context, opts *logsOptions, uid string) *v1.Pod {
	pods, err := opts.DaemonPods(ctx)
	if err != nil {
		opts.Log.Debug("no podrun daemon answers; the previous run is read from the engine", "err", err)
		return nil
	}
	for _, p := range pods {
		if string(p.UID) == uid {
			return p
		}
	}
	return nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
