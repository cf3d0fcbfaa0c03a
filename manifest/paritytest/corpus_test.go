package paritytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// The corpus is text, not Go structs: what the apiserver and podrun both
// decode is the same bytes, so unknown fields, wrong types, duplicate keys
// and YAML quirks can be in it. It is generated: a few base pods, each
// valid for the apiserver, and single-point mutations of them, each
// changing one field (Case.Field) to a value that is invalid, on a
// boundary, or valid but refused by podrun by design.

// Case is one manifest of the corpus.
type Case struct {
	// Name is short and unique: <area>/<what>, e.g. "meta/name-upper".
	Name string
	// Base is the base pod the case mutates ("" for a base or raw text).
	Base string
	// Field is the field the case changes, as the apiserver names it
	// (spec.containers[0].name), or "" for the document as a whole; Also
	// are the other fields a mutation changes to get there.
	Field string
	Also  []string
	// Body is the manifest; JSON says whether it is JSON (else YAML).
	Body []byte
	JSON bool
}

// M and L are a document's objects and lists, as encoding/json decodes
// them (numbers as json.Number, so that none is rounded).
type (
	M = map[string]any
	L = []any
)

// edit changes a document in place.
type edit struct {
	path  string // the field it changes
	apply func(doc M)
}

// set sets the value at path, making the objects on the way; an index
// one past a list's end appends.
func set(path string, v any) edit {
	return edit{path: path, apply: func(doc M) { setPath(doc, parsePath(path), v) }}
}

// del removes the value at path (an object key or a list item).
func del(path string) edit {
	return edit{path: path, apply: func(doc M) { delPath(doc, parsePath(path)) }}
}

// mapKey is a map key in a path, written ["..."]: a label, an
// annotation, a resource name.
type mapKey string

// parsePath splits "spec.containers[0].env" and
// `metadata.labels["example.com/app"]` into field names (string), map
// keys (mapKey) and indexes (int).
func parsePath(p string) []any {
	var out []any
	for i := 0; i < len(p); {
		switch {
		case p[i] == '.':
			i++
		case strings.HasPrefix(p[i:], `["`):
			end := strings.Index(p[i:], `"]`)
			out = append(out, mapKey(p[i+2:i+end]))
			i += end + 2
		case p[i] == '[':
			end := strings.IndexByte(p[i:], ']')
			n, err := strconv.Atoi(p[i+1 : i+end])
			if err != nil {
				panic(fmt.Sprintf("path %q: bad index", p))
			}
			out = append(out, n)
			i += end + 1
		default:
			end := strings.IndexAny(p[i:], ".[")
			if end < 0 {
				end = len(p) - i
			}
			out = append(out, p[i:i+end])
			i += end
		}
	}
	return out
}

// fieldName writes a path as the apiserver names fields:
// metadata.labels[example.com/app].
func fieldName(p string) string {
	var b strings.Builder
	for _, elem := range parsePath(p) {
		switch e := elem.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		case mapKey:
			fmt.Fprintf(&b, "[%s]", string(e))
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e)
		}
	}
	return b.String()
}

func setPath(doc M, path []any, v any) {
	var cur any = doc
	for i, elem := range path {
		if k, isKey := elem.(mapKey); isKey {
			elem = string(k)
		}
		last := i == len(path)-1
		switch e := elem.(type) {
		case string:
			m := cur.(M)
			if last {
				m[e] = v
				return
			}
			if m[e] == nil {
				if _, isIndex := path[i+1].(int); isIndex {
					m[e] = L{}
				} else {
					m[e] = M{}
				}
			}
			if l, isList := m[e].(L); isList {
				if n := path[i+1].(int); n == len(l) {
					m[e] = append(l, nil)
				}
			}
			cur = m[e]
		case int:
			l := cur.(L)
			if last {
				l[e] = v
				return
			}
			if l[e] == nil {
				l[e] = M{}
			}
			cur = l[e]
		}
	}
}

func delPath(doc M, path []any) {
	var parent any = doc
	for _, elem := range path[:len(path)-1] {
		if k, isKey := elem.(mapKey); isKey {
			elem = string(k)
		}
		switch e := elem.(type) {
		case string:
			parent = parent.(M)[e]
		case int:
			parent = parent.(L)[e]
		}
	}
	switch e := path[len(path)-1].(type) {
	case mapKey:
		delete(parent.(M), string(e))
	case string:
		delete(parent.(M), e)
	case int:
		// Lists are reached through their parent: rebuild it there.
		parentPath := path[:len(path)-1]
		l := parent.(L)
		setPath(doc, parentPath, slices.Delete(slices.Clone(l), e, e+1))
	}
}

// decode reads YAML or JSON into a document.
func decode(text string) M {
	j, err := sigsyaml.YAMLToJSON([]byte(text))
	if err != nil {
		panic(err)
	}
	return decodeJSON(j)
}

func decodeJSON(j []byte) M {
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var doc M
	if err := d.Decode(&doc); err != nil {
		panic(err)
	}
	return doc
}

func clone(doc M) M {
	j, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return decodeJSON(j)
}

func toYAML(doc M) []byte {
	y, err := sigsyaml.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return y
}

func toJSON(doc M) []byte {
	j, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(j, '\n')
}

