package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/podrun/podrun/manifest"
)

// FileSource watches a manifest file or a directory of them (not
// recursively, like the kubelet's staticPodPath) for `podrun watch`.
//
// Unlike the kubelet, it keeps the last good content of each file: a file
// that cannot be read, decoded or validated (an editor's half-written save,
// a typo) keeps the pods, ConfigMaps and Secrets it defined when last good,
// and the problem is reported in Update.Err. Only a clean removal (the
// file deleted, a pod gone from a good file) removes pods. An empty (e.g.
// truncated) file is such a problem too; an explicitly empty List
// (`kind: List`, `items: []`) is how a file says "no pods".
type FileSource struct {
	// Path is a file or a directory, as configured. It need not exist: a
	// missing path is watched for from its nearest existing parent and
	// yields no pods (not an error) until it appears.
	Path string
	// Options for reading the manifests.
	Options manifest.Options
	// Rescan is --file-check-frequency: a full rescan at this interval
	// catches what fsnotify missed (a full event queue, a network file
	// system). Zero means DefaultFileCheckFrequency.
	Rescan time.Duration
	// Debounce is how long events must be quiet before a rescan, so that an
	// editor's burst (vim: write a 4913 probe, rename x.yaml to x.yaml~,
	// write x.yaml, chmod) is one rescan and not a removal followed by an
	// add. A burst that never goes quiet is rescanned after ten times this.
	// One event is not waited for: a manifest file replaced whole (an
	// atomic save renames a new one over it) when no event named it for
	// this long is read at once (see wholeManifest).
	// Zero means DefaultDebounce.
	Debounce time.Duration
	// Logger hears about errors (once when they appear, once when they
	// clear) and changes; nil means slog.Default().
	Logger *slog.Logger

	hooks *sourceHooks
}

// Run watches the path until ctx ends, then returns with every goroutine
// it started ended and the fsnotify watcher closed. It sends an update after
// the first scan and then whenever the result changes (never the same
// result twice). A consumer that falls behind gets only the newest update.
func (s *FileSource) Run(ctx context.Context, out chan<- Update) {
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("source", s.Path)
	opts := s.Options
	if opts.Logger == nil {
		opts.Logger = logger
	}
	opts.Logger = logOnce(opts.Logger)
	opts, err := opts.Complete()
	if err == nil && s.Path == "" {
		err = errors.New("no path given")
	}
	var reader *manifest.FileReader
	if err == nil {
		reader, err = manifest.NewFileReader(opts)
	}
	if err == nil {
		var abs string
		abs, err = filepath.Abs(s.Path)
		if err == nil {
			s.run(ctx, out, newFileScanner(s.Path, abs, opts, reader, logger))
			return
		}
	}
	err = fmt.Errorf("watch manifests %s: %w", s.Path, err)
	logger.Error("cannot watch manifests", "error", err)
	sendUntilDone(ctx, out, Update{Source: s.Path, Err: err})
}

