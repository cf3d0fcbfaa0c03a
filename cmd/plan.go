package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

type planOptions struct {
	*globalOptions
	Paths           []string
	Output          string
	AllowPrivileged bool
	// ExtendedResources are the node's declared extended resources, as
	// once and watch are given them: admission counts them out.
	ExtendedResources extendedResources
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (baseEngine, error)
}

func newPlanCmd(g *globalOptions, runF func(context.Context, *planOptions) error) *cobra.Command {
	opts := &planOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "plan PATH|URL|- ...",
		Short: "Say what once (or watch) would change of the pods now running: create, recreate, update, remove",
		Long: `Compare the manifests given with what runs on this node and say, pod by
pod, what once (or watch, given the same sources) would do: create it,
recreate it (and why: its sandbox changed - hostNetwork, ports, volumes,
DNS, hostname -, or it is not running), update it (start, restart or stop
which containers, update which resources in place), remove it, refuse it
(as once refuses it: its uid or name is another pod's, a host port another
pod holds, an extended resource the node has too few of, a sysctl the node
does not allow, its OS: give plan the --extended-resource and
--allowed-unsafe-sysctls flags once and watch get), or leave it unchanged,
with the fields that changed. Nothing is changed.

The fields come from the specs once and watch keep under --root-dir when
they make a pod's sandbox and containers: give plan the same --root-dir.
Without them (a pod made by an older podrun) plan says what changes, but
not which fields.

A pod to remove is one podrun runs on this node from a file of a directory
given, a file given or a URL given, that the manifests no longer define.
Pods from other sources are not looked at. (once itself never removes a
pod; watch does, and down removes the pods of the manifests it is given.)

The arguments are read and checked as once reads them: what once refuses
(an invalid manifest, a conflict, a privileged container without
--allow-privileged) plan refuses.

Exit status: 0 nothing would change, 1 something would, 2 bad input,
3 the Docker Engine cannot be reached.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Paths = args
			switch opts.Output {
			case "text", "json", "yaml":
			default:
				return badInputf("--output %q: want text, json or yaml", opts.Output)
			}
			if opts.Engine == nil {
				opts.Engine = connectAs[baseEngine](g)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return planRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Output, "output", "o", "text", "output format: text, json or yaml")
	f.BoolVar(&opts.AllowPrivileged, "allow-privileged", false, "plan as once --allow-privileged would")
	addExtendedResourceFlag(f, &opts.ExtendedResources)
	addSysctlFlag(f, g)
	return cmd
}

// errChanges is plan's answer "something would change": exit status 1,
// the plan printed says what.
var errChanges = &exitError{code: exitChanges, err: errSilent}

// planRun reads and merges the arguments as once does, refuses what once
// would refuse, and prints what the runner would change (runner.Plan).
func planRun(ctx context.Context, opts *planOptions) error {
	d, err := readMerged(ctx, opts.globalOptions, opts.Paths)
	if err != nil {
		return err
	}
	if _, refused := podUpdates(d.Changes, opts.AllowPrivileged); len(refused) > 0 {
		return badInput(errors.Join(refused...))
	}
	sysctls, err := runner.NewSysctlAllowlist(opts.AllowedUnsafeSysctls)
	if err != nil {
		return badInputf("--allowed-unsafe-sysctls: %v", err)
	}
	// Another node's root dir has none of this node's specs to diff
	// against: say so rather than plan without them.
	if err := opts.checkRootDir(); err != nil {
		return err
	}
	rt, err := opts.Engine(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	owned := func(origin string) bool {
		for _, p := range opts.Paths {
			if source.FromSource(origin, p) {
				return true
			}
		}
		return false
	}
	plans, err := runner.Plan(ctx, rt, opts.RootDir, d.Pods(), owned,
		runner.PlanOptions{ExtendedResources: opts.ExtendedResources, Sysctls: sysctls})
	if err != nil {
		err = fmt.Errorf("list this node's pods: %w", err)
		if errors.Is(err, engine.ErrUnavailable) {
			return unreachable(err)
		}
		return err
	}
	if err := writePlan(opts.Out, opts.Output, plans); err != nil {
		return err
	}
	for _, p := range plans {
		if p.Action != runner.PlanUnchanged {
			return errChanges
		}
	}
	return nil
}

// planActions are the pod actions in the order the summary counts them.
var planActions = []string{runner.PlanCreate, runner.PlanRecreate, runner.PlanUpdate, runner.PlanRemove, runner.PlanRefuse,
	runner.PlanUnchanged}

// planDocument is plan's -o json and yaml.
type planDocument struct {
	Pods []runner.PodPlan `json:"pods"`
	// Summary counts the pods by action, every action named.
	Summary map[string]int `json:"summary"`
	// Changed says whether anything would change (exit status 1).
	Changed bool `json:"changed"`
}

// writePlan prints the plans as text, or as a planDocument in JSON or
// YAML.
func writePlan(w io.Writer, format string, plans []runner.PodPlan) error {
	doc := planDocument{Pods: make([]runner.PodPlan, len(plans)), Summary: map[string]int{}}
	for i, p := range plans {
		// A plan may be read by others (a CI log): a URL without its
		// credentials.
		p.Source = manifest.RedactedSource(p.Source)
		doc.Pods[i] = p
	}
	plans = doc.Pods
	for _, a := range planActions {
		doc.Summary[a] = 0
	}
	for _, p := range plans {
		doc.Summary[p.Action]++
		doc.Changed = doc.Changed || p.Action != runner.PlanUnchanged
	}
	switch format {
	case "json", "yaml":
		out, err := json.MarshalIndent(doc, "", "  ")
		if err == nil && format == "yaml" {
			out, err = yaml.JSONToYAML(out)
		} else {
			out = append(out, '\n')
		}
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	var b strings.Builder
	for _, p := range plans {
		fmt.Fprintf(&b, "pod %s/%s (%s): %s", p.Namespace, p.Name, p.Source, p.Action)
		if p.Reason != "" {
			fmt.Fprintf(&b, ": %s", p.Reason)
		}
		b.WriteString("\n")
		writeDiff(&b, "    ", "sandbox", p.Diff)
		for _, s := range p.Steps {
			switch s.Action {
			case runner.StepStopSandbox:
				fmt.Fprintf(&b, "  stop sandbox: %s\n", s.Reason)
			case runner.StepUpdateResources:
				fmt.Fprintf(&b, "  update resources in place, container %s: %s\n", s.Container, s.Reason)
			default:
				fmt.Fprintf(&b, "  %s container %s: %s\n", s.Action, s.Container, s.Reason)
			}
			writeDiff(&b, "      ", "container", s.Diff)
		}
	}
	var counts []string
	for _, a := range planActions {
		counts = append(counts, fmt.Sprintf("%d %s", doc.Summary[a], a))
	}
	fmt.Fprintf(&b, "plan: %s\n", strings.Join(counts, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}

// maxDiffLines and maxValueRunes keep the text's diff short; -o json has
// it whole.
const (
	maxDiffLines  = 8
	maxValueRunes = 60
)

// writeDiff prints a diff as "field: old -> new" lines under indent.
func writeDiff(b *strings.Builder, indent, what string, d runner.Diff) {
	if d.Unrecorded {
		fmt.Fprintf(b, "%s(which fields changed is not known: no record of the spec the %s was made from is kept: an older podrun made it, or the record was lost)\n", indent, what)
	}
	for i, c := range d.Changes {
		if i == maxDiffLines {
			fmt.Fprintf(b, "%s... and %d more (-o json lists them all)\n", indent, len(d.Changes)-i)
			break
		}
		fmt.Fprintf(b, "%s%s: %s -> %s\n", indent, c.Field, shortValue(c.Old), shortValue(c.New))
	}
}

// shortValue is a JSON value cut to maxValueRunes, "(unset)" when empty.
func shortValue(v json.RawMessage) string {
	if len(v) == 0 {
		return "(unset)"
	}
	return cutRunes(string(v), maxValueRunes)
}
