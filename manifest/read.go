package manifest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxFileSize is the largest manifest file read: a static pod manifest is a
// few KiB, so anything this large is a mistake (a log, an image) and
// reading it whole would only cost memory.
const MaxFileSize = 10 << 20

// manifestExtensions are the names read from a directory; anything else
// (editor backups and swap files such as x.yaml~, .x.yaml.swp, *.bak, vim's
// 4913 probe) is ignored. podrun differs from the kubelet on purpose: its
// extractFromDir (pkg/kubelet/config/file.go) reads every regular file
// whose name does not start with a dot (Glob "[^.]*"), whatever its
// extension (kube-up's *.manifest, but also x.yaml~).
func manifestExtensions() []string { return []string{".yaml", ".yml", ".json"} }

// ReadPath reads a file or a directory (not recursively, like the kubelet's
// staticPodPath): in a directory only *.yaml, *.yml and *.json entries are
// read, in name order, and dotfiles and all else are ignored (logged at
// debug level, once per file and call). An entry with a manifest's name
// that is not a readable regular file (a directory, a FIFO, a symlink loop)
// is an error. A file named explicitly is read whatever its name. Files over
// MaxFileSize are an error; a file that holds no document is a warning
// (NoteEmpty).
//
// The pods of all files are merged into one Snapshot with Source = path;
// pods are identified by each file's absolute path. Problems of all files are
// collected: manifest problems as one ErrorList, I/O problems (path missing,
// unreadable) joined to it. As with Parse, a snapshot returned with an error
// is for reporting only.
func ReadPath(path string, opts Options) (*Snapshot, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	files, err := ManifestFiles(path, opts.Logger)
	if err != nil {
		return nil, err
	}
	var snaps []*Snapshot
	var ioErrs []error
	var invalid ErrorList
	for _, f := range files {
		snap, err := readFile(f, opts)
		if errors.Is(err, fs.ErrNotExist) && f != path {
			// Gone since the directory was listed: an editor renaming files
			// as it saves. The next scan sees the new state.
			opts.Logger.Debug("manifest file vanished while reading", "path", f)
			continue
		}
		if err == nil {
			err = NoteEmpty(snap, opts)
		}
		var list ErrorList
		switch {
		case errors.As(err, &list):
			invalid = append(invalid, list...)
		case err != nil:
			ioErrs = append(ioErrs, err)
		}
		if snap != nil {
			snaps = append(snaps, snap)
		}
	}
	merged, err := Merge(path, snaps...)
	var conflicts ErrorList
	if errors.As(err, &conflicts) {
		invalid = append(invalid, conflicts...)
	}
	if len(ioErrs) == 0 {
		return merged, invalid.orNil()
	}
	if len(invalid) > 0 {
		ioErrs = append(ioErrs, invalid)
	}
	return merged, errors.Join(ioErrs...)
}

// NoteEmpty is what a one-shot read (ReadPath, a command's standard
// input) does with a snapshot that holds no document (a blank file, only
// comments): it adds a warning that the source is empty, or with
// opts.Strict returns that as an error (an ErrorList). A file that defines
// nothing is most often a mistake (a failed copy, an editor's unsaved
// buffer), but not one worth refusing the other manifests for. The live
// sources keep the last good snapshot of an empty file instead (an error:
// a truncated file must not remove pods).
func NoteEmpty(snap *Snapshot, opts Options) error {
	if snap == nil || snap.Documents() > 0 {
		return nil
	}
	e := &Error{Source: snap.Source, Message: "empty: no YAML or JSON document (blank, or only comments), so it defines nothing"}
	if opts.Strict {
		return ErrorList{e}
	}
	snap.Warnings = append(snap.Warnings, e.Error())
	return nil
}

// ReadFile reads and parses one manifest file. It is ReadPath for a single
// file, for sources that keep one last good snapshot per file.
func ReadFile(path string, opts Options) (*Snapshot, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	return readFile(path, opts)
}

func readFile(path string, opts Options) (*Snapshot, error) {
	data, identity, _, err := readManifestFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, identity, data, opts)
}

// pseudoFilesystem names the kernel filesystem f is on when its files are
// the kernel's interfaces rather than data (procfs, sysfs, ...), else "".
func pseudoFilesystem(f *os.File) string {
	conn, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var st unix.Statfs_t
	var statErr error
	if err := conn.Control(func(fd uintptr) { statErr = unix.Fstatfs(int(fd), &st) }); err != nil || statErr != nil {
		return ""
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC:
		return "procfs"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.DEBUGFS_MAGIC:
		return "debugfs"
	case unix.TRACEFS_MAGIC:
		return "tracefs"
	case unix.SECURITYFS_MAGIC:
		return "securityfs"
	}
	return ""
}