func (s *FileSource) run(ctx context.Context, out chan<- Update, sc *fileScanner) {
	rescan := orDefault(s.Rescan, DefaultFileCheckFrequency)
	debounce := orDefault(s.Debounce, DefaultDebounce)
	after := s.hooks.afterFunc()

	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		// Out of inotify instances, say: still correct, only slower.
		sc.logger.Warn("cannot watch manifests for changes; relying on the periodic rescan",
			"every", rescan, "error", err)
		w = nil
	} else {
		defer w.Close()
		events, watchErrs = w.Events, w.Errors
	}

	ticker := time.NewTicker(rescan)
	defer ticker.Stop()

	var q latest
	// gone are the files that a Remove or Rename event named since the
	// last (not quick) scan: one made again is a new file, which may be
	// half-written, not a known one replaced by an atomic save.
	gone := map[string]bool{}
	// scan reads the path; quick is the scan of a quiet atomic save, in
	// the middle of a burst, which leaves removals to the scan at its end.
	scan := func(quick bool) {
		if w != nil {
			sc.watch(w)
		}
		var u Update
		if quick {
			u = sc.quickScan()
		} else {
			clear(gone)
			u = sc.scan()
		}
		s.hooks.onScanned(q.offer(u))
	}

	// Debounce: each event pushes the rescan back by debounce, up to
	// 10*debounce after the first event of the burst.
	var timer <-chan time.Time
	var burstStart time.Time
	arm := func() {
		now := time.Now()
		if timer == nil {
			burstStart = now
		}
		wait := debounce
		if left := burstStart.Add(10 * debounce).Sub(now); left < wait {
			wait = max(left, 0)
		}
		timer = after(wait)
	}

	// lastEvent is when an event last named each file, for the files
	// named within the last debounce.
	lastEvent := map[string]time.Time{}
	quietCreate := func(ev fsnotify.Event) bool {
		now := time.Now()
		for name, t := range lastEvent {
			if now.Sub(t) >= debounce {
				delete(lastEvent, name)
			}
		}
		name := filepath.Clean(ev.Name)
		_, busy := lastEvent[name]
		lastEvent[name] = now
		wasGone := gone[name]
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			gone[name] = true
		}
		return !busy && !wasGone && ev.Has(fsnotify.Create)
	}

	scan(false)
	for {
		select {
		case <-ctx.Done():
			return
		case q.ch(out) <- q.value():
			q.sent()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if !sc.relevant(ev.Name) {
				continue
			}
			quiet := quietCreate(ev)
			arm()
			s.hooks.onEvent(ev)
			if quiet && sc.wholeManifest(ev.Name) {
				// The debounced rescan still comes, for whatever follows.
				scan(true)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// An overflowed queue lost events: rescan to catch up.
			sc.logger.Warn("watching manifests", "error", err)
			arm()
		case <-timer:
			timer = nil
			scan(false)
		case <-ticker.C:
			scan(false)
		}
	}
}

// fileScanner is the state of one FileSource: the last good snapshot of
// each file. It is used by the source's goroutine only.
type fileScanner struct {
	path string // as configured: shown in messages, the Snapshot's Source
	abs  string // absolute: events are matched against it
	opts manifest.Options
	// reader parses a file only when its bytes changed: a rescan of
	// unchanged manifests decodes and validates nothing.
	reader *manifest.FileReader
	logger *slog.Logger

	// good is the last good read of each file (as listed) good at least
	// once since start, or since it was last removed: a removed file is
	// forgotten (a watch outlives many file names: a tool may write each
	// version under a new one), and one made again is a new file.
	good    map[string]*manifest.Snapshot
	usable  bool // a scan has listed the path once
	missing bool // the path did not exist at the last scan
	// linkTarget is, when the path is a file that is a symlink, the file
	// it resolves to (as wantWatches last found it), whose directory is
	// watched too.
	linkTarget string

	problems     problemLog
	watchProblem problemLog
}

func newFileScanner(path, abs string, opts manifest.Options, reader *manifest.FileReader, logger *slog.Logger) *fileScanner {
	return &fileScanner{
		path: path, abs: abs, opts: opts, reader: reader, logger: logger,
		good:         map[string]*manifest.Snapshot{},
		problems:     problemLog{logger: logger},
		watchProblem: problemLog{logger: logger},
	}
}

// relevant reports whether an event on name can change what the path
// holds: the path itself, an entry directly in it (a directory), or one of
// its ancestors (watched while the path does not exist, or to see it
// deleted and recreated). A single file's siblings are not relevant,
// unless it is a symlink: then its target is, and so are its siblings (a
// ..data link swapped, as in a ConfigMap volume). The kubelet watches the
// path itself, which inotify resolves to the target.
//
// In a directory every entry counts, not only *.yaml: a rescan is cheap
// and changes nothing when nothing changed, and a manifest may be a symlink
// swapped through a dotfile (as Kubernetes' ..data in ConfigMap volumes).
func (sc *fileScanner) relevant(name string) bool {
	name = filepath.Clean(name)
	if name == sc.abs || filepath.Dir(name) == sc.abs ||
		strings.HasPrefix(sc.abs, strings.TrimSuffix(name, string(filepath.Separator))+string(filepath.Separator)) {
		return true
	}
	return sc.linkTarget != "" && (name == sc.linkTarget || filepath.Dir(name) == filepath.Dir(sc.abs))
}

