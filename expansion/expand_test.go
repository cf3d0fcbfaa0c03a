package expansion

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "EMPTY": "", "B": "$(A)"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(A)", "xaya"},
		{"$(EMPTY)", ""},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"trailing $", "trailing $"},
		{"$()", "$()"},
		{"$(B)", "$(A)"}, // values are not expanded again
	}
	for _, c := range cases {
		if got, err := Expand(c.in, lookup); got != c.want || err != nil {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestExpandIsBounded: a reference that would make a string longer than
// MaxLen is refused before it is made, however the length comes (one
// long value, many references, a literal); a string of MaxLen is not.
func TestExpandIsBounded(t *testing.T) {
	half := strings.Repeat("x", MaxLen/2)
	vars := map[string]string{"HALF": half, "ONE": "1"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	if got, err := Expand("$(HALF)$(HALF)", lookup); err != nil || len(got) != MaxLen {
		t.Errorf("a string of MaxLen: %d bytes, %v", len(got), err)
	}
	for _, in := range []string{
		"$(HALF)$(HALF)$(ONE)",
		"x$(HALF)$(HALF)",
		strings.Repeat("$(HALF)", 1000),
		strings.Repeat("x", MaxLen+1),
		"$(HALF)" + strings.Repeat("$$", MaxLen/2+1),
		"$(HALF)$(HALF)$(UNKNOWN",
	} {
		if got, err := Expand(in, lookup); !errors.Is(err, ErrTooLong) || got != "" {
			t.Errorf("Expand(%.20q...) = %d bytes, %v; want ErrTooLong", in, len(got), err)
		}
	}
	if _, err := All([]string{"ok", "$(HALF)$(HALF)$(HALF)"}, lookup, &Budget{}); !errors.Is(err, ErrTooLong) || !strings.HasPrefix(err.Error(), "[1]: ") {
		t.Errorf("All: %v, want ErrTooLong of [1]", err)
	}
}

// TestBudgetBoundsTheWhole: many strings each within MaxLen are refused
// together once they pass MaxTotal, at the string that passes it; a
// budget given bytes back has them again.
func TestBudgetBoundsTheWhole(t *testing.T) {
	vars := map[string]string{"FULL": strings.Repeat("x", MaxLen-1)}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	fit := MaxTotal / MaxLen // strings of MaxLen-1 bytes and a NUL
	refs := make([]string, fit+1)
	for i := range refs {
		refs[i] = "$(FULL)"
	}
	var b Budget
	if out, err := All(refs[:fit], lookup, &b); err != nil || len(out) != fit {
		t.Fatalf("%d strings that fit: %d made, %v", fit, len(out), err)
	}
	want := fmt.Sprintf("[%d]: ", fit)
	if _, err := All(refs, lookup, &Budget{}); !errors.Is(err, ErrTooMuch) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("one string more: %v, want ErrTooMuch of %s", err, want)
	}
	if err := b.Take(1); !errors.Is(err, ErrTooMuch) {
		t.Errorf("a spent budget took a byte more: %v", err)
	}
	if err := b.Take(-MaxLen); err != nil {
		t.Errorf("given bytes back: %v", err)
	}
}