// readManifestFile reads the manifest file at path, refusing what cannot
// be one (a directory, a FIFO, a file over MaxFileSize), and returns its
// bytes, the absolute path its pods are identified by, and what the open
// file's stat said before it was read.
func readManifestFile(path string) (data []byte, identity string, info os.FileInfo, err error) {
	// Judged by what is opened, before it is opened for reading: an
	// O_PATH handle runs no driver's open (a device node: /dev/watchdog
	// would arm) and waits for no FIFO writer, and a look at the path
	// before an open would not do, as the file can change in between.
	// What has a manifest's name but cannot be read as one (a directory,
	// a FIFO, a device, a symlink loop, a file of procfs or sysfs, whose
	// reads can consume what they read) is an error, not "no manifest":
	// the pods of a manifest replaced by such a thing are kept.
	h, err := os.OpenFile(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest: %w", err)
	}
	defer h.Close()
	info, err = h.Stat()
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest: %w", err)
	}
	if info.IsDir() {
		return nil, "", nil, fmt.Errorf("read manifest %s: is a directory, not a manifest file (manifest directories are not read "+
			"recursively): move it, or rename it without the .yaml, .yml or .json extension", path)
	}
	if !info.Mode().IsRegular() {
		return nil, "", nil, fmt.Errorf("read manifest %s: not a regular file (%s)", path, info.Mode().Type())
	}
	if fsName := pseudoFilesystem(h); fsName != "" {
		return nil, "", nil, fmt.Errorf("read manifest %s: a file of %s, not a manifest file", path, fsName)
	}
	// The very file judged, opened for reading through its handle.
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", h.Fd()), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	defer f.Close()
	// The size is checked on what is read, not only on what Stat said: the
	// file may grow in between.
	data, err = io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	if len(data) > MaxFileSize || info.Size() > MaxFileSize {
		size := max(info.Size(), int64(len(data)))
		return nil, "", nil, ErrorList{{Source: path, Message: fmt.Sprintf(
			"file is %.1f MiB, over the %d MiB limit for a manifest: is it really a manifest?",
			float64(size)/(1<<20), MaxFileSize>>20)}}
	}
	identity, err = filepath.Abs(path)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest: %w", err)
	}
	return data, identity, info, nil
}

