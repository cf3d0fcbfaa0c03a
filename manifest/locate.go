package manifest

import (
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// docRef is a document as its objects' locators know it: its text, and its
// node tree once a line is asked for. Most documents are never asked (a
// line is for a problem, a warning or FieldAt), and a tree costs many
// times the text and a third of a parse's time: it is built at the first
// question and kept, by a parse until the document is done (release), by
// a snapshot for FieldAt's next questions.
type docRef struct {
	document
	once sync.Once
	root *yaml.Node // nil when the text is not YAML (then every line is the object's)
}

func newDocRef(d document) *docRef { return &docRef{document: d} }

// tree returns the document's node tree, built once.
func (d *docRef) tree() *yaml.Node {
	d.once.Do(func() {
		var root yaml.Node
		if err := yaml.Unmarshal(d.data, &root); err == nil && root.Kind != 0 {
			d.root = &root
		}
	})
	return d.root
}

// release drops the tree a parse built, once the document is parsed: a
// snapshot keeps the text (FieldAt builds the tree again if asked). The
// parse is the document's only user until then.
func (d *docRef) release() {
	d.once, d.root = sync.Once{}, nil
}

// attached returns l with its node tree: the document's, or for a List
// item the item's (l.prefix, "items[2]", leads to it from the document).
// Without a tree (the text is not YAML, or the item is not in it) l is
// returned as it is: every line is then the object's.
func (l locator) attached() locator {
	if l.root != nil || l.doc == nil {
		return l
	}
	root := l.doc.tree()
	if root == nil {
		return l
	}
	doc := locator{root: root, offset: l.doc.line - 1, line: l.doc.line, keys: l.keys, doc: l.doc}
	if c := resolve(root); c != nil && c.Line > 0 {
		doc.line = c.Line + doc.offset
	}
	if l.prefix == "" {
		return doc
	}
	return doc.child(l.prefix)
}

// lineOnce is lineOf for an origin's locator, where the tree is not worth
// keeping: the line of a definition another one conflicts with. The
// document is parsed again for the answer, and that tree dropped with it.
func (l locator) lineOnce(path string) int {
	if l.root == nil && l.doc != nil {
		l.doc = newDocRef(l.doc.document)
	}
	return l.lineOf(path)
}

// FieldAt returns where a field of obj (a Pod, ConfigMap or Secret of this
// snapshot) is written, as a problem without a message: the source, the
// line of the field, and its path as podrun reports paths (a List item's
// with its "items[i]." prefix). A field the manifest does not write (one
// defaulted, say) is placed at the nearest part of its path that it does.
// ok is false when obj is not an object of this snapshot.
//
// It is for reporting problems found after decoding, such as those
// between objects: the first call for a document parses it again, and the
// snapshot keeps that parse for the next calls.
func (s *Snapshot) FieldAt(obj any, path string) (e Error, ok bool) {
	o, ok := s.origins[obj]
	if !ok {
		return Error{}, false
	}
	loc := o.locator().attached()
	return Error{Source: o.source, Line: loc.lineOf(path), Field: loc.field(path)}, true
}
