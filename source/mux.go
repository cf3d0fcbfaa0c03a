package source

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
)

// AnnotationSourceError is set on a pod (in /pods and `podrun ps`) whose
// manifest has a problem now: the pod runs as last good.
const AnnotationSourceError = "podrun.io/source-error"

// AnnotationManifestWarnings is set on a pod (in /pods and `podrun ps`)
// whose manifest podrun ran without some of its fields (unknown fields,
// dropped as the kubelet drops them): the warnings, one a line, naming
// file, line and field.
const AnnotationManifestWarnings = "podrun.io/manifest-warnings"

// Named is a Source with the name its Updates carry in Update.Source: the
// path or URL as configured.
type Named struct {
	Name   string
	Source Source
}

// Changes is what one Update of a source changed, as Mux.Run hands it on.
type Changes struct {
	// Source is the name of the source that sent the update.
	Source string
	// Pods are the changes of the desired pods, in the order
	// Merger.Update returns them: removals first.
	Pods []PodChange
	// ConfigMaps and Secrets are all the desired objects now (not a
	// delta), as copies: what the pods' volumes and env may refer to.
	ConfigMaps []*v1.ConfigMap
	Secrets    []*v1.Secret
	// RuntimeClasses are all the desired RuntimeClasses now, as copies:
	// what the pods' runtimeClassName may name.
	RuntimeClasses []*nodev1.RuntimeClass
	// Conflicts are all the definitions that lose to those of a source
	// that comes first now (not a delta; Merger.Conflicts), for the
	// caller to report.
	Conflicts []Conflict
}

// Mux runs the sources of `podrun watch` into one Merger (the kubelet's
// config mux): it starts every source, feeds each Update to the merger and
// hands on what changed. Meanwhile other goroutines (the sync loop's
// housekeeping, garbage collection, the HTTP server) may ask it what the
// sources say now: Ready, Desired, Keep, Errors, Pods.
//
// It knows nothing of what runs the pods: the caller turns Changes into
// its own updates.
type Mux struct {
	sources []Named
	names   []string
	metrics *Metrics

	mu      sync.Mutex // guards all below; Run's goroutine owns the merger
	merger  *Merger
	ready   bool
	failing map[string]bool
	errs    map[string]error
	desired map[string]bool
	// warnings are the manifest warnings of each source's pods, by UID.
	warnings map[string]map[types.UID][]string
}

// NewMux returns a mux of sources, in priority order: on a conflict the
// source given first wins (manifest.Claim). metrics, if not nil, counts
// each source's problems and successes.
func NewMux(sources []Named, metrics *Metrics) *Mux {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	return &Mux{
		sources:  sources,
		names:    names,
		metrics:  metrics,
		merger:   NewMerger(names),
		failing:  map[string]bool{},
		errs:     map[string]error{},
		desired:  map[string]bool{},
		warnings: map[string]map[types.UID][]string{},
	}
}

// Names returns the sources' names, in priority order.
func (m *Mux) Names() []string { return append([]string(nil), m.names...) }

// Run starts every source and, until ctx ends, feeds their Updates to the
// merger. After each one, once Ready, Desired, Keep and Errors say what it
// changed, it calls apply with the changes, on Run's goroutine: a slow
// apply holds back the next update (the sources coalesce meanwhile), never
// a source. Run returns when ctx has ended and every source has returned.
// Run may be called once.
func (m *Mux) Run(ctx context.Context, apply func(Changes)) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	updates := make(chan Update, len(m.sources))
	for _, s := range m.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Source.Run(ctx, updates)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			apply(m.update(u))
		}
	}
}

// update feeds u to the merger and refreshes what other goroutines read.
func (m *Mux) update(u Update) Changes {
	m.mu.Lock()
	defer m.mu.Unlock()
	changes := m.merger.Update(u)
	desired := map[string]bool{}
	for _, p := range m.merger.pods {
		desired[string(p.UID)] = true
	}
	m.ready, m.failing, m.errs, m.desired = m.merger.Ready(), m.merger.Failing(), m.merger.Errors(), desired
	if u.Snapshot != nil {
		warnings := map[types.UID][]string{}
		for _, p := range u.Snapshot.Pods {
			if w := u.Snapshot.WarningsOf(p); len(w) > 0 {
				warnings[p.UID] = w
			}
		}
		m.warnings[u.Source] = warnings
	}
	m.metrics.observe(u)
	cms, secrets := m.merger.Objects()
	return Changes{Source: u.Source, Pods: changes, ConfigMaps: cms, Secrets: secrets,
		RuntimeClasses: m.merger.RuntimeClasses(), Conflicts: m.merger.Conflicts()}
}

