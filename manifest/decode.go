package manifest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Decoding follows the kubelet's file source: YAML is converted to JSON with
// sigs.k8s.io/yaml (YAML 1.1, as the kubelet reads it: `mode: 0644` is octal,
// `yes` is true) and JSON is decoded into the v1 types, case-sensitively and
// strictly (unknown and duplicate fields are errors, where the kubelet drops
// them). A go-yaml v3 node tree of the same document gives every problem its
// line.

// parser collects the objects, errors and warnings of one Parse.
type parser struct {
	display  string // source as shown in messages
	identity string // source as part of pod UIDs and podrun.io/source
	opts     Options
	seen     time.Time
	snap     *Snapshot
	errs     ErrorList
	fields   *fieldTree // supportedPodFields, built on first use
}

// origin is where an object is defined: the line of its metadata.name.
type origin struct {
	source string
	line   int
	field  string
	// loc finds the lines of the object's other fields (FieldAt).
	loc locator
}

func (o origin) String() string {
	return fmt.Sprintf("%s:%d", o.source, o.line)
}

func (p *parser) errorAt(loc locator, path, msg string) {
	p.errs = append(p.errs, &Error{Source: p.display, Line: loc.lineOf(path), Field: loc.field(path), Message: msg})
}

// located places problems of one object at their lines, in line order.
func (p *parser) located(loc locator, errs []pathError) ErrorList {
	list := make(ErrorList, 0, len(errs))
	for _, e := range errs {
		list = append(list, &Error{Source: p.display, Line: loc.lineOf(e.path), Field: loc.field(e.path), Message: e.message})
	}
	sortByLine(list)
	return list
}

func (p *parser) pathErrors(loc locator, errs []pathError) {
	p.errs = append(p.errs, p.located(loc, errs)...)
}

// fieldErrors reports apimachinery validation errors.
func (p *parser) fieldErrors(loc locator, errs field.ErrorList) {
	converted := make([]pathError, len(errs))
	for i, e := range errs {
		converted[i] = pathError{path: e.Field, message: e.ErrorBody()}
	}
	p.pathErrors(loc, converted)
}

// warn records warnings, formatted as errors are.
func (p *parser) warn(loc locator, warnings []pathError) {
	for _, e := range p.located(loc, warnings) {
		p.snap.Warnings = append(p.snap.Warnings, e.Error())
	}
}

// sortByLine orders problems by line, then field and message: the same
// input must give the same report every time (a source compares reports
// from one scan to the next), and validation reports the problems of a map
// (resource limits, labels) in its random iteration order.
func sortByLine(list ErrorList) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
}

// document decodes one document and adds what it defines to the snapshot.
func (p *parser) document(doc document) {
	before := len(p.errs)
	loc := locator{line: doc.line, doc: newDocRef(doc)}
	var root yaml.Node
	if err := yaml.Unmarshal(doc.data, &root); err == nil && root.Kind != 0 {
		loc.root = &root
		loc.offset = doc.line - 1
		if c := resolve(&root); c != nil && c.Line > 0 {
			loc.line = c.Line + loc.offset
		}
	}

	data := doc.data
	if !doc.json {
		converted, err := sigsyaml.YAMLToJSON(doc.data)
		if err != nil {
			line, msg := yamlErrorLine(err)
			if doc.indentedWithTab(line) {
				msg += " (indent with spaces: YAML does not allow tabs)"
			}
			p.errs = append(p.errs, &Error{Source: p.display, Line: doc.line + line - 1, Message: "invalid YAML: " + msg})
			return
		}
		data = converted
	}
	var obj any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &obj); err != nil {
		// Only JSON written by a person can be malformed here.
		line := loc.line
		if isSyntax, off := sigsjson.SyntaxErrorOffset(err); isSyntax && doc.json {
			line = doc.lineOfOffset(off)
		}
		p.errs = append(p.errs, &Error{Source: p.display, Line: line,
			Message: "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")})
		return
	}

	if loc.root != nil {
		var dups []duplicateKey
		findDuplicateKeys(loc.root, "", &dups)
		for _, d := range dups {
			p.errs = append(p.errs, &Error{Source: p.display, Line: d.line + loc.offset, Field: d.path,
				Message: fmt.Sprintf("duplicate field (first given at line %d)", d.firstLine+loc.offset)})
		}
	}

	if obj == nil {
		return // an empty document ("~", "null"): nothing to run
	}
	p.snap.documents++
	m, ok := obj.(map[string]any)
	if !ok {
		p.errorAt(loc, "", fmt.Sprintf("a document must be an object with apiVersion and kind, not a %s", describe(obj)))
		return
	}
	p.object(loc, data, m, "", false, len(p.errs) > before)
	// Report a document's problems in line order, whichever step found them.
	sortByLine(p.errs[before:])
}

