// Package source is where podrun's desired pods come from: the Source
// interface and its kinds (FileSource: a manifest file or directory;
// URLSource: a polled URL), the Merger that turns their snapshots into pod
// ADD/UPDATE/REMOVE, and the Mux that runs the merger for `podrun watch`
// with source readiness, keep-last-good and per-source errors (DESIGN.md,
// "Sources and updates").
//
// Each source runs in a goroutine of its own and pushes whole Updates on a
// channel: never deltas, so that a consumer that falls behind only needs
// the newest one, and a source that restarts needs no history. Sources
// know nothing of the merger and the merger nothing of files or HTTP; none
// of it knows the runner or the container engine (as the kubelet's config
// mux). Decoding, defaults and validation are package manifest's.
package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/podrun/podrun/manifest"
)

// Source is one configured origin of desired pods.
//
// Run sends the source's whole state, never a delta, as Updates on out: a
// first one as soon as the source has been read once (good or not), and
// then one whenever what it says changes (never the same Update twice in a
// row). It coalesces: while out is not ready, a newer Update replaces an
// unsent older one, so a slow consumer sees only the newest state and
// never blocks the source's own work. A read that fails keeps the last
// good snapshot in the Update, with Err set. Run returns when ctx ends,
// with every goroutine it started ended; it never closes out, which
// several sources may share.
type Source interface {
	Run(ctx context.Context, out chan<- Update)
}

var (
	_ Source = (*FileSource)(nil)
	_ Source = (*URLSource)(nil)
)

// Defaults of the live sources, as the kubelet's flags.
const (
	// DefaultFileCheckFrequency is --file-check-frequency: how often a file
	// source rescans even when fsnotify reported nothing.
	DefaultFileCheckFrequency = 20 * time.Second
	// DefaultDebounce is how long a file source waits for a burst of events
	// (an editor's write-rename-chmod) to end before it rescans.
	DefaultDebounce = 100 * time.Millisecond
	// DefaultHTTPCheckFrequency is --http-check-frequency.
	DefaultHTTPCheckFrequency = 20 * time.Second
	// DefaultHTTPTimeout bounds a whole manifest request, body included.
	DefaultHTTPTimeout = 10 * time.Second
)

// Update is a source's whole desired state at one moment.
//
// The Snapshot and everything in it are shared with the source and with
// other updates: a receiver must not modify them.
type Update struct {
	// Source is the path or URL as configured; the Merger knows sources by
	// this string.
	Source string
	// Snapshot is what to run: the last good content (for a directory: per
	// file). It is nil only while the source has never had a usable read
	// (a URL whose first fetch failed, a directory that cannot be listed):
	// such a source is not ready.
	Snapshot *manifest.Snapshot
	// Err is what is wrong now (nil when all is well); Snapshot is then the
	// last good. Manifest problems are (or join) ErrorLists naming file,
	// line and field.
	Err error
	// Failing are identity sources (absolute file paths / URLs, as in the
	// podrun.io/source annotation) that are invalid or unreachable now and
	// have never been good since podrun started (a file: since it last
	// appeared; a file removed is forgotten, its pods removed): the runner
	// must not remove runtime pods that came from them (podrun restarted
	// while a manifest is broken or a URL is down keeps those pods).
	Failing []string
}

// fingerprint identifies what an update says, so that a source does not
// send the same state again at every rescan or poll: pods by UID and
// content hash (not config.seen, which changes at every read) and
// warnings, ConfigMaps and Secrets by content, the error text and Failing.
func fingerprint(u Update) string {
	h := sha256.New()
	field := func(parts ...string) {
		for _, p := range parts {
			// Length-prefixed, so that no two different updates hash alike.
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
	}
	field("source", u.Source)
	if u.Snapshot == nil {
		field("no snapshot")
	} else {
		snapshotContent(h, u.Snapshot)
		// Warnings change no pod, but what /pods and ps show of it.
		for _, p := range u.Snapshot.Pods {
			w := u.Snapshot.WarningsOf(p)
			field("warnings", fmt.Sprint(len(w)))
			field(w...)
		}
	}
	if u.Err != nil {
		field("err", u.Err.Error())
	}
	field("failing")
	field(u.Failing...)
	return hex.EncodeToString(h.Sum(nil))
}

// snapshotContent writes what a snapshot defines, as fingerprint counts it.
func snapshotContent(h hash.Hash, s *manifest.Snapshot) {
	field := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
	}
	field("pods", fmt.Sprint(len(s.Pods)))
	for _, p := range s.Pods {
		field(string(p.UID), p.Namespace, p.Name, p.Annotations[manifest.AnnotationConfigHash])
	}
	// encoding/json writes map keys sorted: the same object, the same bytes.
	objects := make([]any, 0, len(s.ConfigMaps)+len(s.Secrets)+len(s.RuntimeClasses))
	for _, cm := range s.ConfigMaps {
		objects = append(objects, cm)
	}
	for _, sec := range s.Secrets {
		objects = append(objects, sec)
	}
	for _, rc := range s.RuntimeClasses {
		objects = append(objects, rc)
	}
	field("objects", fmt.Sprint(len(objects)))
	for _, obj := range objects {
		data, err := json.Marshal(obj)
		if err != nil {
			// Decoded v1 objects always marshal; a failure is a programming error.
			panic(fmt.Sprintf("manifest: marshal %T: %v", obj, err))
		}
		field(string(data))
	}
}

