package manifest

import (
	"bytes"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// document is one YAML or JSON document of a file, with where it starts, so
// that every line reported is a line of the file and not of the document.
type document struct {
	data []byte
	// line is the file line (1-based) of data's first line.
	line int
	// json is set when the document is a JSON value: it is decoded as is,
	// without the YAML conversion, as the kubelet does.
	json bool
}

// splitDocuments cuts a file into its documents at "---" separator lines, the
// way apimachinery's YAML reader does, while keeping each document's first
// line. A separator line may carry content after "---" (say "--- {...}"): the
// marker is blanked and the rest stays in the next document, so columns and
// lines are unchanged. Documents that hold only blanks and comments are
// dropped here: they are empty, not errors.
//
// The documents are copied into one buffer of the file's size (a separator
// blanked is as long as it was): one allocation, not one per line.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 BOM, as some editors write
	var docs []document
	text := make([]byte, 0, len(data))
	cur, start := 0, 1 // where the current document starts in text, and in the file
	flush := func() {
		if doc := text[cur:len(text):len(text)]; !blankYAML(doc) {
			trimmed := bytes.TrimLeft(doc, " \t\r\n")
			docs = append(docs, document{data: doc, line: start, json: len(trimmed) > 0 && trimmed[0] == '{'})
		}
		cur = len(text)
	}
	lineNo := 0
	for line := range bytes.Lines(data) {
		lineNo++
		if isSeparator(line) {
			flush()
			start = lineNo
			text = append(text, "   "...)
			line = line[3:]
		}
		text = append(text, line...)
	}
	flush()
	return docs
}

// isSeparator reports whether line starts a new YAML document: "---" at the
// start of the line, followed by nothing, blanks, a comment or content.
func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := line[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}

// blankYAML reports whether data holds nothing but blanks and comments.
func blankYAML(data []byte) bool {
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// lineOfOffset is the file line of byte offset off in a document.
func (d document) lineOfOffset(off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(d.data)) {
		off = int64(len(d.data))
	}
	return d.line + bytes.Count(d.data[:off], []byte("\n"))
}

