package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Decoding follows the kubelet's file source: YAML is converted to JSON with
// sigs.k8s.io/yaml (YAML 1.1, as the kubelet reads it: `mode: 0644` is octal,
// `yes` is true) and JSON is decoded into the v1 types, case-sensitively.
// An unknown field is dropped, as the kubelet drops it, with a warning (an
// error with Options.Strict); a duplicate field is an error. A go-yaml v3
// node tree of the same document gives every problem its line; it is built
// only for a document that has a problem to place (locator.attached).

// parsing is what the documents of one Parse share, unchanged while they
// are decoded.
type parsing struct {
	display  string // source as shown in messages
	identity string // source as part of pod UIDs and podrun.io/source
	opts     Options
	seen     string // kubernetes.io/config.seen of every pod
}

// parser decodes one document: it collects the document's errors,
// warnings and objects apart from the other documents', so that documents
// are decoded in parallel; assembly adds them to the snapshot in order.
type parser struct {
	*parsing
	errs      ErrorList
	warnings  []string
	documents int // 1 when the document holds a value (Snapshot.Documents)
	// defined are the objects without problems, in order, to be kept
	// unless an earlier document defined their names (assembly.add).
	defined []definition
}

// origin is where an object is defined: its metadata.name; and the
// warnings of its definition.
type origin struct {
	source string
	// line is the line of metadata.name when it was found while parsing
	// (a List item's), else 0.
	line     int
	warnings []string
	// doc is the document that defines the object, and prefix the path
	// to it there ("items[2]" for a List item, else ""): what finds the
	// lines of its fields (FieldAt), its name's among them.
	doc    *docRef
	prefix string
}

// locator finds the lines of the object's fields, in a tree built when
// asked for (attached).
func (o origin) locator() locator {
	return locator{line: o.doc.line, prefix: o.prefix, doc: o.doc}
}

// at is where the object's metadata.name is written.
func (o origin) at() Error {
	return Error{Source: o.source, Line: o.nameLine(), Field: o.locator().field("metadata.name")}
}

func (o origin) String() string {
	return fmt.Sprintf("%s:%d", o.source, o.nameLine())
}

// nameLine is the line of metadata.name. Only a conflict asks, so the line
// is found then (lineOnce), not at every parse; but for a List item, which
// parse found it while the List's tree served all its items.
func (o origin) nameLine() int {
	if o.line > 0 {
		return o.line
	}
	return o.locator().lineOnce("metadata.name")
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
		converted[i] = pathError{path: mapEntryPath(loc, e), message: e.ErrorBody()}
	}
	p.pathErrors(loc, converted)
}

// mapEntryPath is the path of an error, narrowed to one entry where the API
// reports a map (labels, annotations, nodeSelector) as a whole with the bad
// key or value: "metadata.labels[app]" rather than "metadata.labels", so
// that the error points at the entry's line.
func mapEntryPath(loc locator, e *field.Error) string {
	bad, isString := e.BadValue.(string)
	if !isString {
		return e.Field
	}
	if parent, ok := strings.CutSuffix(e.Field, "downwardAPI.path"); ok {
		return downwardAPIItemPath(loc, parent+"downwardAPI", bad, e.Field)
	}
	n := loc.node(e.Field)
	if n == nil {
		return unindexedItemPath(loc, e.Field, bad)
	}
	if n = resolve(n); n.Kind != yaml.MappingNode {
		return e.Field
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], resolve(n.Content[i+1])
		if key.Value == bad || (value != nil && value.Kind == yaml.ScalarNode && value.Value == bad) {
			return e.Field + "[" + key.Value + "]"
		}
	}
	return e.Field
}

// unindexedItemPath is the path of the list item whose field holds bad,
// where the API server names a field of a list's items without the index
// ("spec.containers[0].volumeMounts.subPath").
func unindexedItemPath(loc locator, reported, bad string) string {
	for i := range len(reported) {
		if reported[i] != '.' {
			continue
		}
		list := loc.node(reported[:i])
		if list == nil {
			return reported
		}
		if list = resolve(list); list.Kind != yaml.SequenceNode {
			continue
		}
		for j := range list.Content {
			path := fmt.Sprintf("%s[%d]%s", reported[:i], j, reported[i:])
			if n := loc.node(path); n != nil && resolve(n).Value == bad {
				return path
			}
		}
		return reported
	}
	return reported
}

