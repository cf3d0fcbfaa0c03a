package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// fuzzOptions are fixed options, so that two parses of one input can be
// compared.
func fuzzOptions() Options {
	return Options{NodeName: "fuzz-node", Now: func() time.Time { return time.Unix(1700000000, 0) }}
}

// addManifestSeeds adds the project's own manifests (kubeadm's static pods,
// the examples) to a fuzz corpus, besides the checked-in seeds under
// testdata/fuzz.
func addManifestSeeds(f *testing.F, add func([]byte)) {
	files, _ := filepath.Glob("testdata/kubeadm/*.yaml")
	more, _ := filepath.Glob("../examples/*.yaml")
	for _, path := range append(files, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
	}
}

// FuzzParse feeds the decoder arbitrary bytes. Whatever they are, Parse
// must return (no panic, no hang), and:
//   - an error is an ErrorList whose every entry names the source;
//   - without an error, every pod has the static-pod identity (name
//     suffixed with the node, a UID, spec.nodeName, the config
//     annotations), is a valid DNS subdomain, and every container has an
//     image;
//   - the same input gives the same result twice (no state, no map-order
//     dependence in what is reported).
func FuzzParse(f *testing.F) {
	addManifestSeeds(f, func(b []byte) { f.Add(b) })
	const source = "/etc/podrun/manifests/fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := fuzzOptions()
		snap, err := parseWithin(t, 10*time.Second, source, data, opts)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse error is not an ErrorList: %T %v", err, err)
			}
			if len(list) == 0 {
				t.Fatalf("Parse returned an empty ErrorList")
			}
			for _, e := range list {
				if e.Source != source {
					t.Fatalf("an error does not name the source: %+v", e)
				}
				if e.Line < 0 {
					t.Fatalf("negative line: %+v", e)
				}
			}
		}
		if snap == nil {
			t.Fatalf("Parse returned no snapshot (err %v)", err)
		}
		if err == nil {
			for _, p := range snap.Pods {
				if !strings.HasSuffix(p.Name, "-fuzz-node") || p.UID == "" || p.Spec.NodeName != "fuzz-node" {
					t.Fatalf("pod without the static identity: name %q uid %q node %q", p.Name, p.UID, p.Spec.NodeName)
				}
				if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
					t.Fatalf("pod name %q is not valid: %v", p.Name, msgs)
				}
				if p.Annotations[AnnotationSource] == "" {
					t.Fatalf("pod %s has no source annotation", p.Name)
				}
				if len(p.Spec.Containers) == 0 {
					t.Fatalf("pod %s has no container", p.Name)
				}
				for _, c := range p.Spec.Containers {
					if c.Image == "" || c.Name == "" {
						t.Fatalf("pod %s: a container without a name or image: %+v", p.Name, c)
					}
				}
			}
		}
		again, err2 := parseWithin(t, 10*time.Second, source, data, opts)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses of one input differ:\n%v\n---\n%v", err, err2)
		}
		if len(again.Pods) != len(snap.Pods) || len(again.ConfigMaps) != len(snap.ConfigMaps) ||
			len(again.Secrets) != len(snap.Secrets) || len(again.Warnings) != len(snap.Warnings) {
			t.Fatalf("two parses of one input give different objects")
		}
		for i := range snap.Pods {
			if snap.Pods[i].UID != again.Pods[i].UID {
				t.Fatalf("pod %d: UID %s then %s", i, snap.Pods[i].UID, again.Pods[i].UID)
			}
		}
	})
}

// parseWithin is Parse, failing the test when it takes longer than limit:
// Go's fuzzer does not notice an input that makes the code under test hang.
func parseWithin(t *testing.T, limit time.Duration, source string, data []byte, opts Options) (*Snapshot, error) {
	t.Helper()
	type result struct {
		snap *Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := Parse(source, data, opts)
		done <- result{snap, err}
	}()
	select {
	case r := <-done:
		return r.snap, r.err
	case <-time.After(limit):
		t.Fatalf("Parse of %d bytes took over %s: %q", len(data), limit, data)
		return nil, nil
	}
}

// TestParseReportIsDeterministic is FuzzParse's first find: the problems of
// a map (here resource limits with bad names) came in the map's random
// order, so the same file gave a different report from one rescan to the
// next (and a file source logged it again each time).
func TestParseReportIsDeterministic(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: i, resources: {limits: {b: 1, a: 2, c: 3, d: 4}}}]\n")
	_, first := Parse("pod.yaml", data, fuzzOptions())
	if first == nil {
		t.Fatal("want an error")
	}
	for i := 0; i < 50; i++ {
		if _, err := Parse("pod.yaml", data, fuzzOptions()); err == nil || err.Error() != first.Error() {
			t.Fatalf("parse %d reports\n%v\nthe first reported\n%v", i, err, first)
		}
	}
}