// object decodes one object: a document or a List item. defaultKind is the
// kind of items of a typed list (PodList); tainted means an error was already
// found in the object's document, so it is checked but not kept.
func (p *parser) object(loc locator, raw []byte, m map[string]any, defaultKind string, inList, tainted bool) {
	kind, kindOK := m["kind"].(string)
	apiVersion, apiOK := m["apiVersion"].(string)
	if kind == "" && defaultKind != "" {
		kind, kindOK = defaultKind, true
		if apiVersion == "" {
			apiVersion, apiOK = "v1", true
		}
	}
	switch {
	case !kindOK && m["kind"] != nil:
		p.errorAt(loc, "kind", wrongType("string", m["kind"]))
		return
	case kind == "":
		p.errorAt(loc, "kind", "Required value: every object needs apiVersion and kind (apiVersion: v1, kind: Pod)")
		return
	case !apiOK && m["apiVersion"] != nil:
		p.errorAt(loc, "apiVersion", wrongType("string", m["apiVersion"]))
		return
	case apiVersion == "":
		p.errorAt(loc, "apiVersion", fmt.Sprintf("Required value: every object needs apiVersion and kind (apiVersion: v1, kind: %s)", kind))
		return
	}

	supported := map[string]bool{"Pod": true, "ConfigMap": true, "Secret": true,
		"List": true, "PodList": true, "ConfigMapList": true, "SecretList": true}
	switch {
	case !supported[kind]:
		msg := fmt.Sprintf("kind %q is not supported: podrun runs Pods, with the ConfigMaps and Secrets they use (apiVersion v1), and Lists of them", kind)
		for known := range supported {
			if strings.EqualFold(known, kind) {
				msg = fmt.Sprintf("kind %q is not supported (did you mean %q?)", kind, known)
			}
		}
		p.errorAt(loc, "kind", msg)
		return
	case apiVersion != "v1":
		p.errorAt(loc, "apiVersion", fmt.Sprintf("Unsupported value: %q: %s is apiVersion v1", apiVersion, kind))
		return
	}

	switch kind {
	case "Pod":
		p.pod(loc, raw, m, tainted)
	case "ConfigMap":
		p.configMap(loc, raw, m, tainted)
	case "Secret":
		p.secret(loc, raw, m, tainted)
	default:
		if inList {
			p.errorAt(loc, "kind", "a List may not hold another List")
			return
		}
		p.list(loc, raw, m, strings.TrimSuffix(kind, "List"), tainted)
	}
}

// list decodes a List (or PodList, ...) and each of its items, reporting an
// item's problems at the item's lines with paths such as items[2].spec.
// itemKind is the kind items of a typed list may leave out ("" for List).
// An explicitly empty List is valid and yields nothing.
func (p *parser) list(loc locator, raw []byte, m map[string]any, itemKind string, tainted bool) {
	before := len(p.errs)
	var l struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []json.RawMessage `json:"items"`
	}
	if _, decoded := p.decodeStrict(loc, raw, m, &l); !decoded {
		return
	}
	tainted = tainted || len(p.errs) > before
	generic, _ := m["items"].([]any)
	for i, item := range l.Items {
		path := fmt.Sprintf("items[%d]", i)
		itemLoc := loc.child(path)
		var im map[string]any
		if i < len(generic) {
			im, _ = generic[i].(map[string]any)
		}
		if im == nil {
			p.errorAt(loc, path, "a list item must be an object with apiVersion and kind")
			continue
		}
		p.object(itemLoc, item, im, itemKind, true, tainted)
	}
}

