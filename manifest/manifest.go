// Package manifest turns Kubernetes manifests into the static pods podrun
// runs: it decodes YAML or JSON as the kubelet does, applies the API's
// defaults, validates with the API server's own validation, and gives each
// pod the static-pod identity of DESIGN.md ("Identity"). Every problem is
// reported with its file, line and field path; an unknown field is dropped
// with a warning (an error with Options.Strict), and a field podrun cannot
// honour refuses the pod with the reason, never silence.
//
// Decoding knows nothing of Docker or of how sources are watched: a caller
// hands it bytes (Parse) or a path (ReadPath) and gets a Snapshot; those
// functions keep no state and are safe for concurrent use. Claim is the
// one rule for two definitions of the same pod, ConfigMap or Secret. The
// live sources of `podrun watch`, and the merger that turns their
// snapshots into pod ADD/UPDATE/REMOVE, are package source.
package manifest

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options for turning manifests into static pods.
type Options struct {
	// NodeName is the node's name (--node-name); required. It is lowercased,
	// as the kubelet does, and must be a DNS-1123 subdomain.
	NodeName string
	// Now returns the time recorded in kubernetes.io/config.seen; nil means
	// time.Now. For tests.
	Now func() time.Time
	// Logger receives debug messages (files skipped in a directory); nil
	// means slog.Default().
	Logger *slog.Logger
	// Strict makes every warning an error (--strict): an unknown field, a
	// field podrun accepts without effect, an empty file. Without it podrun
	// decodes as the kubelet does: an unknown field is dropped, with a
	// warning naming it.
	Strict bool
}

// Complete checks the options and returns them with their defaults filled
// in: what Parse and ReadPath do first. A source that runs for long calls
// it once, to fail at start rather than at every read.
func (o Options) Complete() (Options, error) { return o.complete() }

// complete checks the options and fills in their defaults.
func (o Options) complete() (Options, error) {
	o.NodeName = strings.ToLower(strings.TrimSpace(o.NodeName))
	if o.NodeName == "" {
		return o, fmt.Errorf("manifest: a node name is required (--node-name)")
	}
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		return o, fmt.Errorf("manifest: node name %q is invalid: %s", o.NodeName, strings.Join(msgs, "; "))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Snapshot is everything one source (a file, a directory, a URL, stdin)
// yields.
type Snapshot struct {
	// Source is the file path or "-" as given, or the URL as
	// RedactedSource shows it.
	Source string
	// Pods are defaulted, validated, with the static identity applied, in
	// document order (for a directory: by file name, then document order).
	Pods       []*v1.Pod
	ConfigMaps []*v1.ConfigMap
	Secrets    []*v1.Secret
	// RuntimeClasses map the pods' runtimeClassName to a runtime handler
	// (a Docker runtime), as a cluster's RuntimeClass objects do.
	RuntimeClasses []*nodev1.RuntimeClass
	// Warnings name fields podrun ignores, e.g.
	// "pod.yaml:12: spec.affinity: not supported yet by podrun, ignored".
	Warnings []string

	// origins maps each object above to "file:line" where it is defined, to
	// name both places when two definitions conflict.
	origins map[any]origin
	// documents counts the documents that held a value (not blank, not
	// only comments, not null): the live sources tell a blank body or a
	// truncated file (an error) from an explicitly empty List (no pods).
	documents int
}

// Origin returns "file:line" where obj (a Pod, ConfigMap or Secret of this
// snapshot) is defined, or "" when it is not from this snapshot.
func (s *Snapshot) Origin(obj any) string {
	o, ok := s.origins[obj]
	if !ok {
		return ""
	}
	return o.String()
}

// WarningsOf returns the warnings of the definition of obj (a Pod of this
// snapshot): what podrun dropped from it.
func (s *Snapshot) WarningsOf(obj any) []string {
	return s.origins[obj].warnings
}

// Documents counts the documents that held a value (not blank, not only
// comments, not null). A source tells a blank body or a truncated file
// (Documents() == 0: an error, the last good is kept) from an explicitly
// empty List (a document, no pods).
func (s *Snapshot) Documents() int { return s.documents }

// Empty reports whether the snapshot holds no object at all.
func (s *Snapshot) Empty() bool {
	return len(s.Pods) == 0 && len(s.ConfigMaps) == 0 && len(s.Secrets) == 0 && len(s.RuntimeClasses) == 0
}

func newSnapshot(source string) *Snapshot {
	return &Snapshot{Source: source, origins: map[any]origin{}}
}

// Parse decodes data read from source: any number of YAML or JSON documents,
// each a v1 Pod, ConfigMap, Secret or List of them. source names the data in
// messages (a URL as RedactedSource shows it) and, whole, is part of each
// pod's UID: give the same source (an absolute path, a URL) for the same
// manifest every time.
//
// On any problem Parse returns an ErrorList holding every problem found, each
// naming source, line and field, together with a Snapshot of the objects that
// were valid and the warnings. Such a snapshot is for reporting only: a
// source must keep its last good snapshot rather than apply a partial one.
// An error that is not an ErrorList means the options are wrong.
func Parse(source string, data []byte, opts Options) (*Snapshot, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	return parse(RedactedSource(source), source, data, opts)
}

// parse is Parse with the name shown in messages (display) apart from the
// one that identifies pods (identity): ReadPath shows paths as the user gave
// them but identifies pods by absolute path, and Parse shows a URL without
// its credentials.
func parse(display, identity string, data []byte, opts Options) (*Snapshot, error) {
	s := &parsing{display: display, identity: identity, opts: opts, seen: seenAnnotation(opts.Now())}
	a := assembly{snap: newSnapshot(display), names: map[definedName]any{}}
	for batch := range slices.Chunk(splitDocuments(data), documentsAtOnce) {
		for _, p := range s.decode(batch) {
			a.add(&p)
		}
	}
	return a.snap, a.errs.orNil()
}

// documentsAtOnce is how many documents are decoded before they are added
// to the snapshot: enough to keep every CPU busy, few enough that what
// waits to be added stays small.
const documentsAtOnce = 256

// decode decodes docs, each apart from the others, as many at once as Go
// runs goroutines in parallel, and returns them in order.
func (s *parsing) decode(docs []document) []parser {
	out := make([]parser, len(docs))
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(docs); i = int(next.Add(1) - 1) {
			out[i] = parser{parsing: s}
			out[i].document(docs[i])
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(docs)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return out
}