// Ready reports whether every source has delivered a usable snapshot: until
// then nothing destructive may happen (no pod removed for not being
// desired, no dead container of an unknown pod collected).
func (m *Mux) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// Desired returns the UIDs of the pods the sources define now. The map is
// shared: the caller must not modify it.
func (m *Mux) Desired() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.desired
}

// Keep reports whether runtime pods of the identity source source (an
// absolute file path or a URL, as in the podrun.io/source annotation) must
// be kept although no snapshot defines them: it has been invalid or
// unreachable since podrun started.
func (m *Mux) Keep(source string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failing[source]
}

// Errors returns the current problem of each source that has one (see
// Merger.Errors). The map is shared: the caller must not modify it.
func (m *Mux) Errors() map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs
}

// Pods returns the desired pods, in source priority order, as copies.
func (m *Mux) Pods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.merger.Pods()
}

// AnnotateWarnings returns pods with AnnotationManifestWarnings set on each
// pod whose manifest had fields dropped (copies of those pods; the others
// as they are).
func (m *Mux) AnnotateWarnings(pods []*v1.Pod) []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, copied := pods, false
	for i, p := range pods {
		for _, name := range m.names {
			w := m.warnings[name][p.UID]
			if len(w) == 0 {
				continue
			}
			if !copied {
				out, copied = slices.Clone(pods), true
			}
			cp := p.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			cp.Annotations[AnnotationManifestWarnings] = strings.Join(w, "\n")
			out[i] = cp
			break
		}
	}
	return out
}

// AnnotateErrors returns pods with AnnotationSourceError set on each pod
// whose manifest has a problem now (copies of those pods; the others as
// they are). A directory source's problems name their files, so a pod gets
// only the problems of its own file.
func (m *Mux) AnnotateErrors(pods []*v1.Pod) []*v1.Pod {
	return annotateErrors(pods, m.names, m.Errors())
}

func annotateErrors(pods []*v1.Pod, sources []string, errs map[string]error) []*v1.Pod {
	if len(errs) == 0 {
		return pods
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		origin := p.Annotations[manifest.AnnotationSource]
		for _, src := range sources {
			err := errs[src]
			if err == nil || !FromSource(origin, src) {
				continue
			}
			msg := err.Error()
			if !isURL(src) && !samePath(origin, src) {
				// A directory: keep the lines about this pod's file. They
				// name it as ManifestFiles does, the directory as given
				// joined with the file's name: the name alone would match
				// ba.yaml's lines for a.yaml.
				file := filepath.Join(src, filepath.Base(origin)) + ":"
				var mine []string
				for _, line := range strings.Split(msg, "\n") {
					if namesFile(line, file) {
						mine = append(mine, line)
					}
				}
				msg = strings.Join(mine, "\n")
			}
			if msg == "" {
				continue
			}
			cp := p.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			cp.Annotations[AnnotationSourceError] = msg
			out[i] = cp
		}
	}
	return out
}

// FromSource reports whether a pod defined at origin (an absolute file path
// or a URL: its podrun.io/source annotation, and its sandbox's Source)
// comes from the source src as given (a file, a directory - its files, not
// recursively -, a URL, or "-").
func FromSource(origin, src string) bool {
	if isURL(src) {
		return origin == src
	}
	return samePath(origin, src) || samePath(filepath.Dir(origin), src)
}

// namesFile reports whether line names file ("dir/a.yaml:") as a whole
// name: at the line's start or after a character that cannot end a path
// element, so that "a.yaml:" (a source given as ".") is not found in
// "ba.yaml:".
func namesFile(line, file string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], file)
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || strings.ContainsRune(" \t\"'(", rune(line[j-1])) {
			return true
		}
		i = j + 1
	}
}

func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// Metrics are the Prometheus series of the sources.
type Metrics struct {
	errors      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

// NewMetrics registers the sources' series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_source_errors_total",
			Help: "Source updates that carried a problem (a new one: reads finding the same problem again are not counted); the last good pods were kept.",
		}, []string{"source"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podrun_source_last_success_timestamp_seconds",
			Help: "When the source was last read without a problem.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.errors, m.lastSuccess)
	return m
}

// observe counts u: nil-safe, for a mux without metrics.
func (m *Metrics) observe(u Update) {
	if m == nil {
		return
	}
	// /metrics is for others than root: a URL's credentials stay out.
	src := manifest.RedactedSource(u.Source)
	if u.Err != nil {
		m.errors.WithLabelValues(src).Inc()
		return
	}
	m.lastSuccess.WithLabelValues(src).SetToCurrentTime()
}
