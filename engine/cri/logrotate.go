package cri

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container log rotation, as the kubelet's container log manager does it
// on CRI: the runtime appends a container's output to one file without
// limit, and only its caller can cut it (dockerd rotates its own files by
// its log-opts, so the Docker engine has nothing of this).

const (
	// rotatedTimeFormat stamps a rotated log: <log>.20060102-150405, the
	// kubelet's names, which sort as their times do.
	rotatedTimeFormat = "20060102-150405"
	compressedSuffix  = ".gz"
	// tmpSuffix marks a compression under way; one a crash left is
	// removed by the next rotation.
	tmpSuffix = ".tmp"
)

// RotateLogs makes one pass over this node's running containers, as the
// kubelet's container log manager makes one every
// containerLogMonitorInterval: a log of maxSize bytes or more is renamed
// <log>.<time> and the runtime asked to reopen it (ReopenContainerLog), so
// that a container keeps at most maxFiles files (the current one
// included), every rotated one gzipped but the newest (a reader may still
// be finishing it). Exited containers write nothing more and are left as
// they are. Each container's failure is one error of the joined result;
// the others are rotated all the same.
func (r *Runtime) RotateLogs(ctx context.Context, maxSize int64, maxFiles int) error {
	if maxSize <= 0 || maxFiles < 2 {
		return fmt.Errorf("rotate logs: max size %d, max files %d: want a positive size and at least 2 files", maxSize, maxFiles)
	}
	list, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: r.selector(""),
	})
	if err != nil {
		return fmt.Errorf("rotate logs: list containers: %w", wrap(err))
	}
	var errs []error
	for _, c := range list {
		st, err := r.status(ctx, c)
		if isNotFound(err) {
			continue // removed since the list
		}
		if err == nil {
			err = r.inLogDir(c.Id, st.LogPath, func(dir *os.Root, base string) error {
				return r.rotateLog(ctx, dir, c.Id, base, maxSize, maxFiles)
			})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rotate log of container %s: %w", shortID(c.Id), err))
		}
	}
	return errors.Join(errs...)
}

// rotateLog rotates the log base in dir of the running container id when
// it has reached maxSize.
func (r *Runtime) rotateLog(ctx context.Context, dir *os.Root, id, base string, maxSize int64, maxFiles int) error {
	fi, err := dir.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Removed behind the runtime's back, which writes on into the
		// unlinked file until it reopens: as the kubelet, have it reopen.
		if err := r.rs.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("reopen the missing %s: %w", base, wrap(err))
		}
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", base)
	case fi.Size() < maxSize:
		return nil
	}
	rotated, err := rotatedLogs(dir, base)
	if err != nil {
		return err
	}
	remove, compress := planRotation(rotated, maxFiles)
	// Oldest first, so that a reader of an older file keeps it longest.
	for _, name := range remove {
		if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove an old log: %w", err)
		}
	}
	for _, name := range compress {
		if err := compressLog(dir, name); err != nil {
			return fmt.Errorf("compress %s: %w", name, err)
		}
	}
	return r.rotateCurrent(ctx, dir, id, base)
}

