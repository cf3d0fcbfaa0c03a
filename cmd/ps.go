package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/podrun/podrun/health"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

type psOptions struct {
	*globalOptions
	Output        string
	Namespace     string
	AllNamespaces bool
	// Daemon asks the podrun watch of the root dir first, on its socket;
	// when it answers, ps shows its pods (with readiness and source errors).
	Daemon bool
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (baseEngine, error)
}

func newPsCmd(g *globalOptions, runF func(context.Context, *psOptions) error) *cobra.Command {
	opts := &psOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List podrun's pods on this node: the running watch's, else the container runtime's",
		Long: `List podrun's pods on this node. The podrun watch of --root-dir, when one
runs, answers with its pods (readiness and manifest problems included):
those of its sources, not a pod that a once started from other manifests.
With no watch, or --daemon=false, every pod of the node is read from the
container runtime.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.Output {
			case "", "wide", "json", "yaml":
			default:
				return badInputf("--output %q: want wide, json or yaml", opts.Output)
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[baseEngine](g)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return psRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Output, "output", "o", "", "output format: wide, json or yaml")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "only pods of this namespace")
	f.BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "pods of every namespace (the default unless -n)")
	f.BoolVar(&opts.Daemon, "daemon", true,
		"ask the podrun watch of --root-dir (<root-dir>/podrun.sock, root only) first for live pods; false reads the engine only")
	return cmd
}

func psRun(ctx context.Context, opts *psOptions) error {
	var pods []*v1.Pod
	asked := false
	if opts.Daemon {
		var err error
		if pods, err = daemonPods(ctx, filepath.Join(opts.RootDir, health.SocketName), opts.NodeName); err == nil {
			asked = true
		} else {
			opts.Log.Debug("no podrun daemon answers; reading the engine", "err", err)
		}
	}
	if !asked {
		rt, err := opts.Engine(ctx)
		if err != nil {
			return err
		}
		defer rt.Close()
		pods, err = runner.ObserveWithClock(ctx, rt, opts.runtimeNameOr("docker"), opts.Clock)
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		// The runtime lists this node's pods only: they are bound to it,
		// as the daemon's are.
		for _, p := range pods {
			p.Spec.NodeName = opts.NodeName
		}
	}
	if opts.Namespace != "" && !opts.AllNamespaces {
		var keep []*v1.Pod
		for _, p := range pods {
			if p.Namespace == opts.Namespace {
				keep = append(keep, p)
			}
		}
		pods = keep
	}
	if opts.Output == "json" || opts.Output == "yaml" {
		return writeList(opts.Out, opts.Output, pods)
	}
	return writePodTable(opts.Out, pods, opts.Output == "wide", opts.Clock.Now())
}

// daemonPods asks a running `podrun watch` for its pods, on its socket.
// It fails when none answers, or when the one that answers runs for
// another node.
func daemonPods(ctx context.Context, socket, node string) ([]*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podrun/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := health.SocketClient(socket, 2*time.Second).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %s", resp.Status)
	}
	var list v1.PodList
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	out := make([]*v1.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != node {
			return nil, fmt.Errorf("the daemon at %s runs node %s, not %s", socket, p.Spec.NodeName, node)
		}
		out = append(out, p)
	}
	return out, nil
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
	var problems []string
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		// As kubectl: of the spec's containers (a pod refused admission
		// has no container status).
		total := max(len(p.Status.ContainerStatuses), len(p.Spec.Containers))
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			restarts += cs.RestartCount
		}
		age := podAge(p, now)
		status := podStatusText(p)
		if p.Annotations[source.AnnotationSourceError] != "" {
			status += " (manifest invalid: last good kept)"
		}
		line := fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%d\t%s", p.Namespace, p.Name, ready, total,
			status, restarts, age)
		if e := p.Annotations[source.AnnotationSourceError]; e != "" && wide {
			problems = append(problems, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, e))
		}
		if m := p.Status.Message; m != "" && wide {
			problems = append(problems, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, m))
		}
		if w := p.Annotations[source.AnnotationManifestWarnings]; w != "" && wide {
			for _, line := range strings.Split(w, "\n") {
				problems = append(problems, fmt.Sprintf("%s/%s: warning: %s", p.Namespace, p.Name, line))
			}
		}
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
	if err := tw.Flush(); err != nil {
		return err
	}
	// Manifest problems and pods' own messages under the table: they are
	// long and name lines.
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	return nil
}

// podAge is the AGE column: kubectl's, from the pod's creationTimestamp,
// which the apiserver sets on a pod of the API (and Docker's view takes
// from the pod's oldest sandbox). A static pod has none, as the kubelet's
// do not; a running watch reports when it first started the pod, its
// status.startTime. "-" when neither is known.
func podAge(p *v1.Pod, now time.Time) string {
	since := p.CreationTimestamp
	if since.IsZero() && p.Status.StartTime != nil {
		since = *p.Status.StartTime
	}
	if since.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(since.Time))
}

// podStatusText is kubectl's STATUS column: a container's waiting or
// terminated reason when there is one, else the phase.
func podStatusText(p *v1.Pod) string {
	if p.Status.Reason != "" {
		// The pod's own reason, as kubectl shows it: NodePorts for a pod
		// refused admission.
		return p.Status.Reason
	}
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
