package runner

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// Spec records: what each sandbox and container was made from, kept in the
// pod's directory for `podrun plan` to say which fields changed, not only
// that something did. They serve no decision (the hashes in the runtime's
// labels do) and nothing but Plan reads them, so they stay out of the
// runtime, whose every relist would carry them:
//
//	<root-dir>/pods/<uid>/specs/sandbox/<sandbox hash>.json
//	<root-dir>/pods/<uid>/specs/containers/<name>/<hash>-<resources hash>.json
//
// A record is named by the hashes taken of it, the ones the object's
// labels carry, so it is the same file for every object made from the same
// spec (a crash loop rewrites one file), whatever the attempt, and a
// reader checks what it reads against the name: a record torn by a crash,
// or in the wrong place, is no record. The sandbox's is the very JSON its
// hash is taken of; a container's is its whole spec, resources included.
//
// Records are written (atomically: a temporary file renamed) when the
// runner makes the object, through the pod directory's confinement
// (poddir.go), pruned to those the pod's objects and spec still name when
// a sync made something, and removed with the pod directory. A record
// larger than maxRecordBytes is not kept. Every failure to keep one is
// logged and costs the pod nothing: its plan says what changed, not how.

// maxRecordBytes bounds one record, written or read.
const maxRecordBytes = 256 << 10

// recordsDir is the records' directory in a pod's directory.
const recordsDir = "specs"

// recordKey names one record: the sandbox's or a container's.
type recordKey struct {
	sandbox   bool
	container string // a container's name
	hash      string
	resources string // a container's resources hash
}

func sandboxKey(sb *engine.Sandbox) recordKey { return recordKey{sandbox: true, hash: sb.Hash} }

func containerKey(c *engine.Container) recordKey {
	return recordKey{container: c.Name, hash: c.Hash, resources: c.ResourcesHash}
}

// podSandboxKey and podContainerKey name the records a sync of pod writes.
func podSandboxKey(pod *v1.Pod) recordKey { return recordKey{sandbox: true, hash: SandboxHash(pod)} }

func podContainerKey(c *v1.Container) recordKey {
	return recordKey{container: c.Name, hash: ContainerHash(c), resources: ResourcesHash(c)}
}

// dir is the record's directory, relative to the pod directory.
func (k recordKey) dir() []string {
	if k.sandbox {
		return []string{recordsDir, "sandbox"}
	}
	return []string{recordsDir, "containers", k.container}
}

func (k recordKey) file() string {
	if k.sandbox {
		return k.hash + ".json"
	}
	return k.hash + "-" + k.resources + ".json"
}

// check refuses a key that does not make a path of safe names: hashes are
// hex (a runtime's labels are read back here), the container's name one
// safe path component.
func (k recordKey) check() error {
	hashes := []string{k.hash}
	if !k.sandbox {
		if err := checkName("container name", k.container); err != nil {
			return err
		}
		hashes = append(hashes, k.resources)
	}
	for _, h := range hashes {
		if _, err := hex.DecodeString(h); err != nil || h == "" || len(h) > 128 || strings.ToLower(h) != h {
			return fmt.Errorf("hash %q is not lowercase hex", h)
		}
	}
	return nil
}

// matches reports whether data is what the key's hashes were taken of.
func (k recordKey) matches(data []byte) bool {
	if k.sandbox {
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:8]) == k.hash
	}
	var c v1.Container
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	return c.Name == k.container && ContainerHash(&c) == k.hash && ResourcesHash(&c) == k.resources
}

// errRecordTooLarge is a record that is not kept for its size.
var errRecordTooLarge = fmt.Errorf("larger than %d KiB: not kept", maxRecordBytes>>10)

// writeRecord keeps data as the record k of the pod uid, under rootDir,
// replacing the file atomically.
func writeRecord(rootDir, uid string, k recordKey, data []byte) error {
	if len(data) > maxRecordBytes {
		return errRecordTooLarge
	}
	if err := k.check(); err != nil {
		return err
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.replaceFile(k.dir(), k.file(), data, 0o600)
	return err
}

// replaceFile writes data as the file name of the directory parts of the
// pod directory (all safe names; the directories are made if missing),
// replacing the file atomically: a reader sees the old content or the
// new, and whatever was planted at name is replaced, never followed. It
// returns the file's real path.
func (d *podDirs) replaceFile(parts []string, name string, data []byte, perm os.FileMode) (string, error) {
	if err := d.root.MkdirAll(d.rel(), 0o755); err != nil {
		return "", refused(d.rel(), err)
	}
	dir, err := d.openDir(true, parts...)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	tmp := "." + name + "." + rand.Text() + ".tmp"
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", refused(filepath.Join(d.rel(parts...), tmp), err)
	}
	_, err = f.Write(data)
	if err == nil {
		// Exactly perm, whatever podrun's umask.
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Rename(tmp, name)
	}
	if err != nil {
		dir.Remove(tmp)
		return "", fmt.Errorf("%s: %w", filepath.Join(d.rel(parts...), name), err)
	}
	return filepath.Join(d.real, d.rel(parts...), name), nil
}