// downwardAPIItemPath is the path of the item of a downwardAPI volume (or
// projection) whose path is bad: the API server reports a bad item path as
// "<volume>.downwardAPI.path", without the item's index.
func downwardAPIItemPath(loc locator, volume, bad, reported string) string {
	items := loc.node(volume + ".items")
	if items == nil || resolve(items).Kind != yaml.SequenceNode {
		return reported
	}
	for i := range resolve(items).Content {
		path := fmt.Sprintf("%s.items[%d].path", volume, i)
		if n := loc.node(path); n != nil && resolve(n).Value == bad {
			return path
		}
	}
	return reported
}

// warn records warnings, formatted as errors are.
func (p *parser) warn(loc locator, warnings []pathError) {
	for _, e := range p.located(loc, warnings) {
		p.warnings = append(p.warnings, e.Error())
	}
}

// sortByLine orders problems by line, then field and message: the same
// input must give the same report every time (a source compares reports
// from one scan to the next), and validation reports the problems of a map
// (resource limits, labels) in its random iteration order.
func sortByLine(list ErrorList) {
	if len(list) < 2 {
		return // most objects have no problem: nothing to sort, nor to allocate a sort for
	}
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
	ref := newDocRef(doc)
	defer ref.release()
	loc := locator{line: doc.line, keys: keyIndex{}, doc: ref}

	data := doc.data
	// A JSON document's keys are checked in its tree, as they always were.
	checkKeys := doc.json
	if !doc.json {
		converted, mayRepeat, err := p.yamlToJSON(doc.data)
		checkKeys = mayRepeat
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
		at := loc.attached()
		line := at.line
		msg := "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
		if isSyntax, off := sigsjson.SyntaxErrorOffset(err); isSyntax && doc.json {
			line = doc.lineOfOffset(off)
			if at.root != nil {
				msg += " (podrun, as the kubelet, reads a document that starts with '{' as JSON; this one is YAML in flow style: start it with a key)"
			}
		}
		p.errs = append(p.errs, &Error{Source: p.display, Line: line, Message: msg})
		return
	}

	if checkKeys {
		p.keyErrors(loc.attached())
	}

	if obj == nil {
		return // an empty document ("~", "null"): nothing to run
	}
	p.documents++
	m, ok := obj.(map[string]any)
	if !ok {
		p.errorAt(loc, "", fmt.Sprintf("a document must be an object with apiVersion and kind, not a %s", describe(obj)))
		return
	}
	p.object(loc, data, m, "", false, len(p.errs) > before)
	// Report a document's problems in line order, whichever step found them.
	sortByLine(p.errs[before:])
}

// yamlToJSON converts a YAML document to JSON as the kubelet does, and says
// whether its keys are to be checked in its node tree (keyErrors): whether
// it may give a key twice, or with Strict override a merged one. Most
// documents do neither, and no tree is built for them: the strict
// conversion, which fails on a key given twice, vouches for them, except
// where it compares keys otherwise than the tree does (mayHideKeys).
func (p *parser) yamlToJSON(data []byte) (converted []byte, checkKeys bool, err error) {
	converted, err = sigsyaml.YAMLToJSONStrict(data)
	if err == nil {
		return converted, mayHideKeys(data) || p.opts.Strict && bytes.Contains(data, []byte("<<")), nil
	}
	// A key given twice, or not YAML: converted as the kubelet converts
	// it, the tree says which.
	converted, err = sigsyaml.YAMLToJSON(data)
	return converted, true, err
}

// mayHideKeys reports whether a YAML document may give a key that the
// strict conversion compares otherwise than keyErrors: by value, where
// keyErrors compares the text (as its messages name keys). The two agree
// on plain keys (written as they are: not quoted, tagged, anchored or
// explicit), but for a key whose value is NaN, which equals nothing. In
// block style a key is the first thing on its line, after the indentation
// and any "- " of sequences; in flow style it is in braces. The answer
// errs on the safe side: "{" in a quoted value counts.
func mayHideKeys(data []byte) bool {
	if hasFlowMapping(data) {
		return true
	}
	for _, nan := range []string{".nan", ".NaN", ".NAN"} { // as YAML 1.1 writes it
		if bytes.Contains(data, []byte(nan)) {
			return true
		}
	}
	for line := range bytes.Lines(data) {
		line = bytes.TrimLeft(line, " \t")
		for len(line) > 1 && line[0] == '-' && (line[1] == ' ' || line[1] == '\t') {
			line = bytes.TrimLeft(line[1:], " \t")
		}
		if len(line) == 0 {
			continue
		}
		switch line[0] {
		case '!', '&', '?':
			return true
		case '"', '\'':
			if quotedKey(line) {
				return true
			}
		}
	}
	return false
}

