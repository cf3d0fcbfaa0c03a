package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
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

// largeManifest is a file of n small pods, one document each, as a
// generator writes them.
func largeManifest(n int) []byte {
	var buf bytes.Buffer
	buf.Grow(n * 120)
	for i := range n {
		fmt.Fprintf(&buf, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%06d\nspec:\n  containers:\n  - name: app\n    image: busybox:1.36\n---\n", i)
	}
	return buf.Bytes()
}

// BenchmarkParseLarge parses one file of many small pods: 10k, 20k, and as
// many as fit in MaxFileSize (about 90k). Parsing must stay linear in the
// file's size; issue 13 measured 168 s and 549 MB for a 10 MiB file.
// Besides time and allocations per parse it reports pods/s, the CPU
// time per parse (all goroutines, the GC's included), the peak of
// the live heap during a parse (sampled), the process's peak RSS (a
// high-water mark of the whole process: meaningful for the largest case
// run alone, -bench 'ParseLarge/max'), and what a snapshot retains: the
// live heap after a collection with the snapshot kept, less the heap
// before the parse.
//
//	go test -run '^$' -bench ParseLarge -benchtime 3x ./manifest/
func BenchmarkParseLarge(b *testing.B) {
	perPod := len(largeManifest(1))
	for _, tc := range []struct {
		name string
		pods int
	}{{"pods=10k", 10000}, {"pods=20k", 20000}, {"max", MaxFileSize / perPod}} {
		b.Run(tc.name, func(b *testing.B) {
			data := largeManifest(tc.pods)
			opts := Options{NodeName: "bench-node", Now: func() time.Time { return time.Unix(0, 0) }}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			runtime.GC()
			peak := sampleHeap()
			cpuBefore := cpuTime()
			for b.Loop() {
				snap, err := Parse("/etc/kubernetes/manifests/large.yaml", data, opts)
				if err != nil || len(snap.Pods) != tc.pods {
					b.Fatalf("parse: %v (%d pods, want %d)", err, len(snap.Pods), tc.pods)
				}
			}
			cpu := cpuTime() - cpuBefore
			heap := peak()
			b.ReportMetric(float64(tc.pods)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			// CPU time, unlike time/op, hardly depends on what else the
			// machine runs: the measure of work to compare on a busy one.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(maxRSS())/(1<<20), "peak-RSS-MB")
			b.StopTimer()
			b.ReportMetric(float64(retained(func() any {
				snap, _ := Parse("/etc/kubernetes/manifests/large.yaml", data, opts)
				return snap
			}))/(1<<20), "retained-MB")
		})
	}
}

// sampleHeap samples the bytes of heap objects (live and not yet swept)
// every millisecond until the returned function is called, which returns
// the highest sample.
func sampleHeap() func() uint64 {
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		return <-done
	}
}

// retained is the growth of the live heap, after a collection, from
// before make is called to after it with what it made kept alive.
func retained(make func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSS is the process's peak resident set size.
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10 // KiB on Linux
}
