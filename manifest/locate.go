package manifest

import (
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// docRef is a document as a snapshot keeps it for FieldAt: its text, not
// its node tree (a tree costs many times the text, and most snapshots are
// never asked). The tree is built at the first question and kept.
type docRef struct {
	data []byte
	once sync.Once
	root *yaml.Node // nil when the text is not YAML (then FieldAt answers the object's line)
}

func newDocRef(d document) *docRef { return &docRef{data: d.data} }

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

// detached returns l without its node tree, to be kept: attached builds
// it again from the document when a line is asked for.
func (l locator) detached() locator {
	l.root, l.keys = nil, nil // the index holds the tree's nodes
	return l
}

// attached returns l with its node tree: the document's, or for a List
// item the item's (l.prefix, "items[2]", leads to it from the document).
func (l locator) attached() locator {
	if l.root != nil || l.doc == nil {
		return l
	}
	root := l.doc.tree()
	if root == nil {
		return l
	}
	if l.prefix != "" {
		n, _, complete := l.keys.walkPath(root, parsePath(l.prefix))
		if !complete {
			return l
		}
		root = n
	}
	l.root = root
	return l
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
	loc := o.loc.attached()
	if loc.doc == nil {
		// Not from a parse (a test's snapshot): the object's own line.
		return Error{Source: o.source, Line: o.line, Field: path}, true
	}
	return Error{Source: o.source, Line: loc.lineOf(path), Field: loc.field(path)}, true
}
