package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/podrun/podrun/manifest"
)

func checkOutput(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return badInputf("--output %q: want table, json or yaml", format)
}

// writeReport prints pods with their status: a table of one row per
// container, or a v1.PodList as JSON or YAML.
func writeReport(w io.Writer, format string, pods []*v1.Pod) error {
	sorted := append([]*v1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	switch format {
	case "json", "yaml":
		return writeList(w, format, sorted)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tPHASE\tCONTAINER\tSTATE\tRESTARTS\tEXIT CODE")
	// A pod's own message (a pod refused admission, with reason
	// NodePorts, says which port and which pod holds it) is long: it goes
	// under the table.
	var notes []string
	for _, p := range sorted {
		statuses := append(append([]v1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		if p.Status.Message != "" {
			notes = append(notes, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, p.Status.Message))
		}
		if len(statuses) == 0 {
			state := "-"
			if p.Status.Reason != "" {
				state = p.Status.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t%s\t-\t-\n", p.Namespace, p.Name, phase(p), state)
		}
		for i, cs := range statuses {
			name := cs.Name
			if i < len(p.Status.InitContainerStatuses) {
				name += " (init)"
			}
			exit := "-"
			if t := terminated(cs); t != nil {
				exit = strconv.Itoa(int(t.ExitCode))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Namespace, p.Name, phase(p), name, stateText(cs), cs.RestartCount, exit)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

func writeList(w io.Writer, format string, pods []*v1.Pod) error {
	list := &v1.PodList{}
	list.APIVersion, list.Kind = "v1", "List"
	for _, p := range pods {
		cp := p.DeepCopy()
		cp.APIVersion, cp.Kind = "v1", "Pod"
		// Output is shown (a terminal, a CI log): a manifest URL's
		// credentials stay on the node, as in /pods and plan.
		manifest.RedactSourceAnnotation(cp)
		list.Items = append(list.Items, *cp)
	}
	return writeStructured(w, format, list)
}

// writeStructured writes v as indented JSON (format "json") or as YAML,
// the -o json and -o yaml of every command.
func writeStructured(w io.Writer, format string, v any) error {
	var out []byte
	var err error
	if format == "json" {
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

func phase(p *v1.Pod) string {
	if p.Status.Phase == "" {
		return string(v1.PodPending)
	}
	return string(p.Status.Phase)
}

// terminated is the container's last exit: its current state, or the one
// before a restart that is waiting.
func terminated(cs v1.ContainerStatus) *v1.ContainerStateTerminated {
	if cs.State.Terminated != nil {
		return cs.State.Terminated
	}
	if cs.State.Waiting != nil {
		return cs.LastTerminationState.Terminated
	}
	return nil
}

// stateText renders a container state as kubectl does: Running,
// Terminated (Completed), Waiting (CrashLoopBackOff: ...).
func stateText(cs v1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return "Running"
	case cs.State.Terminated != nil:
		return "Terminated (" + cs.State.Terminated.Reason + ")"
	case cs.State.Waiting != nil:
		if cs.State.Waiting.Reason == "" && cs.State.Waiting.Message == "" {
			// Made, not started yet: the kubelet gives it no reason.
			return "Waiting"
		}
		s := "Waiting (" + cs.State.Waiting.Reason
		if m := cs.State.Waiting.Message; m != "" && cs.State.Waiting.Reason != "CrashLoopBackOff" {
			s += ": " + oneLine(m)
		}
		return s + ")"
	}
	return "Unknown"
}

// maxLineRunes is how long oneLine lets a message be.
const maxLineRunes = 120

// oneLine is s on one line, cut to maxLineRunes.
func oneLine(s string) string {
	return cutRunes(strings.ReplaceAll(s, "\n", " "), maxLineRunes)
}

// cutRunes is s cut to n runes (n > 3), the last three "..." when it is
// cut: never inside a UTF-8 character. (A byte that is not UTF-8 counts
// as one rune, and is kept or cut whole.)
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	end := 0
	for range n - 3 {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
	}
	return s[:end] + "..."
}
