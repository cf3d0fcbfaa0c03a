package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podrun/podrun/manifest"
)

// The helpers below are manifest's test helpers, for the sources' tests.

// testOptions are the options of every test: a fixed node and clock.
func testOptions() manifest.Options {
	return manifest.Options{
		NodeName: "node1",
		Now:      func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC) },
	}
}

// fuzzOptions are fixed options, so that two parses of one input can be
// compared.
func fuzzOptions() manifest.Options {
	return manifest.Options{NodeName: "fuzz-node", Now: func() time.Time { return time.Unix(1700000000, 0) }}
}

// addManifestSeeds adds the project's own manifests (kubeadm's static pods,
// the examples) to a fuzz corpus, besides the checked-in seeds under
// testdata/fuzz.
func addManifestSeeds(f *testing.F, add func([]byte)) {
	files, _ := filepath.Glob("../manifest/testdata/kubeadm/*.yaml")
	more, _ := filepath.Glob("../examples/*.yaml")
	for _, path := range append(files, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
	}
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

func podNamed(name string) string {
	return strings.Replace(minimalPod, "name: web", "name: "+name, 1)
}

func podNames(s *manifest.Snapshot) []string {
	var names []string
	for _, p := range s.Pods {
		names = append(names, p.Name)
	}
	return names
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