// rotateCurrent renames the current log base to <base>.<time> and has the
// runtime write a new one; when it cannot, the log is renamed back, for
// the next pass to try again.
func (r *Runtime) rotateCurrent(ctx context.Context, dir *os.Root, id, base string) error {
	rotated := base + "." + r.clock.Now().Format(rotatedTimeFormat)
	for _, taken := range []string{rotated, rotated + compressedSuffix} {
		// A second rotation within the same second: renaming onto the
		// first one would lose its output. The next pass rotates.
		if _, err := dir.Lstat(taken); err == nil {
			return fmt.Errorf("%s: taken by an earlier rotation", taken)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := dir.Rename(base, rotated); err != nil {
		return fmt.Errorf("rename the current log: %w", err)
	}
	if err := r.rs.ReopenContainerLog(ctx, id); err != nil {
		err = fmt.Errorf("reopen the log: %w", wrap(err))
		if rerr := dir.Rename(rotated, base); rerr != nil {
			return fmt.Errorf("%w; renaming it back: %v", err, rerr)
		}
		return err
	}
	r.log.Debug("rotated container log", "container", shortID(id), "log", base, "rotated", rotated)
	return nil
}

// planRotation says, of the rotated files of one log (their names, as
// rotatedLogs gives them), which to remove and which to compress before
// the current log is rotated, for at most maxFiles files after it: the
// current one, the one the rotation makes, and maxFiles-2 older ones,
// gzipped. What a compression cut short left (a .tmp file, or the source
// of a finished .gz) is removed.
func planRotation(rotated []string, maxFiles int) (remove, compress []string) {
	var kept []string
	for _, name := range slices.Sorted(slices.Values(rotated)) {
		if strings.HasSuffix(name, tmpSuffix) || slices.Contains(rotated, name+compressedSuffix) {
			remove = append(remove, name)
		} else {
			kept = append(kept, name)
		}
	}
	excess := max(len(kept)-max(maxFiles-2, 0), 0)
	remove = append(remove, kept[:excess]...)
	for _, name := range kept[excess:] {
		if !strings.HasSuffix(name, compressedSuffix) {
			compress = append(compress, name)
		}
	}
	return remove, compress
}

// isRotated reports whether name is a file a rotation of the log base
// made: <base>.<time>, with .gz when compressed, or .tmp while it was.
// Nothing else is touched: not another container's log, however it is
// named.
func isRotated(base, name string) bool {
	stamp, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return false
	}
	if s, ok := strings.CutSuffix(stamp, compressedSuffix); ok {
		stamp = s
	} else if s, ok := strings.CutSuffix(stamp, tmpSuffix); ok {
		stamp = s
	}
	_, err := time.Parse(rotatedTimeFormat, stamp)
	return err == nil
}

// rotatedLogs names the rotated files of the log base in dir, oldest
// first: regular files only, so that a link planted under such a name is
// never followed.
func rotatedLogs(dir *os.Root, base string) ([]string, error) {
	d, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list rotated logs: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && isRotated(base, e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// compressLog gzips name in dir to name.gz, through a temporary file, and
// removes name.
func compressLog(dir *os.Root, name string) error {
	src, err := openRegular(dir, name)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	tmp := name + tmpSuffix
	// O_EXCL: never through a link, and never over another compression.
	dst, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(dst)
	_, err = io.Copy(zw, src)
	if err = errors.Join(err, zw.Close(), dst.Close()); err != nil {
		dir.Remove(tmp)
		return err
	}
	if err := dir.Rename(tmp, name+compressedSuffix); err != nil {
		dir.Remove(tmp)
		return err
	}
	return dir.Remove(name)
}

// removeRotatedLogs removes the rotated files of the container log at
// path (RemoveContainer removes the current one): a container's output
// goes with it, as the kubelet's Clean removes <log>*.
func (r *Runtime) removeRotatedLogs(id, path string) error {
	return r.inLogDir(id, path, func(dir *os.Root, base string) error {
		names, err := rotatedLogs(dir, base)
		if err != nil {
			return err
		}
		var errs []error
		for _, name := range names {
			if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// inLogDir calls f with the directory of the log at path of container id
// (openLogDir) and the log's name in it, while no other call for the same
// container does: a rotation and a removal never meet. Nothing is called
// when path is not podrun's or its directory is gone.
func (r *Runtime) inLogDir(id, path string, f func(dir *os.Root, base string) error) error {
	unlock := r.locks.lock("log/" + id)
	defer unlock()
	dir, base, err := r.openLogDir(path)
	if err != nil || dir == nil {
		return err
	}
	defer dir.Close()
	return f(dir, base)
}

// openLogDir opens the directory of the container log at path when path
// is one podrun gave the runtime, <log dir>/<pod uid>_<attempt>/<file>,
// confined as removeUnderLogDir confines removals: it returns that
// directory, opened without following a link, and the log's name in it.
// dir is nil when path is not podrun's or its directory is gone.
func (r *Runtime) openLogDir(path string) (dir *os.Root, base string, err error) {
	rel, ok := r.underLogDir(path)
	if !ok {
		return nil, "", nil
	}
	sub, base := filepath.Split(rel)
	sub = strings.TrimSuffix(sub, string(filepath.Separator))
	if !safeName(sub) || !safeName(base) {
		return nil, "", nil
	}
	root, err := os.OpenRoot(r.logDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	fi, err := root.Lstat(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("log directory %s is not a directory", sub)
	}
	dir, err = root.OpenRoot(sub)
	if err != nil {
		return nil, "", err
	}
	if opened, err := dir.Stat("."); err != nil || !os.SameFile(fi, opened) {
		dir.Close()
		if err == nil {
			err = errReplaced
		}
		return nil, "", fmt.Errorf("log directory %s: %w", sub, err)
	}
	return dir, base, nil
}

// openRegular opens name in dir for reading when it is a regular file,
// never through a link.
func openRegular(dir *os.Root, name string) (*os.File, error) {
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	// Non-blocking: a FIFO swapped in would otherwise hold the open.
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if opened, err := f.Stat(); err != nil || !os.SameFile(fi, opened) {
		f.Close()
		if err == nil {
			err = errReplaced
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// errReplaced is a file found other than an Lstat saw it a moment before:
// os.Root follows links inside it, so a link swapped in between would
// otherwise be followed.
var errReplaced = errors.New("replaced while it was opened")
