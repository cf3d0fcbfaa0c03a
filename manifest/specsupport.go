package manifest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// FieldSupport is what podrun does with one field of a Pod: the rows of
// the README's "Pod spec support" table, read from the same tables the
// decoder accepts and refuses by, so that the documentation cannot drift
// from the code.
type FieldSupport struct {
	// Path is the field's path, lists marked [] (spec.containers[].image).
	Path string
	// Support is "supported", "partly" (some fields below, or some values,
	// are refused), "no effect" (validated, accepted, without effect on
	// one machine) or "refused".
	Support string
	// Note says why, or what of it is refused.
	Note string
}

// noEffectReasons say why a field in noEffectPodFields has no effect.
var noEffectReasons = map[string]string{
	"spec.nodeSelector":              "scheduling: the pod is already on its one machine",
	"spec.affinity":                  "scheduling: the pod is already on its one machine",
	"spec.tolerations":               "scheduling: the pod is already on its one machine (podrun taints nothing)",
	"spec.topologySpreadConstraints": "scheduling: one machine is one topology domain",
	"spec.schedulingGates":           "scheduling: a static pod is not scheduled",
	"spec.schedulerName":             "scheduling: a static pod is not scheduled",
	"spec.preemptionPolicy":          "nothing preempts on one machine",
	"spec.enableServiceLinks":        "there are no Services to link",
}

// valueNotes say which values of a supported field podrun refuses, by
// what they are (refusedValues).
func valueNotes() map[string]string {
	resources := fmt.Sprintf("cpu and memory are enforced; %s; %s; refused: hugepages (%s)",
		localStorageNote, extendedNote, unenforcedResource(v1.ResourceHugePagesPrefix+"2Mi", "limits"))
	return map[string]string{
		"spec.containers[].resources":     resources,
		"spec.initContainers[].resources": resources,
		"spec.volumes[].emptyDir":         "sizeLimit: the tmpfs's size with medium: Memory; on disk, " + localStorageNote,
	}
}

// PodSpecSupport lists what podrun does with every field of a PodSpec, of
// a container, of a volume source and of the security contexts.
func PodSpecSupport() []FieldSupport {
	var out []FieldSupport
	expanded := map[string]reflect.Type{
		"spec.containers[]":                     reflect.TypeFor[v1.Container](),
		"spec.initContainers[]":                 reflect.TypeFor[v1.Container](),
		"spec.volumes[]":                        reflect.TypeFor[v1.Volume](),
		"spec.securityContext":                  reflect.TypeFor[v1.PodSecurityContext](),
		"spec.containers[].securityContext":     reflect.TypeFor[v1.SecurityContext](),
		"spec.initContainers[].securityContext": reflect.TypeFor[v1.SecurityContext](),
	}
	var list func(prefix string, t reflect.Type)
	list = func(prefix string, t reflect.Type) {
		fields := jsonFields(t)
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			ft := fields[name]
			path := joinPath(prefix, name) + listMark(ft)
			if sub, ok := expanded[path]; ok {
				list(path, sub)
				continue
			}
			out = append(out, classifyField(path, ft))
		}
	}
	list("spec", reflect.TypeFor[v1.PodSpec]())
	return out
}

// PodSpecSupportMarkdown is PodSpecSupport as the README's table.
func PodSpecSupportMarkdown() string {
	var b strings.Builder
	b.WriteString("| Field | podrun | Why, or what is refused |\n|---|---|---|\n")
	for _, f := range PodSpecSupport() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", strings.TrimSuffix(f.Path, "[]"), f.Support,
			strings.ReplaceAll(f.Note, "|", `\|`))
	}
	return b.String()
}

// classifyField decides a field's row from the accepted-fields tree: the
// no-effect list, the refusal reasons, and the value refusals.
func classifyField(path string, t reflect.Type) FieldSupport {
	fs := FieldSupport{Path: path}
	if r, ok := noEffectReasons[strings.TrimSuffix(path, "[]")]; ok {
		fs.Support, fs.Note = "no effect", r
		return fs
	}
	n := podFields().lookup(path)
	if n == nil {
		fs.Support, fs.Note = "refused", refusalReason(path)
		return fs
	}
	var refused, restricted []string
	if strings.HasSuffix(path, "[]") {
		// n is already the list's element: walk the element's type.
		t = elemType(t).Elem()
	}
	collectRefused(n, path, t, &refused, &restricted, 0)
	notes := []string{}
	if note := valueNotes()[path]; note != "" {
		notes = append(notes, note)
	}
	if n.values != nil {
		notes = append(notes, fmt.Sprintf("only %s (otherwise: %s)", strings.Join(n.values, ", "), refusalReason(path)))
	}
	for _, p := range restricted {
		field, values, _ := strings.Cut(p, "=")
		notes = append(notes, fmt.Sprintf("`%s`: only %s (or unset)", strings.TrimPrefix(field, path+"."), strings.ReplaceAll(values, "|", ", ")))
	}
	if len(refused) > 0 {
		var parts []string
		for _, p := range refused {
			parts = append(parts, fmt.Sprintf("`%s` (%s)", strings.TrimPrefix(p, path+"."), refusalReason(p)))
		}
		notes = append(notes, "refused: "+strings.Join(parts, "; "))
	}
	fs.Support = "supported"
	if len(notes) > 0 {
		fs.Support, fs.Note = "partly", strings.Join(notes, "; ")
	}
	return fs
}

// collectRefused appends the paths below n (of type t) that podrun
// refuses to refused, and those it accepts only some values of to
// restricted ("path=A|B").
func collectRefused(n *fieldTree, path string, t reflect.Type, refused, restricted *[]string, depth int) {
	if n.anything || len(n.children) == 0 || depth > 8 {
		return
	}
	t = elemType(t)
	if t.Kind() == reflect.Slice {
		if c := n.children["[]"]; c != nil {
			collectRefused(c, path+"[]", t.Elem(), refused, restricted, depth+1)
		}
		return
	}
	if t.Kind() != reflect.Struct {
		return
	}
	fields := jsonFields(t)
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		p := joinPath(path, name)
		c := n.children[name]
		switch {
		case c == nil:
			*refused = append(*refused, p)
		case c.values != nil:
			*restricted = append(*restricted, p+"="+strings.Join(c.values, "|"))
		default:
			collectRefused(c, p, fields[name], refused, restricted, depth+1)
		}
	}
}

// lookup finds the tree node of a path ("spec.containers[].image").
func (t *fieldTree) lookup(path string) *fieldTree {
	n := t
	for _, elem := range strings.Split(strings.ReplaceAll(path, "[]", ".[]"), ".") {
		if n.anything {
			return n
		}
		c := n.children[elem]
		if c == nil {
			return nil
		}
		n = c
	}
	return n
}

func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func listMark(t reflect.Type) string {
	if elemType(t).Kind() == reflect.Slice && elemType(t).Elem().Kind() == reflect.Struct {
		return "[]"
	}
	return ""
}
