package manifest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// The JSON decoder stops at the first value it cannot store and names it by
// byte offset and a path without indexes; a manifest with three typos would
// take three runs to fix. typeErrors instead walks the generic JSON value
// alongside the Go type it is decoded into, as the decoder does, and checks
// every value, so all problems are reported with their full indexed path.
// The values found bad are then pruned and the rest decoded, so that the
// object can still be validated in the same run.

// pathError is a problem at a field path of one object.
type pathError struct {
	path    string
	message string
	// suggested is the path of the field an unknown field was probably
	// meant to be, if any.
	suggested string
}

// typeErrors returns every value in v (a generic JSON value as decoded by
// sigs.k8s.io/json) that cannot be decoded into type t, and every key that
// names no field of the struct it is in.
func typeErrors(t reflect.Type, v any) []pathError {
	var errs []pathError
	checkValue(t, v, "", &errs)
	return errs
}

func checkValue(t reflect.Type, v any, path string, errs *[]pathError) {
	if v == nil { // null is accepted everywhere: the field stays unset
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// Types that decode themselves (resource.Quantity, intstr.IntOrString,
	// metav1.Time) are checked by decoding them.
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) || isLeaf(t) {
		checkLeaf(t, v, path, errs)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			*errs = append(*errs, pathError{path: path, message: wrongType("object", v)})
			return
		}
		fields := jsonFields(t)
		keys := sortedKeys(obj)
		for _, k := range keys {
			ft, known := fields[k]
			if !known {
				msg, suggestion := suggestField(k, fields)
				e := pathError{path: joinPath(path, k), message: msg}
				if suggestion != "" {
					e.suggested = joinPath(path, suggestion)
				}
				*errs = append(*errs, e)
				continue
			}
			checkValue(ft, obj[k], joinPath(path, k), errs)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			*errs = append(*errs, pathError{path: path, message: wrongType("object", v)})
			return
		}
		for _, k := range sortedKeys(obj) {
			checkValue(t.Elem(), obj[k], path+"["+k+"]", errs)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			*errs = append(*errs, pathError{path: path, message: wrongType("list", v)})
			return
		}
		for i, item := range arr {
			checkValue(t.Elem(), item, path+"["+strconv.Itoa(i)+"]", errs)
		}
	case reflect.Interface:
		// Any value fits.
	default:
		checkLeaf(t, v, path, errs)
	}
}

// isLeaf reports whether t is decoded from a single JSON scalar.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8 // []byte: a base64 string
	}
	return false
}

// checkLeaf decodes v into a new t with the same decoder the real decode
// uses, and turns a failure into a message for a person.
func checkLeaf(t reflect.Type, v any, path string, errs *[]pathError) {
	data, err := json.Marshal(v)
	if err != nil {
		*errs = append(*errs, pathError{path: path, message: err.Error()})
		return
	}
	err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface())
	if err == nil {
		return
	}
	*errs = append(*errs, pathError{path: path, message: leafMessage(t, v, err)})
}