// ManifestFiles lists what ReadPath reads: path itself when it is a file, or
// the manifest files directly in it when it is a directory, in name order.
// logger (nil: slog.Default()) hears about each file left out.
func ManifestFiles(path string, logger *slog.Logger) ([]string, error) {
	if logger == nil {
		logger = slog.Default()
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	var files []string
	for _, e := range entries {
		full := filepath.Join(path, e.Name())
		if reason := skipReason(full, e); reason != "" {
			logger.Debug("ignoring file in manifest directory", "path", full, "reason", reason)
			continue
		}
		files = append(files, full)
	}
	return files, nil
}

// skipReason says why a directory entry is not a manifest to read, or "".
func skipReason(full string, e fs.DirEntry) string {
	name := e.Name()
	if strings.HasPrefix(name, ".") {
		return "hidden file"
	}
	ext := strings.ToLower(filepath.Ext(name))
	known := false
	for _, want := range manifestExtensions() {
		known = known || ext == want
	}
	if !known {
		if e.IsDir() {
			return "directory (manifest directories are not read recursively)"
		}
		return "not a *.yaml, *.yml or *.json file"
	}
	// A manifest's name is read, whatever it is: a directory, a FIFO or a
	// symlink loop by that name is an error of readFile (which does not
	// open a FIFO), not something to skip. Skipping it would drop the pods
	// of a manifest replaced by it, as if the file had been deleted.
	return ""
}

// Merge joins the snapshots of several files (in the order given) into one
// with Source = source. When two define the same namespace/name (or a pod
// the same UID), the first is kept and the later one reported as a
// conflict (an ErrorList), so that neither flaps: the rule is Claim's.
func Merge(source string, snaps ...*Snapshot) (*Snapshot, error) {
	merged := newSnapshot(source)
	claimed := Claim(snaps)
	merged.Pods, merged.ConfigMaps, merged.Secrets = claimed.Pods, claimed.ConfigMaps, claimed.Secrets
	merged.RuntimeClasses = claimed.RuntimeClasses
	won := map[any]bool{}
	for _, p := range claimed.Pods {
		won[p] = true
	}
	for _, cm := range claimed.ConfigMaps {
		won[cm] = true
	}
	for _, sec := range claimed.Secrets {
		won[sec] = true
	}
	for _, rc := range claimed.RuntimeClasses {
		won[rc] = true
	}
	for _, s := range snaps {
		if s == nil {
			continue
		}
		for obj, o := range s.origins {
			if won[obj] {
				merged.origins[obj] = o
			}
		}
		merged.Warnings = append(merged.Warnings, s.Warnings...)
		merged.documents += s.documents
	}
	var errs ErrorList
	for _, c := range claimed.Conflicts {
		errs = append(errs, c.Problem(fmt.Sprintf("%s conflicts with the %s defined at %s; the first one is kept", c.What, c.Kind, c.WinnerAt)))
	}
	return merged, errs.orNil()
}

// FileReader reads manifest files as ReadFile does, for a source that reads
// the same files again at every rescan: a file whose bytes are those of an
// earlier good read is not parsed again, and that read's snapshot is
// returned as it was (its config.seen included: the pods did not change).
// A file whose stat is that of the earlier read, when that read was made
// well after the file's last change, is not even read again: a rescan of
// unchanged manifests then costs a stat per file. It is not safe for
// concurrent use.
type FileReader struct {
	opts Options
	good map[string]goodRead // path as given -> its last good read
	// reads counts the files read (tests).
	reads int
}

// goodRead is a file's last read that parsed without a problem.
type goodRead struct {
	sum  [sha256.Size]byte
	snap *Snapshot
	// stamp is the file's stat when it was read; settled that its last
	// change (ctime) was then long enough past that a later change must
	// show in the stamp.
	stamp   fileStamp
	settled bool
}

// fileStamp is what stat tells of a file's content: any write changes
// its ctime (which no one can set), a replacement its inode.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns since the epoch
}

// settleMargin is how long before a read a file's ctime must be for the
// read to count as settled: a write within the same tick of a coarse
// timestamp (a second, two on some filesystems), or of the kernel's
// coarse clock, would not change the stamp (git's "racy clean" rule).
const settleMargin = 3 * time.Second

func stampOf(info os.FileInfo) (fileStamp, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}

// onLocalFilesystem reports whether path is on a filesystem whose stat
// this kernel keeps itself: a write there shows in the ctime at once. Not
// so on NFS (attributes cached for up to a minute, where an open
// revalidates them), FUSE (ctime as the daemon tells it) or other network
// filesystems (the server's clock): those files are read at every rescan.
func onLocalFilesystem(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	switch int64(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.RAMFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true
	}
	return false
}

// NewFileReader returns a FileReader parsing with opts.
func NewFileReader(opts Options) (*FileReader, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, err
	}
	return &FileReader{opts: opts, good: map[string]goodRead{}}, nil
}

// Read is ReadFile(path, opts): the snapshot of the file's current bytes.
func (r *FileReader) Read(path string) (*Snapshot, error) {
	g, known := r.good[path]
	if known && g.settled {
		if info, err := os.Stat(path); err == nil {
			if st, ok := stampOf(info); ok && st == g.stamp {
				return g.snap, nil
			}
		}
	}
	began := r.opts.Now() // the clock of config.seen: tests move it
	r.reads++
	data, identity, info, err := readManifestFile(path)
	if err != nil {
		return nil, err
	}
	stamp, stamped := stampOf(info)
	settled := stamped && began.Sub(time.Unix(0, stamp.ctime)) > settleMargin && onLocalFilesystem(path)
	sum := sha256.Sum256(data)
	if known && g.sum == sum {
		r.good[path] = goodRead{sum: sum, snap: g.snap, stamp: stamp, settled: settled}
		return g.snap, nil
	}
	snap, err := parse(path, identity, data, r.opts)
	if err == nil {
		r.good[path] = goodRead{sum: sum, snap: snap, stamp: stamp, settled: settled}
	}
	return snap, err
}

// Keep forgets the reads of every file but those listed: a file gone from
// the source is parsed anew if it comes back.
func (r *FileReader) Keep(paths []string) {
	listed := make(map[string]bool, len(paths))
	for _, p := range paths {
		listed[p] = true
	}
	for p := range r.good {
		if !listed[p] {
			delete(r.good, p)
		}
	}
}
