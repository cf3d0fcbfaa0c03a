package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// testOptions are the options of every test: a fixed node and clock.
func testOptions() Options {
	return Options{
		NodeName: "node1",
		Now:      func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC) },
	}
}

// dedent lets a test write a manifest indented like the code around it:
// it drops the first line break and the common leading tabs.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if prefix < 0 || n < prefix {
			prefix = n
		}
	}
	for i, l := range lines {
		if len(l) >= prefix && prefix > 0 {
			lines[i] = l[prefix:]
		}
	}
	return strings.Join(lines, "\n")
}

// mustParse parses a manifest that must be valid.
func mustParse(t *testing.T, source, data string) *Snapshot {
	t.Helper()
	snap, err := Parse(source, []byte(data), testOptions())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return snap
}

// parseErrors parses a manifest that must be invalid and returns its
// problems.
func parseErrors(t *testing.T, source, data string) ErrorList {
	t.Helper()
	return parseErrorsWith(t, source, data, testOptions())
}

// parseStrictErrors is parseErrors with Strict: unknown fields are errors.
func parseStrictErrors(t *testing.T, source, data string) ErrorList {
	t.Helper()
	opts := testOptions()
	opts.Strict = true
	return parseErrorsWith(t, source, data, opts)
}

func parseErrorsWith(t *testing.T, source, data string, opts Options) ErrorList {
	t.Helper()
	_, err := Parse(source, []byte(data), opts)
	if err == nil {
		t.Fatalf("Parse succeeded, want errors")
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Parse error %v (%T) is not an ErrorList", err, err)
	}
	if !IsInvalid(err) {
		t.Errorf("IsInvalid(%v) = false", err)
	}
	return list
}

// findError returns the problem at line and field, or fails.
func findError(t *testing.T, list ErrorList, line int, field, msgPart string) *Error {
	t.Helper()
	for _, e := range list {
		if e.Line == line && e.Field == field && strings.Contains(e.Message, msgPart) {
			return e
		}
	}
	t.Errorf("no error at line %d field %q containing %q; got:\n%v", line, field, msgPart, list)
	return nil
}

// minimalPod is the smallest valid pod manifest.
const minimalPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.27
`
