package manifest

import (
	"errors"
	"strconv"
	"strings"
)

// Error is one problem in one manifest: where it is (source, line, field
// path) and what is wrong. It is what `podrun validate` prints and what the
// sources report when they keep a last good snapshot.
type Error struct {
	// Source is the file path or URL as the user gave it ("-" for stdin).
	Source string
	// Line is the 1-based line in Source; 0 when the problem has no line
	// (an unreadable or oversized file).
	Line int
	// Field is the field path in the document, e.g.
	// "spec.containers[0].ports[0].containerPort"; empty for problems of the
	// document as a whole (invalid YAML, an unknown kind).
	Field string
	// Message says what is wrong, and where it helps, what to do.
	Message string
}

// Error formats the problem as "source:line: field: message", leaving out
// the parts that are empty, so that editors and terminals can jump to it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is every problem found in one parse, in document order. Parse and
// ReadPath return it (never an empty one) so that a user fixes all problems
// in one go rather than one per run.
type ErrorList []*Error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the single problems to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// IsInvalid reports whether err (or an error it wraps) says a manifest is
// invalid, as opposed to, say, a file that could not be read. The CLI maps it
// to exit code 2 ("bad input").
func IsInvalid(err error) bool {
	var list ErrorList
	if errors.As(err, &list) {
		return true
	}
	var one *Error
	return errors.As(err, &one)
}

// orNil returns l as an error, or nil when it holds no problem: a nil
// ErrorList stored in an error interface would not compare equal to nil.
func (l ErrorList) orNil() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