// decodeStrict decodes raw into the typed object into and reports every
// problem, with paths. It returns the paths of the values that could not be
// decoded (left unset in into, so that the object can still be validated
// without errors that would only echo them) and whether into holds the
// object at all. An object with problems is never kept, but checking the
// rest of it means a user sees every problem in one run.
func (p *parser) decodeStrict(loc locator, raw []byte, generic map[string]any, into any) (bad []string, ok bool) {
	opts := []sigsjson.StrictOption{sigsjson.DisallowUnknownFields}
	if loc.root == nil {
		// No node tree to find duplicate keys in: let the decoder do it.
		opts = append(opts, sigsjson.DisallowDuplicateFields)
	}
	t := reflect.TypeOf(into).Elem()
	strictErrs, err := sigsjson.UnmarshalStrict(raw, into, opts...)
	if err != nil {
		errs := typeErrors(t, generic)
		if len(errs) == 0 {
			p.errorAt(loc, "", "cannot decode: "+strings.TrimPrefix(err.Error(), "json: "))
			return nil, false
		}
		p.pathErrors(loc, errs)
		for _, e := range errs {
			bad = append(bad, e.path)
			if e.suggested != "" && valueAt(generic, e.suggested) == nil {
				bad = append(bad, e.suggested)
			}
		}
		// Decode again without the bad values.
		pruned, marshalErr := json.Marshal(pruneValues(generic, bad))
		reflect.ValueOf(into).Elem().SetZero()
		if marshalErr != nil || sigsjson.UnmarshalCaseSensitivePreserveInts(pruned, into) != nil {
			return bad, false
		}
		return bad, true
	}
	errs := make([]pathError, 0, len(strictErrs))
	for _, e := range strictErrs {
		fe, isField := e.(sigsjson.FieldError)
		if !isField {
			errs = append(errs, pathError{message: e.Error()})
			continue
		}
		path := fe.FieldPath()
		msg := "unknown field"
		if strings.HasPrefix(e.Error(), "duplicate field") {
			msg = "duplicate field"
		} else if elems := parsePath(path); len(elems) > 0 {
			if parent := typeAt(t, elems[:len(elems)-1]); parent != nil && parent.Kind() == reflect.Struct {
				var suggestion string
				msg, suggestion = unknownField(elems[len(elems)-1], jsonFields(parent))
				// "imagee: unknown field (did you mean image?)" says it all:
				// the missing image is not worth an error of its own.
				if sibling := strings.TrimSuffix(path, elems[len(elems)-1]) + suggestion; suggestion != "" && valueAt(generic, sibling) == nil {
					bad = append(bad, sibling)
				}
			}
		}
		errs = append(errs, pathError{path: path, message: msg})
		bad = append(bad, path)
	}
	p.pathErrors(loc, errs)
	return bad, true
}

// pod decodes, defaults, validates and identifies one pod.
func (p *parser) pod(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	pod := &v1.Pod{}
	bad, decoded := p.decodeStrict(loc, raw, m, pod)
	if !decoded {
		return
	}
	if p.fields == nil {
		p.fields = newFieldTree(supportedPodFields())
	}
	var unsupported []pathError
	unsupportedFields(p.fields, m, "", &unsupported)
	p.warn(loc, slices.DeleteFunc(unsupported, func(u pathError) bool { return underAny(u.path, bad) }))

	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	SetDefaults(pod)
	pod.Status = v1.PodStatus{} // podrun's to compute; warned about if given
	p.fieldErrors(loc, withoutPaths(validatePod(pod, p.opts.NodeName), bad))
	if tainted || len(p.errs) > before {
		return
	}
	name := pod.Name
	applyIdentity(pod, p.opts.NodeName, p.identity, p.seen)
	for _, other := range p.snap.Pods {
		if other.Namespace == pod.Namespace && other.Name == pod.Name {
			p.errorAt(loc, "metadata.name", fmt.Sprintf("pod %s/%s conflicts with the pod defined at %s; the first one is kept",
				pod.Namespace, name, p.snap.origins[other]))
			return
		}
	}
	p.snap.Pods = append(p.snap.Pods, pod)
	p.snap.origins[pod] = p.origin(loc)
}

func (p *parser) origin(loc locator) origin {
	return origin{source: p.display, line: loc.lineOf("metadata.name"), field: loc.field("metadata.name"), loc: loc.detached()}
}

func (p *parser) configMap(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	cm := &v1.ConfigMap{}
	bad, decoded := p.decodeStrict(loc, raw, m, cm)
	if !decoded {
		return
	}
	defaultConfigMap(cm)
	p.fieldErrors(loc, withoutPaths(validateConfigMap(cm), bad))
	if tainted || len(p.errs) > before {
		return
	}
	for _, other := range p.snap.ConfigMaps {
		if other.Namespace == cm.Namespace && other.Name == cm.Name {
			p.errorAt(loc, "metadata.name", fmt.Sprintf("ConfigMap %s/%s conflicts with the ConfigMap defined at %s; the first one is kept",
				cm.Namespace, cm.Name, p.snap.origins[other]))
			return
		}
	}
	p.snap.ConfigMaps = append(p.snap.ConfigMaps, cm)
	p.snap.origins[cm] = p.origin(loc)
}

func (p *parser) secret(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	s := &v1.Secret{}
	bad, decoded := p.decodeStrict(loc, raw, m, s)
	if !decoded {
		return
	}
	// Validate before merging stringData so that a bad key is reported
	// where it is written.
	p.fieldErrors(loc, withoutPaths(validateSecret(s), bad))
	defaultSecret(s)
	if tainted || len(p.errs) > before {
		return
	}
	for _, other := range p.snap.Secrets {
		if other.Namespace == s.Namespace && other.Name == s.Name {
			p.errorAt(loc, "metadata.name", fmt.Sprintf("Secret %s/%s conflicts with the Secret defined at %s; the first one is kept",
				s.Namespace, s.Name, p.snap.origins[other]))
			return
		}
	}
	p.snap.Secrets = append(p.snap.Secrets, s)
	p.snap.origins[s] = p.origin(loc)
}