func leafMessage(t reflect.Type, v any, err error) string {
	switch t {
	case reflect.TypeFor[intstr.IntOrString]():
		return wrongType("integer or string", v)
	case reflect.TypeFor[resource.Quantity]():
		return fmt.Sprintf("invalid quantity %s: write a number with an optional suffix, such as 250m, 0.5, 128Mi or 1G", describeValue(v))
	}
	// sigs.k8s.io/json's type errors are its own (unexported) type: known by
	// their text.
	if !strings.Contains(err.Error(), "cannot unmarshal") {
		// A type that decodes itself said why (a quantity that does not
		// parse, base64 that is not).
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, isInt := v.(int64); isInt {
			return fmt.Sprintf("%d is out of range for %s", n, t.Kind())
		}
		msg := wrongType("integer", v)
		if s, isString := v.(string); isString {
			if _, convErr := strconv.ParseInt(strings.TrimSpace(s), 10, 64); convErr == nil {
				msg += "; remove the quotes"
			}
		}
		return msg
	case reflect.Float32, reflect.Float64:
		return wrongType("number", v)
	case reflect.Bool:
		msg := wrongType("boolean (true or false)", v)
		if s, isString := v.(string); isString && (s == "true" || s == "false") {
			msg += "; remove the quotes"
		}
		return msg
	case reflect.String:
		return wrongType("string", v) + "; quote the value"
	case reflect.Slice:
		return wrongType("base64 string", v)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// wrongType says what was expected and what was found.
func wrongType(want string, got any) string {
	return fmt.Sprintf("wrong type: expected %s, got %s", want, describe(got))
}

// describe names a generic JSON value's type, with short scalars quoted.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return "string " + strconv.Quote(x)
	case int64, float64, json.Number:
		return fmt.Sprintf("number %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// jsonFields maps the JSON names of t's fields to their types, following
// encoding/json's rules: a `json:"-"` field is skipped, an untagged field
// keeps its Go name, and an embedded struct without a name (TypeMeta's
// `json:",inline"`) has its fields promoted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, t := range jsonFields(ft) {
					if _, taken := fields[n]; !taken {
						fields[n] = t
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// typeAt returns the Go type found at path below t, or nil.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, elem := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := jsonFields(t)[elem]
			if !ok {
				return nil
			}
			t = ft
		case reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// unknownField says a field is unknown and, when a known field is spelled
// much alike (a typo, a wrong case), which one was probably meant: it
// returns the message and that field's name, or "".
func suggestField(name string, fields map[string]reflect.Type) (string, string) {
	best, bestDist := "", 3
	for known := range fields {
		d := editDistance(strings.ToLower(name), strings.ToLower(known))
		if d < bestDist || (d == bestDist && best != "" && known < best) {
			best, bestDist = known, d
		}
	}
	if best == "" || best == name {
		return "unknown field", ""
	}
	return fmt.Sprintf("unknown field (did you mean %q?)", best), best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pruneValues returns a copy of v without the values at paths (a value in a
// list becomes null, so that the indexes of the others hold).
func pruneValues(v any, paths []string) any {
	out := deepCopyJSON(v)
	for _, path := range paths {
		elems := parsePath(path)
		if len(elems) == 0 {
			continue
		}
		parent := out
		for _, elem := range elems[:len(elems)-1] {
			parent = childValue(parent, elem)
		}
		last := elems[len(elems)-1]
		switch x := parent.(type) {
		case map[string]any:
			delete(x, last)
		case []any:
			if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(x) {
				x[i] = nil
			}
		}
	}
	return out
}

// valueAt returns the generic value at path, or nil.
func valueAt(v any, path string) any {
	for _, elem := range parsePath(path) {
		v = childValue(v, elem)
	}
	return v
}

func childValue(v any, elem string) any {
	switch x := v.(type) {
	case map[string]any:
		return x[elem]
	case []any:
		if i, err := strconv.Atoi(elem); err == nil && i >= 0 && i < len(x) {
			return x[i]
		}
	}
	return nil
}

func deepCopyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, item := range x {
			c[k] = deepCopyJSON(item)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, item := range x {
			c[i] = deepCopyJSON(item)
		}
		return c
	}
	return v
}

// underAny reports whether path is one of paths or below one.
func underAny(path string, paths []string) bool {
	for _, p := range paths {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}

// withoutPaths drops the validation errors about values that could not be
// decoded: they were reported already, and their zero values would only
// add confusing echoes ("containerPort: Required value").
func withoutPaths(errs field.ErrorList, bad []string) field.ErrorList {
	if len(bad) == 0 {
		return errs
	}
	kept := errs[:0:0]
	for _, e := range errs {
		if !underAny(e.Field, bad) {
			kept = append(kept, e)
		}
	}
	return kept
}