// wholeManifest reports whether name, which a create event named, is a
// manifest file read before that now reads whole: good, and not empty.
// Such an event on a known file is a new file renamed over it (an
// editor's or a config tool's atomic save), complete when it appears;
// a rewrite in place is a write event, and a removal and a new file made
// in place start with a removal event: those wait for the burst to end,
// since a file being written may read as a valid prefix of itself. What
// was read at once is read again at the end of the burst.
func (sc *fileScanner) wholeManifest(name string) bool {
	files, err := manifest.ManifestFiles(sc.path, sc.opts.Logger)
	if err != nil {
		return false
	}
	for _, f := range files {
		if abs, err := filepath.Abs(f); err == nil && abs == filepath.Clean(name) && sc.good[f] != nil {
			snap, err := sc.reader.Read(f)
			return err == nil && snap.Documents() > 0
		}
	}
	return false
}

// wantWatches are the directories to watch: the path itself when it is a
// directory, the directory of its target when it is a file that is a
// symlink (to see the target edited; it sets linkTarget), and its nearest
// existing parent (to see it appear, be replaced by an editor's rename, or
// be deleted and recreated).
func (sc *fileScanner) wantWatches() []string {
	var want []string
	if info, err := os.Stat(sc.abs); err == nil && info.IsDir() {
		want = append(want, sc.abs)
	}
	sc.linkTarget = ""
	if info, err := os.Lstat(sc.abs); err == nil && info.Mode()&os.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(sc.abs); err == nil {
			if info, err := os.Stat(target); err == nil && !info.IsDir() {
				sc.linkTarget = target
				want = append(want, filepath.Dir(target))
			}
		}
	}
	for dir := filepath.Dir(sc.abs); ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			return append(want, dir)
		}
		if dir == filepath.Dir(dir) {
			return want
		}
	}
}

// watch points w at wantWatches. It adds them every time rather than
// trusting its memory: a watched directory that was deleted and recreated
// is a new inode that needs a new watch, and adding an existing watch is
// harmless. It repeats until the set is stable, so that a directory created
// between looking and watching (mkdir -p) is not missed.
func (sc *fileScanner) watch(w *fsnotify.Watcher) {
	problems := map[string]error{}
	for range 8 { // a tree keeps changing only while someone is making it
		want := sc.wantWatches()
		for _, dir := range want {
			err := w.Add(dir)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				// Out of inotify watches, say: the rescan still sees changes.
				problems[dir] = fmt.Errorf("watch %s: %w (changes are seen at the periodic rescan only)", dir, err)
			}
		}
		for _, dir := range w.WatchList() {
			if !slices.Contains(want, dir) {
				_ = w.Remove(dir) // gone already if it was deleted: nothing to undo
			}
		}
		if slices.Equal(sc.wantWatches(), want) {
			break
		}
	}
	sc.watchProblem.update(problems, "cannot watch manifests for changes")
}

// scan reads the path and returns the source's state: per file, its new
// content when good, else its last good content and its problem.
func (sc *fileScanner) scan() Update { return sc.scanFiles(false) }

// quickScan is scan for a quiet atomic save, read before the burst of
// events ends: a file read before that is missing now is kept as it was,
// its last good pods and all. Another file may be in the middle of its own
// save (vim renames x.yaml to x.yaml~ before it writes x.yaml again):
// taken for deleted, its pods would be removed and made again, restarted.
// The scan at the end of the burst removes the files really gone.
func (sc *fileScanner) quickScan() Update { return sc.scanFiles(true) }