// hasFlowMapping reports whether data has a "{" that is not "{}": an empty
// flow mapping (kubeadm writes "status: {}") holds no key.
func hasFlowMapping(data []byte) bool {
	for i := bytes.IndexByte(data, '{'); i >= 0; i = bytes.IndexByte(data, '{') {
		data = bytes.TrimLeft(data[i+1:], " \t")
		if len(data) == 0 || data[0] != '}' {
			return true
		}
	}
	return false
}

// quotedKey reports whether line, which starts with a quoted scalar, may
// be a key: the scalar is followed by ":", or does not end on the line
// (a key does, or YAML refuses it; the parsers decide).
func quotedKey(line []byte) bool {
	quote := line[0]
	for i := 1; i < len(line); i++ {
		switch {
		case quote == '"' && line[i] == '\\':
			i++ // an escaped character
		case line[i] == quote && quote == '\'' && i+1 < len(line) && line[i+1] == '\'':
			i++ // '' is a quote in a single-quoted scalar
		case line[i] == quote:
			rest := bytes.TrimLeft(line[i+1:], " \t")
			return len(rest) > 0 && rest[0] == ':'
		}
	}
	return true
}

// keyErrors reports the keys of a document (loc, attached) given twice in
// one mapping, and with Strict those that override a merged key.
func (p *parser) keyErrors(loc locator) {
	if loc.root == nil {
		return // not YAML: the JSON decoder finds them (decode)
	}
	var dups []duplicateKey
	findDuplicateKeys(loc.root, "", &dups)
	for _, d := range dups {
		p.errs = append(p.errs, &Error{Source: p.display, Line: d.line + loc.offset, Field: d.path,
			Message: fmt.Sprintf("duplicate field (first given at line %d)", d.firstLine+loc.offset)})
	}
	if p.opts.Strict {
		var overrides []mergeOverride
		findMergeOverrides(loc.root, "", &overrides)
		for _, o := range overrides {
			p.errs = append(p.errs, &Error{Source: p.display, Line: o.line + loc.offset, Field: o.path,
				Message: "duplicate field: it overrides the value a merge key (<<) gives it, which YAML and the kubelet allow and kube-apiserver's strict decoding does not (--strict)"})
		}
	}
}

// kindAPIVersions is the apiVersion of each kind podrun reads (a List's
// items each have their own).
var kindAPIVersions = map[string]string{"Pod": "v1", "ConfigMap": "v1", "Secret": "v1",
	"List": "v1", "PodList": "v1", "ConfigMapList": "v1", "SecretList": "v1",
	"RuntimeClass": "node.k8s.io/v1", "RuntimeClassList": "node.k8s.io/v1"}

