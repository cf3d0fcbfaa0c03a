package cmd

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
)

// crossProblem is a finding of the checks between objects
// (runner.CheckPods) placed in the manifests: its file, line and field,
// and its message as the commands say it.
type crossProblem struct {
	runner.Finding
	*manifest.Error
}

// crossCheck runs the checks between objects over what the arguments
// define together (d, merged from updates): host ports two pods ask for,
// references to ConfigMaps, Secrets and keys no argument defines,
// privileged containers without allowPrivileged, runtimeClassNames that
// neither classes (--runtime-class) nor an argument's RuntimeClass
// declares. Each problem is placed at the line of its field in the
// manifest that writes it.
func crossCheck(d *desired, allowPrivileged bool, classes map[string]string) []crossProblem {
	updates := d.Updates
	rc := runner.NewRuntimeClasses(classes)
	rc.Set(d.RuntimeClasses)
	findings := runner.CheckPods(d.Pods(), d.ConfigMaps, d.Secrets, rc, allowPrivileged)
	if len(findings) == 0 {
		return nil
	}
	// The merged pods are copies: the snapshots know their own objects.
	type defined struct {
		snap *manifest.Snapshot
		pod  *v1.Pod
	}
	byUID := map[types.UID]defined{}
	for _, u := range updates {
		for _, p := range u.Snapshot.Pods {
			if _, ok := byUID[p.UID]; !ok {
				byUID[p.UID] = defined{u.Snapshot, p}
			}
		}
	}
	at := func(pod *v1.Pod, field string) manifest.Error {
		if def, ok := byUID[pod.UID]; ok {
			if e, ok := def.snap.FieldAt(def.pod, field); ok {
				return e
			}
		}
		return manifest.Error{Source: d.From(pod), Field: field}
	}
	out := make([]crossProblem, 0, len(findings))
	for _, f := range findings {
		e := at(f.Pod, f.Field)
		msg := f.Text(func(pod *v1.Pod, field string) string { return place(at(pod, field)) })
		switch f.Reason {
		case runner.ReasonNodePorts:
			msg += ", which comes first: once and watch refuse this pod (" + runner.ReasonNodePorts + ")"
		case "CreateContainerConfigError":
			if f.Field == "spec.runtimeClassName" {
				msg += "; once and watch make nothing of the pod: its containers wait (CreateContainerConfigError) " +
					"until it is declared"
				break
			}
			msg += ": once and watch run the pod, but its containers wait (CreateContainerConfigError) " +
				"until it is defined; define it, or make the reference optional"
		}
		e.Message = msg
		out = append(out, crossProblem{Finding: f, Error: &e})
	}
	return out
}

// place renders where a field is: "file:line: field".
func place(e manifest.Error) string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Source, e.Line, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Field)
}

// problemList is the problems as one error list (nil when none).
func problemList(problems []crossProblem) manifest.ErrorList {
	var list manifest.ErrorList
	for _, p := range problems {
		list = append(list, p.Error)
	}
	return list
}