// indentedWithTab reports whether the document's line n (1-based) is
// indented with a tab: the most common cause of a baffling YAML error.
func (d document) indentedWithTab(n int) bool {
	lines := bytes.Split(d.data, []byte("\n"))
	if n < 1 || n > len(lines) {
		return false
	}
	indent := lines[n-1][:len(lines[n-1])-len(bytes.TrimLeft(lines[n-1], " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}

// yamlErrorLine picks the line out of a go-yaml error ("yaml: line 3: ...")
// and returns the message without the prefix. go-yaml leaves the line out
// when the problem is on the document's first line, hence 1.
func yamlErrorLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return line, msg
}

// locator finds the file line of a field path in one object. root is the
// object's node (a document's content, or a List item); lines of root are
// document lines, which offset turns into file lines. prefix is prepended to
// the reported field paths ("items[2]" for a List item).
//
// A locator of a parse starts without root: the document's tree is built
// at the first line asked for (attached), which most documents never are.
type locator struct {
	root   *yaml.Node
	offset int
	// line is where the object starts: the answer when root is missing
	// (the YAML tree could not be built) or the path leads nowhere.
	line   int
	prefix string
	// keys indexes the large mappings of the document, shared by the
	// locators of its List items; nil scans every mapping.
	keys keyIndex
	// doc is the document the object is in, which root is built from.
	doc *docRef
}

// field is the path as reported to the user: the prefix and the path.
func (l locator) field(path string) string {
	switch {
	case l.prefix == "":
		return path
	case path == "":
		return l.prefix
	case strings.HasPrefix(path, "["):
		return l.prefix + path
	default:
		return l.prefix + "." + path
	}
}

// child returns a locator for the object at path below l (a List item).
// Without a tree yet, it finds its own when asked (attached).
func (l locator) child(path string) locator {
	if l.root == nil && l.doc != nil {
		return locator{line: l.line, prefix: l.field(path), keys: l.keys, doc: l.doc}
	}
	return locator{root: l.node(path), offset: l.offset, line: l.lineOf(path), prefix: l.field(path), keys: l.keys, doc: l.doc}
}

// node returns the node at path, or nil.
func (l locator) node(path string) *yaml.Node {
	l = l.attached()
	n, _, complete := l.keys.walkPath(l.root, parsePath(path))
	if !complete {
		return nil
	}
	return n
}

// lineOf returns the file line of the field at path. Where the path leads
// past what the document holds (a defaulted field, say), it is the line of
// the deepest part that exists: the user's nearest text.
func (l locator) lineOf(path string) int {
	l = l.attached()
	if l.root == nil {
		return l.line
	}
	_, line, _ := l.keys.walkPath(l.root, parsePath(path))
	if line == 0 {
		return l.line
	}
	return line + l.offset
}

// walkPath follows path from n. It returns the node reached, the line of the
// deepest part found (the key's line for a mapping entry, which is where a
// user looks for a field), and whether the whole path was found. Aliases are
// followed, and merge keys ("<<") searched, as YAML resolves them.
func (ix keyIndex) walkPath(n *yaml.Node, path []string) (*yaml.Node, int, bool) {
	n = resolve(n)
	if n == nil {
		return nil, 0, false
	}
	line := n.Line
	for _, elem := range path {
		switch n.Kind {
		case yaml.MappingNode:
			key, val := ix.mappingEntry(n, elem, 0)
			if val == nil {
				return n, line, false
			}
			line = key.Line
			n = resolve(val)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(elem)
			if err != nil || i < 0 || i >= len(n.Content) {
				return n, line, false
			}
			n = resolve(n.Content[i])
			line = n.Line
		default:
			return n, line, false
		}
	}
	return n, line, true
}

// keyIndex indexes the keys of a document's large mappings, each built on
// its first lookup. Finding the line of every problem by scanning its
// mapping was quadratic: 20k bad label or ConfigMap keys in one mapping
// took seconds. Smaller mappings are scanned, which is as fast and
// allocates nothing. A nil keyIndex scans every mapping.
type keyIndex map[*yaml.Node]*mappingKeys

// indexedMappingSize is the number of entries from which a mapping's keys
// are indexed.
const indexedMappingSize = 32

// mappingKeys is the index of one mapping's Content.
type mappingKeys struct {
	first  map[string]int // a scalar key's first position
	merges []int          // the positions of merge keys ("<<")
}

// keysOf returns the index of mapping m, or nil when m is to be scanned.
func (ix keyIndex) keysOf(m *yaml.Node) *mappingKeys {
	if ix == nil || len(m.Content) < 2*indexedMappingSize {
		return nil
	}
	if k, ok := ix[m]; ok {
		return k
	}
	k := &mappingKeys{first: make(map[string]int, len(m.Content)/2)}
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch key := m.Content[i]; {
		case key.Tag == "!!merge":
			k.merges = append(k.merges, i)
		case key.Kind == yaml.ScalarNode:
			if _, dup := k.first[key.Value]; !dup {
				k.first[key.Value] = i
			}
		}
	}
	ix[m] = k
	return k
}

// mappingEntry finds key name in mapping m, looking through merge keys.
// depth guards against merge cycles in malformed input.
func (ix keyIndex) mappingEntry(m *yaml.Node, name string, depth int) (key, val *yaml.Node) {
	if depth > 16 {
		return nil, nil
	}
	var merges []int
	if keys := ix.keysOf(m); keys != nil {
		if i, ok := keys.first[name]; ok {
			return m.Content[i], m.Content[i+1]
		}
		merges = keys.merges
	} else {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == name && k.Tag != "!!merge" {
				return k, m.Content[i+1]
			}
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Tag == "!!merge" {
				merges = append(merges, i)
			}
		}
	}
	for _, i := range merges {
		merged := resolve(m.Content[i+1])
		sources := []*yaml.Node{merged}
		if merged != nil && merged.Kind == yaml.SequenceNode {
			sources = merged.Content
		}
		for _, s := range sources {
			if s = resolve(s); s != nil && s.Kind == yaml.MappingNode {
				if k, v := ix.mappingEntry(s, name, depth+1); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

// resolve unwraps document and alias nodes.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && i < 16; i++ {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) > 0:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return n
}

// parsePath splits a field path as apimachinery's field.Path and
// sigs.k8s.io/json print it ("spec.containers[0].resources.limits[memory]")
// into its parts: names, indexes and map keys alike, since a mapping is
// searched by key and a sequence by index. Keys in brackets may hold dots.
func parsePath(path string) []string {
	var elems []string
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(elems, path[1:])
			}
			elems = append(elems, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			elems = append(elems, path[:end])
			path = path[end:]
		}
	}
	return elems
}

// duplicateKey is a key given twice in one mapping.
type duplicateKey struct {
	path      string
	line      int // of the second key, in document lines
	firstLine int
}

// walkMappings calls visit with each mapping under n and its path, in
// document order. A merge key's value ("<<") is walked into only when
// intoMerges is set; aliases never are, so each mapping is visited once,
// where it is written.
func walkMappings(n *yaml.Node, path string, intoMerges bool, visit func(m *yaml.Node, path string)) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkMappings(c, path, intoMerges, visit)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walkMappings(c, path+"["+strconv.Itoa(i)+"]", intoMerges, visit)
		}
	case yaml.MappingNode:
		visit(n, path)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Tag != "!!merge" || intoMerges {
				walkMappings(n.Content[i+1], joinPath(path, k.Value), intoMerges, visit)
			}
		}
	}
}

// findDuplicateKeys lists keys that appear twice in one mapping. YAML
// forbids them, and the conversion to JSON would silently keep only one of
// the values: the kind of edit that should not go unnoticed.
func findDuplicateKeys(n *yaml.Node, path string, out *[]duplicateKey) {
	walkMappings(n, path, true, func(m *yaml.Node, path string) {
		seen := make(map[string]int, len(m.Content)/2)
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				continue
			}
			if first, dup := seen[k.Value]; dup {
				*out = append(*out, duplicateKey{path: joinPath(path, k.Value), line: k.Line, firstLine: first})
			} else {
				seen[k.Value] = k.Line
			}
		}
	})
}

// mergeOverride is a key given explicitly in a mapping that also merges
// ("<<") a mapping holding it.
type mergeOverride struct {
	path string
	line int // of the explicit key, in document lines
}

// findMergeOverrides lists the keys that override a merged one. YAML allows
// it (the explicit key wins), and so does the kubelet; kube-apiserver's
// strict decoding does not.
func findMergeOverrides(n *yaml.Node, path string, out *[]mergeOverride) {
	walkMappings(n, path, false, func(m *yaml.Node, path string) {
		merged := map[string]bool{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Tag != "!!merge" {
				continue
			}
			sources := []*yaml.Node{resolve(m.Content[i+1])}
			if sources[0] != nil && sources[0].Kind == yaml.SequenceNode {
				sources = sources[0].Content
			}
			for _, src := range sources {
				if src = resolve(src); src != nil && src.Kind == yaml.MappingNode {
					for j := 0; j+1 < len(src.Content); j += 2 {
						merged[src.Content[j].Value] = true
					}
				}
			}
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := m.Content[i]; k.Tag != "!!merge" && merged[k.Value] {
				*out = append(*out, mergeOverride{path: joinPath(path, k.Value), line: k.Line})
			}
		}
	})
}

// joinPath appends a field name to a path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