// contentKey is the fingerprint of a snapshot's content alone.
func contentKey(s *manifest.Snapshot) string {
	h := sha256.New()
	snapshotContent(h, s)
	return hex.EncodeToString(h.Sum(nil))
}

// latest holds the newest update a source has not handed over yet. Updates
// are whole states, so a newer one replaces an unsent older one and a slow
// consumer never blocks a source's event loop (which would let fsnotify's
// queue overflow).
type latest struct {
	pending *Update
	last    string // fingerprint of the last update queued
	started bool
}

// offer queues u unless it says what the last one queued said, and reports
// whether it did.
func (l *latest) offer(u Update) bool {
	key := fingerprint(u)
	if l.started && key == l.last {
		return false
	}
	l.started, l.last, l.pending = true, key, &u
	return true
}

// ch is out while an update waits and nil (a case select never takes)
// otherwise.
func (l *latest) ch(out chan<- Update) chan<- Update {
	if l.pending == nil {
		return nil
	}
	return out
}

func (l *latest) value() Update {
	if l.pending == nil {
		return Update{}
	}
	return *l.pending
}

func (l *latest) sent() { l.pending = nil }

// sendUntilDone hands u over and then waits for ctx: for a source that
// cannot run at all (bad options), so that it still reports why.
func sendUntilDone(ctx context.Context, out chan<- Update, u Update) {
	select {
	case out <- u:
	case <-ctx.Done():
		return
	}
	<-ctx.Done()
}

// problemLog logs each problem once: when it appears or changes, and when
// it clears; not at every rescan.
type problemLog struct {
	logger *slog.Logger
	msgs   map[string]string // key (a file, a URL) -> error text
}

// update takes the problems now (key -> error; keys absent have none) and
// logs what differs from the last call.
func (p *problemLog) update(now map[string]error, what string) {
	if p.msgs == nil {
		p.msgs = map[string]string{}
	}
	for _, key := range slices.Sorted(maps.Keys(now)) {
		msg := now[key].Error()
		if p.msgs[key] != msg {
			p.logger.Warn(what, "at", key, "error", msg)
			p.msgs[key] = msg
		}
	}
	for _, key := range slices.Sorted(maps.Keys(p.msgs)) {
		if _, still := now[key]; !still {
			p.logger.Info(what+" cleared", "at", key)
			delete(p.msgs, key)
		}
	}
}

// onceHandler passes each distinct debug record through once: a file
// source rescans every 20 s and would otherwise repeat "ignoring x.yaml~"
// forever (DESIGN: say so once at debug level). Other levels pass always.
type onceHandler struct {
	slog.Handler
	mu   *sync.Mutex
	seen map[string]bool
}

// maxOnceRecords bounds the memory of onceHandler: past it, records are
// forgotten (and so logged again once).
const maxOnceRecords = 4096

func logOnce(logger *slog.Logger) *slog.Logger {
	return slog.New(&onceHandler{Handler: logger.Handler(), mu: &sync.Mutex{}, seen: map[string]bool{}})
}

func (h *onceHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level <= slog.LevelDebug {
		key := r.Message
		r.Attrs(func(a slog.Attr) bool {
			key += "\x00" + a.String()
			return true
		})
		h.mu.Lock()
		dup := h.seen[key]
		if !dup {
			if len(h.seen) >= maxOnceRecords {
				clear(h.seen)
			}
			h.seen[key] = true
		}
		h.mu.Unlock()
		if dup {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *onceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &onceHandler{Handler: h.Handler.WithAttrs(attrs), mu: h.mu, seen: h.seen}
}

func (h *onceHandler) WithGroup(name string) slog.Handler {
	return &onceHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, seen: h.seen}
}

// sourceHooks let tests observe and drive a source's loop without timing:
// every field may be nil.
type sourceHooks struct {
	// after replaces time.After for the file source's debounce timer.
	after func(time.Duration) <-chan time.Time
	// event is called with each relevant fsnotify event, after the
	// debounce timer was armed for it.
	event func(fsnotify.Event)
	// scanned is called after each scan or fetch, with whether its result
	// differed from the last one (and so was queued to be sent).
	scanned func(changed bool)
}

func (h *sourceHooks) afterFunc() func(time.Duration) <-chan time.Time {
	if h != nil && h.after != nil {
		return h.after
	}
	return time.After
}

func (h *sourceHooks) onEvent(ev fsnotify.Event) {
	if h != nil && h.event != nil {
		h.event(ev)
	}
}

func (h *sourceHooks) onScanned(changed bool) {
	if h != nil && h.scanned != nil {
		h.scanned(changed)
	}
}

// orDefault returns d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
