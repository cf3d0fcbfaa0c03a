package manifest

import "testing"

func TestNearest(t *testing.T) {
	candidates := []string{"node-name", "node-ip", "root-dir", "log-level"}
	tests := map[string]string{
		"nod-name":  "node-name",
		"node.name": "node-name",
		"Node-Name": "node-name",
		"rootdir":   "root-dir",
		"node-name": "",
		"pods":      "",
		"node-i":    "node-ip",
	}
	for name, want := range tests {
		if got := Nearest(name, candidates); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
	if got := Nearest("ab", []string{"ac", "ab2", "aa"}); got != "aa" {
		t.Errorf("a tie goes to %q, want the first alphabetically", got)
	}
}
