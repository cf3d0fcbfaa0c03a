package engine

import "testing"

func TestParseDevice(t *testing.T) {
	for in, want := range map[string][3]string{
		"/dev/fuse":            {"/dev/fuse", "/dev/fuse", "rwm"},
		"/dev/fuse:/dev/f":     {"/dev/fuse", "/dev/f", "rwm"},
		"/dev/fuse:/dev/f:r":   {"/dev/fuse", "/dev/f", "r"},
		"/dev/fuse:/dev/f:r:x": {},
		":/dev/f":              {},
		"/dev/fuse:":           {},
	} {
		h, c, p, err := ParseDevice(in)
		if got := [3]string{h, c, p}; got != want || (want == [3]string{}) != (err != nil) {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