// object decodes one object: a document or a List item. defaultKind is the
// kind of items of a typed list (PodList); tainted means an error was already
// found in the object's document, so it is checked but not kept.
func (p *parser) object(loc locator, raw []byte, m map[string]any, defaultKind string, inList, tainted bool) {
	kind, kindOK := m["kind"].(string)
	apiVersion, apiOK := m["apiVersion"].(string)
	if kind == "" && defaultKind != "" {
		kind, kindOK = defaultKind, true
		if apiVersion == "" {
			apiVersion, apiOK = kindAPIVersions[kind], true
		}
	}
	switch {
	case !kindOK && m["kind"] != nil:
		p.errorAt(loc, "kind", wrongType("string", m["kind"]))
		return
	case kind == "":
		p.errorAt(loc, "kind", "Required value: podrun, as the kubelet, needs apiVersion and kind in every object (apiVersion: v1, kind: Pod)")
		return
	case !apiOK && m["apiVersion"] != nil:
		p.errorAt(loc, "apiVersion", wrongType("string", m["apiVersion"]))
		return
	case apiVersion == "":
		p.errorAt(loc, "apiVersion", fmt.Sprintf("Required value: podrun, as the kubelet, needs apiVersion and kind in every object (apiVersion: v1, kind: %s)", kind))
		return
	}

	supported := kindAPIVersions
	switch want, known := supported[kind]; {
	case !known:
		msg := fmt.Sprintf("kind %q is not supported: podrun runs Pods, with the ConfigMaps and Secrets they use (apiVersion v1), "+
			"the RuntimeClasses they name (apiVersion node.k8s.io/v1), and Lists of them", kind)
		for known := range supported {
			if strings.EqualFold(known, kind) {
				msg = fmt.Sprintf("kind %q is not supported (did you mean %q?)", kind, known)
			}
		}
		p.errorAt(loc, "kind", msg)
		return
	case apiVersion != want:
		p.errorAt(loc, "apiVersion", fmt.Sprintf("Unsupported value: %q: %s is apiVersion %s", apiVersion, kind, want))
		return
	}

	switch kind {
	case "Pod":
		p.pod(loc, raw, m, tainted)
	case "ConfigMap":
		p.configMap(loc, raw, m, tainted)
	case "Secret":
		p.secret(loc, raw, m, tainted)
	case "RuntimeClass":
		p.runtimeClass(loc, raw, m, tainted)
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
	_, unknown, decoded := p.decode(loc, raw, m, &l)
	if !decoded {
		return
	}
	p.resolveUnknown(loc, unknown, nil)
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

// unknownField is a field the object's type does not have. The kubelet
// drops such a field; podrun drops it too, with a warning, unless Strict.
// sibling is the field it is likely a typo of, when that one is not given.
type unknownField struct {
	pathError
	sibling string
}

// decode decodes raw into the typed object into and reports every problem,
// with paths. It returns the paths of the values that could not be decoded
// (left unset in into, so that the object can still be validated without
// errors that would only echo them), the unknown fields (dropped, for
// resolveUnknown to report once the object is validated), and whether into
// holds the object at all. An object with problems is never kept, but
// checking the rest of it means a user sees every problem in one run.
func (p *parser) decode(loc locator, raw []byte, generic map[string]any, into any) (bad []string, unknown []unknownField, ok bool) {
	opts := []sigsjson.StrictOption{sigsjson.DisallowUnknownFields}
	if loc.doc != nil && loc.doc.json && loc.attached().root == nil {
		// No node tree to find duplicate keys in: let the decoder do it.
		// (JSON converted from YAML has none: they were found before.)
		opts = append(opts, sigsjson.DisallowDuplicateFields)
	}
	t := reflect.TypeOf(into).Elem()
	strictErrs, err := sigsjson.UnmarshalStrict(raw, into, opts...)
	if err != nil {
		errs := typeErrors(t, generic)
		if len(errs) == 0 {
			p.errorAt(loc, "", "cannot decode: "+strings.TrimPrefix(err.Error(), "json: "))
			return nil, nil, false
		}
		var typeErrs []pathError
		for _, e := range errs {
			if strings.HasPrefix(e.message, "unknown field") {
				u := unknownField{pathError: pathError{path: e.path, message: e.message}}
				if e.suggested != "" && valueAt(generic, e.suggested) == nil {
					u.sibling = e.suggested
				}
				unknown = append(unknown, u)
				bad = append(bad, e.path)
				continue
			}
			typeErrs = append(typeErrs, e)
			bad = append(bad, e.path)
			if e.suggested != "" && valueAt(generic, e.suggested) == nil {
				bad = append(bad, e.suggested)
			}
		}
		p.pathErrors(loc, typeErrs)
		// Decode again without the bad values.
		pruned, marshalErr := json.Marshal(pruneValues(generic, bad))
		reflect.ValueOf(into).Elem().SetZero()
		if marshalErr != nil || sigsjson.UnmarshalCaseSensitivePreserveInts(pruned, into) != nil {
			return bad, unknown, false
		}
		return bad, unknown, true
	}
	var errs []pathError
	for _, e := range strictErrs {
		fe, isField := e.(sigsjson.FieldError)
		if !isField {
			errs = append(errs, pathError{message: e.Error()})
			continue
		}
		path := fe.FieldPath()
		if strings.HasPrefix(e.Error(), "duplicate field") {
			errs = append(errs, pathError{path: path, message: "duplicate field"})
			bad = append(bad, path)
			continue
		}
		u := unknownField{pathError: pathError{path: path, message: "unknown field"}}
		if elems := parsePath(path); len(elems) > 0 {
			if parent := typeAt(t, elems[:len(elems)-1]); parent != nil && parent.Kind() == reflect.Struct {
				var suggestion string
				u.message, suggestion = suggestField(elems[len(elems)-1], jsonFields(parent))
				if sibling := strings.TrimSuffix(path, elems[len(elems)-1]) + suggestion; suggestion != "" && valueAt(generic, sibling) == nil {
					u.sibling = sibling
				}
			}
		}
		unknown = append(unknown, u)
	}
	p.pathErrors(loc, errs)
	return bad, unknown, true
}

// resolveUnknown reports the unknown fields of an object whose validation
// errors are errs, and returns errs less those it explains. A typo of a
// field the object then lacks and needs ("imagee" for the required image)
// is an error in place of the lack's: "imagee: unknown field (did you mean
// "image"?)" says it all. Any other unknown field is dropped with a warning,
// as the kubelet drops it, or is an error with Strict.
func (p *parser) resolveUnknown(loc locator, unknown []unknownField, errs field.ErrorList) field.ErrorList {
	var asErrors, asWarnings []pathError
	for _, u := range unknown {
		explains := u.sibling != "" && slices.ContainsFunc(errs, func(e *field.Error) bool { return underAny(e.Field, []string{u.sibling}) })
		switch {
		case explains:
			errs = withoutPaths(errs, []string{u.sibling})
			asErrors = append(asErrors, u.pathError)
		case p.opts.Strict:
			asErrors = append(asErrors, pathError{path: u.path, message: u.message + " (--strict)"})
		default:
			asWarnings = append(asWarnings, pathError{path: u.path, message: u.message + ", ignored"})
		}
	}
	p.pathErrors(loc, asErrors)
	p.warn(loc, asWarnings)
	return errs
}

// pod decodes, defaults, validates and identifies one pod.
func (p *parser) pod(loc locator, raw []byte, m map[string]any, tainted bool) {
	before, warningsBefore := len(p.errs), len(p.warnings)
	pod := &v1.Pod{}
	bad, unknown, decoded := p.decode(loc, raw, m, pod)
	if !decoded {
		return
	}
	refusals := unsupportedFields(podFields(), m)
	refusals = append(refusals, refusedValues(pod)...)
	skip := slices.Clone(bad)
	for _, u := range unknown {
		skip = append(skip, u.path)
	}

	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	SetDefaults(pod)
	pod.Status = v1.PodStatus{} // podrun's to compute, as the API server's on a create
	errs := p.resolveUnknown(loc, unknown, withoutPaths(validatePod(pod, p.opts.NodeName), bad))
	p.fieldErrors(loc, errs)
	// What the API server faults needs no second word from podrun.
	for _, e := range errs {
		skip = append(skip, e.Field)
	}
	p.pathErrors(loc, slices.DeleteFunc(refusals, func(r pathError) bool { return underAny(r.path, skip) }))
	if tainted || len(p.errs) > before {
		return
	}
	p.warn(loc, extendedResourceNotes(pod))
	name := pod.Name
	applyIdentity(pod, p.opts.NodeName, p.identity, p.seen)
	o := p.origin(loc)
	o.warnings = slices.Clone(p.warnings[warningsBefore:])
	p.define(definition{definedName: definedName{"pod", pod.Namespace, pod.Name}, shown: name, obj: pod, origin: o})
}

func (p *parser) origin(loc locator) origin {
	o := origin{source: p.display, doc: loc.doc, prefix: loc.prefix}
	if loc.prefix != "" {
		// Asked later, each item's line would take a parse of the whole
		// List: its document's tree serves all of them now.
		o.line = loc.lineOf("metadata.name")
	}
	return o
}

// define adds an object without problems, to be kept unless its name is
// taken (assembly.add).
func (p *parser) define(d definition) {
	p.defined = append(p.defined, d)
}

func (p *parser) configMap(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	cm := &v1.ConfigMap{}
	bad, unknown, decoded := p.decode(loc, raw, m, cm)
	if !decoded {
		return
	}
	defaultConfigMap(cm)
	p.fieldErrors(loc, p.resolveUnknown(loc, unknown, withoutPaths(validateConfigMap(cm), bad)))
	if tainted || len(p.errs) > before {
		return
	}
	SetConfigSource(cm, SourceKind(p.identity))
	p.define(definition{definedName: definedName{"ConfigMap", cm.Namespace, cm.Name}, shown: cm.Name, obj: cm, origin: p.origin(loc)})
}

func (p *parser) secret(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	s := &v1.Secret{}
	bad, unknown, decoded := p.decode(loc, raw, m, s)
	if !decoded {
		return
	}
	// Validate before merging stringData so that a bad key is reported
	// where it is written.
	p.fieldErrors(loc, p.resolveUnknown(loc, unknown, withoutPaths(validateSecret(s), bad)))
	defaultSecret(s)
	if tainted || len(p.errs) > before {
		return
	}
	SetConfigSource(s, SourceKind(p.identity))
	p.define(definition{definedName: definedName{"Secret", s.Namespace, s.Name}, shown: s.Name, obj: s, origin: p.origin(loc)})
}

func (p *parser) runtimeClass(loc locator, raw []byte, m map[string]any, tainted bool) {
	before := len(p.errs)
	rc := &nodev1.RuntimeClass{}
	bad, unknown, decoded := p.decode(loc, raw, m, rc)
	if !decoded {
		return
	}
	p.fieldErrors(loc, p.resolveUnknown(loc, unknown, withoutPaths(validateRuntimeClass(rc), bad)))
	if tainted || len(p.errs) > before {
		return
	}
	p.define(definition{definedName: definedName{"RuntimeClass", "", rc.Name}, shown: rc.Name, obj: rc, origin: p.origin(loc)})
}
