package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkParseKubeadm decodes, defaults and validates each of kubeadm's
// control-plane static pods (testdata/kubeadm), as a file source does on
// every rescan of a changed file.
func BenchmarkParseKubeadm(b *testing.B) {
	files, err := filepath.Glob("testdata/kubeadm/*.yaml")
	if err != nil || len(files) == 0 {
		b.Fatalf("no kubeadm manifests: %v", err)
	}
	opts := Options{NodeName: "bench-node", Now: func() time.Time { return time.Unix(0, 0) }}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		b.Run(name, func(b *testing.B) {
			source := "/etc/kubernetes/manifests/" + filepath.Base(f)
			if _, err := Parse(source, data, opts); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(source, data, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseAllKubeadm decodes the three manifests as one file of
// three documents.
func BenchmarkParseAllKubeadm(b *testing.B) {
	files, _ := filepath.Glob("testdata/kubeadm/*.yaml")
	var docs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	data := []byte(strings.Join(docs, "\n---\n"))
	opts := Options{NodeName: "bench-node", Now: func() time.Time { return time.Unix(0, 0) }}
	snap, err := Parse("/etc/kubernetes/manifests/all.yaml", data, opts)
	if err != nil || len(snap.Pods) != len(files) {
		b.Fatalf("parse: %v (%d pods)", err, len(snap.Pods))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("/etc/kubernetes/manifests/all.yaml", data, opts); err != nil {
			b.Fatal(err)
		}
	}
}