// forEach calls f for each entry of m in the order of the keys, so that
// the corpus is the same every time.
func forEach(m map[string]any, f func(name string, value any)) {
	for _, k := range sortedKeys(m) {
		f(k, m[k])
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// corpusBuilder collects cases and refuses a name given twice.
type corpusBuilder struct {
	bases map[string]M
	cases []Case
	names map[string]bool
}

func newCorpusBuilder() *corpusBuilder {
	return &corpusBuilder{bases: map[string]M{}, names: map[string]bool{}}
}

func (b *corpusBuilder) add(c Case) {
	if b.names[c.Name] {
		panic("corpus: case " + c.Name + " given twice")
	}
	b.names[c.Name] = true
	b.cases = append(b.cases, c)
}

// base records a base pod and adds it, as YAML and as JSON, to the corpus
// ("base/<name>", "base/<name>.json").
func (b *corpusBuilder) base(name, text string) {
	doc := decode(text)
	b.bases[name] = doc
	b.add(Case{Name: "base/" + name, Body: toYAML(doc)})
	b.add(Case{Name: "base/" + name + ".json", Body: toJSON(doc), JSON: true})
}

// mut adds a mutation of base: the edits applied in order; the case's
// field is the first edit's.
func (b *corpusBuilder) mut(name, base string, edits ...edit) {
	b.mutAs(name, base, false, edits...)
}

// mutJSON is mut written as JSON.
func (b *corpusBuilder) mutJSON(name, base string, edits ...edit) {
	b.mutAs(name, base, true, edits...)
}

func (b *corpusBuilder) mutAs(name, base string, asJSON bool, edits ...edit) {
	src, ok := b.bases[base]
	if !ok {
		panic("corpus: no base " + base)
	}
	doc := clone(src)
	for _, e := range edits {
		e.apply(doc)
	}
	c := Case{Name: name, Base: base, Field: fieldName(edits[0].path), JSON: asJSON}
	for _, e := range edits[1:] {
		c.Also = append(c.Also, fieldName(e.path))
	}
	if asJSON {
		c.Body = toJSON(doc)
	} else {
		c.Body = toYAML(doc)
	}
	b.add(c)
}

// text adds a case written by hand, for what a document cannot hold.
func (b *corpusBuilder) text(name, field string, asJSON bool, body string) {
	b.add(Case{Name: name, Field: field, Body: []byte(body), JSON: asJSON})
}

// corpus is the whole corpus, in a fixed order, built once per test
// binary (the tests only read it).
var corpus = sync.OnceValue(buildCorpus)

func buildCorpus() []Case {
	b := newCorpusBuilder()
	addBases(b)
	addMetadataCases(b)
	addPodSpecCases(b)
	addSchedulingCases(b)
	addContainerCases(b)
	addProbeAndHookCases(b)
	addResourceCases(b)
	addSecurityCases(b)
	addVolumeCases(b)
	addFieldCases(b)
	addTextCases(b)
	return b.cases
}

// TestCorpusIsWellFormed checks the corpus itself, without an apiserver:
// names are unique and short, every case has a body, and every mutation
// changes its base.
func TestCorpusIsWellFormed(t *testing.T) {
	cases := corpus()
	if len(cases) < 300 {
		t.Errorf("the corpus has %d cases, want several hundred", len(cases))
	}
	bodies := map[string]string{}
	for _, c := range cases {
		if len(c.Name) > 48 || strings.ContainsAny(c.Name, " |`") {
			t.Errorf("case name %q: keep it short, without spaces, | or `", c.Name)
		}
		if len(c.Body) == 0 {
			t.Errorf("%s: empty body", c.Name)
		}
		key := fmt.Sprint(c.JSON) + string(c.Body)
		if other, dup := bodies[key]; dup {
			t.Errorf("%s: the same manifest as %s", c.Name, other)
		}
		bodies[key] = c.Name
	}
}

// TestCorpusCoversEveryField checks that every field of every type a Pod
// holds (metadata and spec; an ephemeral container's fields are a
// container's) is set in at least one case, so that a field Kubernetes
// validates cannot be missing from the corpus.
func TestCorpusCoversEveryField(t *testing.T) {
	pod := reflect.TypeOf(v1.Pod{})
	all := map[string]bool{}
	typeFields(pod, all, map[reflect.Type]bool{reflect.TypeOf(v1.PodStatus{}): true})
	covered := map[string]bool{}
	for _, c := range corpus() {
		var doc any
		if err := sigsyaml.Unmarshal(c.Body, &doc); err == nil {
			markFields(pod, doc, covered)
		}
	}
	var missing []string
	for _, f := range sortedKeys(all) {
		if !covered[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of the %d fields of a Pod are in no case of the corpus:\n%s", len(missing), len(all), strings.Join(missing, "\n"))
	}
}

// typeName names a struct type for coverage: an ephemeral container's
// common part is a container.
func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(v1.EphemeralContainerCommon{}) {
		return "Container"
	}
	return t.Name()
}

// opaque types are values, not objects with fields.
func opaque(t reflect.Type) bool {
	switch t.Name() {
	case "Quantity", "Time", "MicroTime", "IntOrString", "FieldsV1":
		return true
	}
	return false
}

// typeFields adds "Type.jsonField" for every field of every struct type
// reachable from t, except those in skip.
func typeFields(t reflect.Type, out map[string]bool, skip map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || skip[t] || opaque(t) {
		return
	}
	skip[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous:
			typeFields(f.Type, out, skip)
			continue
		}
		out[typeName(t)+"."+name] = true
		typeFields(f.Type, out, skip)
	}
}

// markFields walks a decoded document beside its type and adds
// "Type.jsonField" for every field it sets.
func markFields(t reflect.Type, v any, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if l, ok := v.([]any); ok {
			for _, x := range l {
				markFields(t.Elem(), x, out)
			}
		}
		return
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for _, x := range m {
				markFields(t.Elem(), x, out)
			}
		}
		return
	case reflect.Struct:
	default:
		return
	}
	m, ok := v.(map[string]any)
	if !ok || opaque(t) {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && f.Anonymous {
			markFields(f.Type, v, out)
			continue
		}
		if x, ok := m[name]; ok {
			out[typeName(t)+"."+name] = true
			markFields(f.Type, x, out)
		}
	}
}
