package runner

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Extraction of an image's filesystem (a tar stream the engine exports)
// into the read-only copy an image volume mounts. The stream is hostile:
// an image is anyone's content. Every entry is written through an os.Root
// of the copy's directory, so that no name ('..', absolute), no symlink
// planted by an earlier entry, and no hardlink can reach a file outside
// it; names with '..' or absolute names are refused outright.

// extractStats says what an extraction did not copy.
type extractStats struct {
	// Skipped counts the entries of kinds a copy does not hold: device
	// nodes, FIFOs, sockets and the like.
	Skipped int
}

// dirAttrs are a directory's attributes, set once its contents are written.
type dirAttrs struct {
	name     string
	mode     fs.FileMode
	uid, gid int
	mtime    time.Time
}

// extractTree writes the tar stream rd into dst: directories, regular
// files, symlinks and hardlinks, with their modes (setuid, setgid and
// sticky bits included), their ownership (when podrun runs as root) and
// their modification times; directories get their modes after their
// contents are written. Other kinds of entries are skipped and counted. An
// entry named absolutely or with '..', a hardlink to such a name, or a
// write that would leave dst (through a symlink) is an error, as is a
// stream that ends before its headers say.
func extractTree(rd io.Reader, dst *os.Root) (extractStats, error) {
	var st extractStats
	var dirs []dirAttrs
	chown := os.Geteuid() == 0
	tr := tar.NewReader(rd)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("reading the image's filesystem: %w", err)
		}
		name, err := tarEntryName(h.Name)
		if err != nil {
			return st, err
		}
		if err := checkEntryDepth(name); err != nil {
			return st, err
		}
		mode := h.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if h.Typeflag != tar.TypeDir && name == "." {
			return st, fmt.Errorf("tar entry %q: not a directory at the top: refused", h.Name)
		}
		if name != "." {
			if err := dst.MkdirAll(path.Dir(name), 0o755); err != nil {
				return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := extractDir(dst, name); err != nil {
				return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
			}
			dirs = append(dirs, dirAttrs{name: name, mode: mode, uid: h.Uid, gid: h.Gid, mtime: h.ModTime})
			continue
		case tar.TypeReg, tar.TypeRegA:
			err = extractFile(dst, name, tr, h.Size)
		case tar.TypeSymlink:
			err = replace(dst, name, func() error { return dst.Symlink(h.Linkname, name) })
		case tar.TypeLink:
			var target string
			if target, err = tarEntryName(h.Linkname); err == nil {
				err = replace(dst, name, func() error { return dst.Link(target, name) })
			}
			if err != nil {
				return st, fmt.Errorf("tar entry %q (hardlink to %q): %w", h.Name, h.Linkname, err)
			}
			continue // a hardlink shares its target's inode and attributes
		default:
			st.Skipped++
			continue
		}
		if err != nil {
			return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
		if chown {
			if err := dst.Lchown(name, h.Uid, h.Gid); err != nil {
				return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
			}
		}
		if h.Typeflag == tar.TypeSymlink {
			continue // its mode means nothing, and Chmod would follow it
		}
		// After the chown, which clears setuid and setgid bits.
		if err := dst.Chmod(name, mode); err != nil {
			return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
		if err := dst.Chtimes(name, h.ModTime, h.ModTime); err != nil {
			return st, fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
	}
	// Deepest first: a directory's time is set after its children's.
	for _, d := range slices.Backward(dirs) {
		fi, err := dst.Lstat(d.name)
		if err != nil || !fi.IsDir() {
			continue // replaced by a later entry
		}
		if chown {
			if err := dst.Lchown(d.name, d.uid, d.gid); err != nil {
				return st, fmt.Errorf("directory %q: %w", d.name, err)
			}
		}
		if err := dst.Chmod(d.name, d.mode); err != nil {
			return st, fmt.Errorf("directory %q: %w", d.name, err)
		}
		if err := dst.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return st, fmt.Errorf("directory %q: %w", d.name, err)
		}
	}
	return st, nil
}

// checkEntryDepth refuses an entry nested deeper than maxWalkDepth. Every
// entry is written through os.Root, which opens each level of its name in
// turn, and its directories are set up again at the end: the time of an
// extraction grew with the square of its depth and beyond (a chain of
// directories 2000 deep took a minute and a half, within a pull of a few
// kilobytes), and removing such a copy holds a descriptor per level. No
// image's files are nested anything like that deep.
func checkEntryDepth(name string) error {
	depth := strings.Count(name, "/") + 1
	if depth <= maxWalkDepth {
		return nil
	}
	const shown = 64
	short := name
	if len(short) > shown {
		short = short[:shown] + "..."
	}
	return fmt.Errorf("tar entry %q: %d levels deep, more than podrun extracts (%d): refused", short, depth, maxWalkDepth)
}

// tarEntryName is the clean relative name of a tar entry ("." for the top
// directory). Absolute names, names with a '..' element or a NUL are
// refused: a filesystem an engine exports has none.
func tarEntryName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("tar entry %q: not a relative name: refused", name)
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("tar entry %q: '..' in the name: refused", name)
	}
	return path.Clean(name), nil
}

// extractDir makes the directory name (with owner-only access until its
// attributes are set), replacing a non-directory of that name.
func extractDir(dst *os.Root, name string) error {
	fi, err := dst.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		if err := dst.Remove(name); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return dst.Mkdir(name, 0o700)
}

// extractFile writes size bytes of r into a new regular file name.
func extractFile(dst *os.Root, name string, r io.Reader, size int64) error {
	return replace(dst, name, func() error {
		f, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != size {
			err = fmt.Errorf("%d bytes written, %d in the header", n, size)
		}
		return err
	})
}

// replace removes what name is (a file, a symlink, an empty directory: a
// later entry of a name wins) and calls create.
func replace(dst *os.Root, name string, create func() error) error {
	if err := dst.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return create()
}