// openDir opens the directory parts (safe names) of the pod directory as
// an os.Root of its own, making it when mk, and checks that it is that
// very directory: not, through a symlink, another one in the root dir.
// Work in it then cannot leave it, whatever its path names meanwhile.
func (d *podDirs) openDir(mk bool, parts ...string) (*os.Root, error) {
	rel := d.rel(parts...)
	if mk {
		if err := d.root.MkdirAll(rel, 0o700); err != nil {
			return nil, refused(rel, err)
		}
	}
	dir, err := d.root.OpenRoot(rel)
	if err != nil {
		return nil, refused(rel, err)
	}
	real, err := rootRealPath(dir)
	if want := filepath.Join(d.real, rel); err == nil && real != want {
		err = fmt.Errorf("%s is %s (a symlink in the pod directory): refused", want, real)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// pruneRecords removes the records of the pod uid that keep does not name
// (nor any temporary file left by a write that died), and the directories
// of containers that have none left.
func pruneRecords(rootDir, uid string, keep map[recordKey]bool) error {
	files := map[string]map[string]bool{} // by directory, relative to the pod directory
	for k := range keep {
		if k.check() != nil {
			continue
		}
		dir := filepath.Join(k.dir()...)
		if files[dir] == nil {
			files[dir] = map[string]bool{}
		}
		files[dir][k.file()] = true
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return err
	}
	defer d.Close()
	var errs []error
	prune := func(parts ...string) (left int) {
		dir, err := d.openDir(false, parts...)
		if errors.Is(err, fs.ErrNotExist) {
			return 0
		}
		if err != nil {
			errs = append(errs, err)
			return 1
		}
		defer dir.Close()
		names, err := readDirNames(dir)
		if err != nil {
			errs = append(errs, err)
		}
		kept := files[filepath.Join(parts...)]
		for _, n := range names {
			if kept[n] {
				left++
				continue
			}
			// Remove neither follows a symlink nor empties a directory.
			if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(d.rel(parts...), n), err))
				left++
			}
		}
		return left
	}
	prune(recordsDir, "sandbox")
	containers, err := d.openDir(false, recordsDir, "containers")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		errs = append(errs, err)
	default:
		names, err := readDirNames(containers)
		if err != nil {
			errs = append(errs, err)
		}
		for _, n := range names {
			if checkName("container name", n) != nil {
				continue
			}
			if prune(recordsDir, "containers", n) == 0 {
				if err := containers.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		containers.Close()
	}
	return errors.Join(errs...)
}

// readDirNames lists the directory r is.
func readDirNames(r *os.Root) ([]string, error) {
	f, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// recordsKeptFor names the records to keep of a pod: those its sandboxes
// and containers st holds were made from, and those a sync of pod makes.
func recordsKeptFor(pod *v1.Pod, st *podState) map[recordKey]bool {
	keep := map[recordKey]bool{podSandboxKey(pod): true}
	for _, c := range slices.Concat(allContainers(pod), ephemeralContainers(pod)) {
		keep[podContainerKey(c)] = true
	}
	for _, sb := range st.Sandboxes {
		keep[sandboxKey(sb)] = true
	}
	for _, c := range st.Containers {
		keep[containerKey(c)] = true
	}
	return keep
}

// records are the spec records of one pod as Plan reads them: the JSON
// its sandbox or container was made from, nil when none is kept (an
// object made by a podrun that kept none, or a record lost).
type records interface {
	sandbox(sb *engine.Sandbox) []byte
	container(c *engine.Container) []byte
}

// recordReader reads records from the root dir, which it opened without
// making anything: plan changes nothing.
type recordReader struct {
	root *os.Root // nil: there is no root dir, and no record
}

// openRecords opens the root dir for reading records; a missing or
// unreadable one has none.
func openRecords(rootDir string) recordReader {
	if rootDir == "" {
		rootDir = "."
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return recordReader{}
	}
	return recordReader{root: root}
}

func (r recordReader) Close() error {
	if r.root == nil {
		return nil
	}
	return r.root.Close()
}

// of is the records of the pod uid.
func (r recordReader) of(uid string) records { return podRecords{r: r, uid: uid} }

type podRecords struct {
	r   recordReader
	uid string
}

func (p podRecords) sandbox(sb *engine.Sandbox) []byte    { return p.r.read(p.uid, sandboxKey(sb)) }
func (p podRecords) container(c *engine.Container) []byte { return p.r.read(p.uid, containerKey(c)) }

// read is the record k of the pod uid, or nil: none, unreadable, larger
// than maxRecordBytes, or not what k's hashes were taken of. Paths are
// made of safe names only and opened within the root dir; a record is
// opened without blocking (a FIFO in its place) and read only when it is
// a regular file.
func (r recordReader) read(uid string, k recordKey) []byte {
	if r.root == nil || checkName("pod uid", uid) != nil || k.check() != nil {
		return nil
	}
	name := filepath.Join(append(append([]string{"pods", uid}, k.dir()...), k.file())...)
	f, err := r.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRecordBytes {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil || len(data) > maxRecordBytes || !k.matches(data) {
		return nil
	}
	return data
}