func (sc *fileScanner) scanFiles(keepMissing bool) Update {
	problems := map[string]error{}
	var errs []error
	var failing []string

	files, listErr := sc.list()
	if listErr != nil {
		// Keep everything as it was: an unlistable directory is not an empty one.
		problems[sc.path] = listErr
		errs = append(errs, listErr)
	} else {
		sc.usable = true
		read := map[string]bool{}
		for _, f := range files {
			snap, err := sc.reader.Read(f)
			if errors.Is(err, fs.ErrNotExist) {
				// Renamed away while listed (an editor saving): as deleted.
				// The event of its return brings the next scan.
				continue
			}
			read[f] = true
			if err == nil && snap.Documents() == 0 {
				err = manifest.ErrorList{{Source: f, Message: "file is empty: its pods are kept; " +
					"to remove them, delete the file or write an empty List (kind: List, items: [])"}}
			}
			if err != nil {
				problems[f] = err
				errs = append(errs, err)
				if sc.good[f] == nil {
					abs, absErr := filepath.Abs(f)
					if absErr != nil {
						abs = f
					}
					failing = append(failing, abs)
				}
				continue
			}
			sc.accept(f, snap)
		}
		sc.reader.Keep(files)
		for _, f := range slices.Sorted(maps.Keys(sc.good)) {
			if !read[f] && !keepMissing {
				sc.logger.Info("manifest file removed", "file", f, "pods", len(sc.good[f].Pods))
				delete(sc.good, f)
			}
		}
	}

	// File name order, as ReadPath: the first file wins a conflict, and
	// the order does not depend on which file was edited last.
	var snaps []*manifest.Snapshot
	for _, f := range slices.Sorted(maps.Keys(sc.good)) {
		snaps = append(snaps, sc.good[f])
	}
	merged, err := manifest.Merge(sc.path, snaps...)
	if err != nil {
		problems[sc.path+" (conflicts)"] = err
		errs = append(errs, err)
	}
	sc.problems.update(problems, "manifest problem")

	u := Update{Source: sc.path, Failing: failing}
	if sc.usable {
		u.Snapshot = merged
	}
	switch len(errs) {
	case 0:
	case 1:
		u.Err = errs[0]
	default:
		u.Err = errors.Join(errs...)
	}
	return u
}

// accept records a good read of file f, logging what it newly says.
func (sc *fileScanner) accept(f string, snap *manifest.Snapshot) {
	old := sc.good[f]
	if old != nil && contentKey(old) == contentKey(snap) {
		// Unchanged: keep the snapshot read first (and its config.seen).
		// But an edit whose one change is a misspelt field, dropped, is
		// the edit whose warning matters most: what it meant to change
		// did not change.
		if !slices.Equal(old.Warnings, snap.Warnings) {
			// The new snapshot, whose per-pod warnings the Mux shows;
			// the merger keeps its pods as first seen.
			sc.good[f] = snap
			sc.warn(snap.Warnings, old.Warnings)
		}
		return
	}
	sc.good[f] = snap
	sc.logger.Info("manifest file read", "file", f, "pods", len(snap.Pods),
		"configMaps", len(snap.ConfigMaps), "secrets", len(snap.Secrets))
	sc.warn(snap.Warnings, nil)
}

// warn logs the warnings of a read that were not among those before.
func (sc *fileScanner) warn(warnings, before []string) {
	for _, w := range warnings {
		if !slices.Contains(before, w) {
			sc.logger.Warn("manifest warning", "warning", w)
		}
	}
}

// list returns the manifest files of the path: none when it does not
// exist, an error when it exists but cannot be listed.
func (sc *fileScanner) list() ([]string, error) {
	files, err := manifest.ManifestFiles(sc.path, sc.opts.Logger)
	missing := err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR))
	if missing != sc.missing {
		if missing {
			sc.logger.Info("manifest path does not exist; watching for it to appear")
		} else {
			sc.logger.Info("manifest path exists")
		}
		sc.missing = missing
	}
	if missing {
		return nil, nil
	}
	return files, err
}
