package manifest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

func TestSplitDocuments(t *testing.T) {
	data := "\xef\xbb\xbfa: 1\n---\n# comment only\n--- # a comment\nb: 2\n---   \n\n---{c: 3}\n--- {d: 4}\n----\n"
	docs := splitDocuments([]byte(data))
	type doc struct {
		line int
		json bool
	}
	var got []doc
	for _, d := range docs {
		got = append(got, doc{d.line, d.json})
	}
	// "---{c: 3}" and "----" are not separators: they stay in their
	// documents (and are YAML errors there).
	want := []doc{{1, false}, {4, false}, {6, false}, {9, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("documents = %+v, want %+v", got, want)
	}
}

func TestParsePath(t *testing.T) {
	tests := map[string][]string{
		"":                                 nil,
		"kind":                             {"kind"},
		"spec.containers[0].ports[1].name": {"spec", "containers", "0", "ports", "1", "name"},
		"spec.containers[0].resources.limits[memory]":     {"spec", "containers", "0", "resources", "limits", "memory"},
		"metadata.annotations[kubernetes.io/config.hash]": {"metadata", "annotations", "kubernetes.io/config.hash"},
		"items[2]": {"items", "2"},
	}
	for path, want := range tests {
		if got := parsePath(path); !reflect.DeepEqual(got, want) {
			t.Errorf("parsePath(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestYAMLErrorLine(t *testing.T) {
	tests := []struct {
		err  string
		line int
		msg  string
	}{
		{"yaml: line 3: mapping values are not allowed in this context", 3, "mapping values are not allowed in this context"},
		{"yaml: found character that cannot start any token", 1, "found character that cannot start any token"},
	}
	for _, tt := range tests {
		line, msg := yamlErrorLine(errors.New(tt.err))
		if line != tt.line || msg != tt.msg {
			t.Errorf("yamlErrorLine(%q) = %d, %q", tt.err, line, msg)
		}
	}
}

func TestLinesThroughAnchorsAndMergeKeys(t *testing.T) {
	errs := parseErrors(t, "pod.yaml", dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  containers:
		  - &app
		    name: app
		    image: nginx
		    ports:
		    - containerPort: 99999
		  - <<: *app
		    name: app2
		`))
	// The bad port is reported where it is written, for both containers.
	findError(t, errs, 11, "spec.containers[0].ports[0].containerPort", "between 1 and 65535")
	findError(t, errs, 11, "spec.containers[1].ports[0].containerPort", "between 1 and 65535")
}

func TestLineOfAMissingFieldIsItsParent(t *testing.T) {
	// spec.containers[0].image is not written: the error points at the
	// container.
	errs := parseErrors(t, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n")
	findError(t, errs, 7, "spec.containers[0].image", "Required value")
}

// TestKeyIndex: a large mapping's index finds what a scan finds: the first
// of duplicate keys, keys of a merged mapping, and nothing for a missing
// key.
func TestKeyIndex(t *testing.T) {
	var b strings.Builder
	b.WriteString("base: &base\n  merged: 1\nbig:\n  <<: *base\n")
	for i := range 2 * indexedMappingSize {
		fmt.Fprintf(&b, "  k%d: %d\n", i, i)
	}
	b.WriteString("  k3: again\n")
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &root); err != nil {
		t.Fatal(err)
	}
	scan := locator{root: &root, line: 1}
	indexed := locator{root: &root, line: 1, keys: keyIndex{}}
	paths := []string{"big.merged", "big.k0", "big.k3", "big.missing", "big.k3.deeper", "base.merged"}
	for i := range 2 * indexedMappingSize {
		paths = append(paths, fmt.Sprintf("big.k%d", i))
	}
	for _, p := range paths {
		if got, want := indexed.lineOf(p), scan.lineOf(p); got != want {
			t.Errorf("lineOf(%s) = %d indexed, %d scanned", p, got, want)
		}
		if got, want := indexed.node(p), scan.node(p); got != want {
			t.Errorf("node(%s) differs: %v, %v", p, got, want)
		}
	}
	if got := indexed.lineOf("big.k3"); got != 8 {
		t.Errorf("big.k3 at line %d, want 8 (its first definition)", got)
	}
	if got := indexed.lineOf("big.merged"); got != 2 {
		t.Errorf("big.merged at line %d, want 2 (in the merged mapping)", got)
	}
	if len(indexed.keys) != 1 {
		t.Errorf("%d mappings indexed, want only the large one", len(indexed.keys))
	}
}

// TestDuplicateKeysTheConversionMisses: a key given twice is an error even
// where the strict YAML conversion, which decides whether the node tree is
// built at all, sees two keys (1 and "1" are an int and a string) or none
// (NaN equals nothing).
func TestDuplicateKeysTheConversionMisses(t *testing.T) {
	for name, keys := range map[string][2]string{
		"quoted":       {`1`, `"1"`},
		"single":       {`true`, `'true'`},
		"tagged":       {`1`, `!!str 1`},
		"in flow":      {`{0x1: a`, `"0x1": b}`},
		"NaN":          {`.nan`, `.nan`},
		"anchored":     {`&k 1`, `"1"`},
		"explicit key": {`? "1"`, `1`},
	} {
		var labels string
		if strings.HasPrefix(keys[0], "{") {
			labels = "  labels: " + keys[0] + ", " + keys[1] + "\n"
		} else {
			labels = "  labels:\n    " + keys[0] + ": a\n    " + keys[1] + ": b\n"
			if strings.HasPrefix(keys[0], "?") {
				labels = "  labels:\n    " + keys[0] + "\n    : a\n    " + keys[1] + ": b\n"
			}
		}
		data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n" + labels + "spec:\n  containers:\n  - name: app\n    image: nginx\n"
		_, err := Parse("pod.yaml", []byte(data), testOptions())
		if err == nil || !strings.Contains(err.Error(), "duplicate field (first given at line") {
			t.Errorf("%s: no duplicate field error in:\n%s\ngot: %v", name, data, err)
		}
	}
}

// TestMayHideKeys: documents with only plain keys in block style need no
// node tree to find a key given twice, whatever their values; any other
// way of writing a key does.
func TestMayHideKeys(t *testing.T) {
	plain := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    args:\n    - - x: y\n" +
		"    - \"--flag=a\"\n    - '--it''s'\n    - \"x\" # \"y\": z\n    image: nginx # a \"comment\"\n  volumes:\n  - emptyDir: { }\nstatus: {}\n"
	if mayHideKeys([]byte(plain)) {
		t.Errorf("plain keys: a tree would be built for\n%s", plain)
	}
	for _, data := range []string{
		"a: 1\n\"b\": 2\n", "a: 1\n'b': 2\n", "- !!str a: 1\n", "- - &x a: 1\n", "? a\n: 1\n",
		"a: {b: 1}\n", "a:\n  .NaN: 1\n", "a:\n\t- \"b\": 1\n", "\"a\" : 1\n", "- 'it''s': 1\n", "\"a\\\"\": 1\n",
		"\"a\n b\": 1\n", "a: {\n}\n",
	} {
		if !mayHideKeys([]byte(data)) {
			t.Errorf("no tree would be built for %q", data)
		}
	}
}
