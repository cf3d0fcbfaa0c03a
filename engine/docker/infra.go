package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/podrun/podrun/engine"
)

// InfraImageRepo is the repository of the infra images podrun builds from
// its own binary; the tag is a short hash of the binary.
const InfraImageRepo = "podrun/pause"

// LabelInfraImage marks the infra images podrun builds (for image GC and
// for people).
const LabelInfraImage = "io.podrun.infra"

// EnsureInfraImage returns a local image to run sandboxes with: ref itself
// when it is present or can be pulled within the infra pull timeout;
// otherwise (an air-gapped box) an image podrun builds: of the runtime's
// infra program (Options.InfraProgram) at /pause where it has one, else of
// the podrun executable exe (os.Executable() in production), whose
// entrypoint is `/podrun pause`. The built image is tagged
// podrun/pause:<short sha256 of the program or exe> and reused while that
// tag exists; with Options.DefaultInfraRef it is used, when it exists,
// without trying to pull an absent ref. An empty ref skips straight to the
// built image. A pull that fails is no error, and says why at debug level
// only: one info line says which image sandboxes run.
func (r *Runtime) EnsureInfraImage(ctx context.Context, ref, exe string) (string, error) {
	if ref == "" {
		b, err := r.builtInfra(exe)
		if err != nil {
			return "", err
		}
		return r.ensureBuiltInfra(ctx, b, "built-in infra image used: no infra image was named", "")
	}
	_, err := r.ImageStatus(ctx, ref)
	if err == nil {
		r.log.Info("infra image present", "image", ref)
		return ref, nil
	}
	if !errors.Is(err, engine.ErrNotFound) {
		return "", fmt.Errorf("infra image: %w", err)
	}
	b, err := r.builtInfra(exe)
	if err != nil {
		return "", err
	}
	if r.defaultInfraRef {
		if _, err := r.ImageStatus(ctx, b.tag); err == nil {
			r.log.Info("built-in infra image used: the default is not here, and the built-in one was built before",
				"image", b.tag, "default", ref)
			return b.tag, nil
		} else if !errors.Is(err, engine.ErrNotFound) {
			return "", fmt.Errorf("infra image: %w", err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, r.infraPullTimeout)
	_, err = r.PullImage(pctx, ref, nil)
	cancel()
	if err == nil {
		r.log.Info("infra image pulled", "image", ref)
		return ref, nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("infra image: %w", ctx.Err())
	}
	if errors.Is(err, engine.ErrUnavailable) {
		return "", fmt.Errorf("infra image: %w", err)
	}
	r.log.Debug("infra image pull failed", "image", ref, "err", err)
	return r.ensureBuiltInfra(ctx, b, "built-in infra image used: the infra image cannot be pulled (-v debug says why)", ref)
}

// builtInfraImage is the infra image podrun builds: its files (none: exe
// with what it needs), what it is built from, and its tag.
type builtInfraImage struct {
	files []rootfsFile
	exe   string
	from  string
	tag   string
}

// builtInfra describes the infra image built of the runtime's infra
// program, else of exe.
func (r *Runtime) builtInfra(exe string) (*builtInfraImage, error) {
	b := &builtInfraImage{exe: exe, from: exe}
	var sum string
	if r.infraProgram != nil {
		// A few hundred bytes: each sandbox costs kilobytes, not the
		// memory of a podrun's runtime and package initialisation.
		b.files = []rootfsFile{{path: "/pause", data: r.infraProgram}}
		b.from = "podrun's pause program"
		h := sha256.Sum256(r.infraProgram)
		sum = hex.EncodeToString(h[:])
	} else {
		if exe == "" {
			return nil, errors.New("infra image: no podrun executable to build one from")
		}
		var err error
		if sum, err = fileSHA256(exe); err != nil {
			return nil, fmt.Errorf("infra image: %w", err)
		}
	}
	b.tag = InfraImageRepo + ":" + sum[:12]
	return b, nil
}

// ensureBuiltInfra returns b's tag, building the image unless it was built
// before, and logs msg (at info) with the image, ref when not empty, and
// whether it was built now.
func (r *Runtime) ensureBuiltInfra(ctx context.Context, b *builtInfraImage, msg, ref string) (string, error) {
	built := false
	if _, err := r.ImageStatus(ctx, b.tag); errors.Is(err, engine.ErrNotFound) {
		if err := r.buildInfraImage(ctx, b.tag, b.exe, b.files); err != nil {
			return "", fmt.Errorf("infra image: build %s from %s: %w", b.tag, b.from, err)
		}
		built = true
	} else if err != nil {
		return "", fmt.Errorf("infra image: %w", err)
	}
	attrs := []any{"image", b.tag}
	if ref != "" {
		attrs = append(attrs, "instead_of", ref)
	}
	if built {
		attrs = append(attrs, "built_now_from", b.from)
	}
	r.log.Info(msg, attrs...)
	return b.tag, nil
}

// buildInfraImage imports (as `docker import`) a rootfs streamed as a tar:
// files, whose first is the entrypoint, when given; else exe at /podrun
// and, when exe is dynamically linked, its ELF interpreter and the shared
// libraries it needs, with `podrun pause` the entrypoint.
func (r *Runtime) buildInfraImage(ctx context.Context, tag, exe string, files []rootfsFile) error {
	entrypoint := []string{"/podrun", "pause"}
	var libDirs []string
	if len(files) > 0 {
		entrypoint = []string{files[0].path}
	} else {
		var err error
		if files, libDirs, err = infraRootfs(exe); err != nil {
			return err
		}
	}
	ep, err := json.Marshal(entrypoint)
	if err != nil {
		return err
	}
	changes := []string{
		"ENTRYPOINT " + string(ep),
		"LABEL " + LabelInfraImage + "=true",
	}
	if len(libDirs) > 0 {
		// The loader finds the libraries where they were found on this host,
		// whatever its built-in search path.
		changes = append(changes, "ENV LD_LIBRARY_PATH="+strings.Join(libDirs, ":"))
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootfs(pw, files)) }()
	defer pr.Close()
	// No call timeout (timeout.go): dockerd answers once it has read the
	// whole upload, which lasts as long as the rootfs takes to write.
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, tag,
		image.ImportOptions{Changes: changes, Message: "podrun infra image"})
	if err != nil {
		return wrap(err)
	}
	defer rc.Close()
	return r.readProgress(rc, tag)
}

// rootfsFile is one file of the infra image, at path in the image: src on
// this host, or data.
type rootfsFile struct {
	path string
	src  string
	data []byte
}

// infraRootfs lists the files of the infra image for exe, and the
// directories its libraries are in (none for a static exe).
func infraRootfs(exe string) ([]rootfsFile, []string, error) {
	files := []rootfsFile{{path: "/podrun", src: exe}}
	f, err := elf.Open(exe)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", exe, err)
	}
	defer f.Close()
	interp, err := interpreter(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", exe, err)
	}
	if interp == "" {
		return files, nil, nil // static: the binary is all it needs
	}
	files = append(files, rootfsFile{path: interp, src: interp})

	dirs := libSearchDirs(f, filepath.Dir(exe))
	type need struct{ name, by string }
	var queue []need
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", exe, err)
	}
	for _, l := range libs {
		queue = append(queue, need{l, exe})
	}
	seen := map[string]bool{}
	var libDirs []string
	dirSeen := map[string]bool{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n.name] {
			continue
		}
		seen[n.name] = true
		path, lf, err := findLibrary(n.name, dirs, f.Machine, f.Class)
		if err != nil {
			return nil, nil, fmt.Errorf("library %s needed by %s: %w", n.name, n.by, err)
		}
		files = append(files, rootfsFile{path: path, src: path})
		if d := filepath.Dir(path); !dirSeen[d] {
			dirSeen[d] = true
			libDirs = append(libDirs, d)
		}
		more, err := lf.ImportedLibraries()
		dirs = append(dirs, libSearchDirs(lf, filepath.Dir(path))...)
		lf.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, m := range more {
			queue = append(queue, need{m, path})
		}
	}
	return files, libDirs, nil
}

// interpreter is the ELF interpreter (PT_INTERP) of f; "" for a static
// binary.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// findLibrary finds a shared library the way the dynamic loader would:
// a name with a slash is a path; otherwise the first file of that name in
// dirs that is an ELF object of the same machine and class.
func findLibrary(name string, dirs []string, machine elf.Machine, class elf.Class) (string, *elf.File, error) {
	candidates := dirs
	if strings.Contains(name, "/") {
		candidates = []string{""}
	}
	for _, d := range candidates {
		path := name
		if d != "" {
			path = filepath.Join(d, name)
		}
		lf, err := elf.Open(path)
		if err != nil {
			continue
		}
		if lf.Machine == machine && lf.Class == class {
			return path, lf, nil
		}
		lf.Close()
	}
	return "", nil, fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}

// libSearchDirs are the directories the loader searches for f's libraries:
// its RUNPATH/RPATH ($ORIGIN is origin), LD_LIBRARY_PATH, ld.so.conf.d, and
// the usual system directories.
func libSearchDirs(f *elf.File, origin string) []string {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(d, "${ORIGIN}", origin)
				d = strings.ReplaceAll(d, "$ORIGIN", origin)
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	confs, _ := filepath.Glob("/etc/ld.so.conf.d/*.conf")
	for _, c := range confs {
		dirs = append(dirs, ldConfDirs(c)...)
	}
	if t := multiarchTriplet(); t != "" {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
}

// ldConfDirs are the directories an ld.so.conf file names.
func ldConfDirs(path string) []string {
	fh, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer fh.Close()
	var dirs []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "/") {
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// multiarchTriplet is Debian's multiarch directory name for this machine.
func multiarchTriplet() string {
	return map[string]string{
		"amd64":   "x86_64-linux-gnu",
		"arm64":   "aarch64-linux-gnu",
		"arm":     "arm-linux-gnueabihf",
		"386":     "i386-linux-gnu",
		"ppc64le": "powerpc64le-linux-gnu",
		"s390x":   "s390x-linux-gnu",
		"riscv64": "riscv64-linux-gnu",
	}[runtime.GOARCH]
}

// writeRootfs writes files (symlinks followed: each is a regular file) and
// their parent directories as a tar.
func writeRootfs(w io.Writer, files []rootfsFile) error {
	mtime := time.Unix(0, 0)
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(f.path); d != "/" && d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted) // parents first
	for _, d := range sorted {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: mtime,
		}); err != nil {
			return err
		}
	}
	written := map[string]bool{}
	for _, f := range files {
		if written[f.path] {
			continue
		}
		written[f.path] = true
		if err := writeFile(tw, f, mtime); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeFile(tw *tar.Writer, f rootfsFile, mtime time.Time) error {
	if f.data != nil {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: 0o755, Size: int64(len(f.data)), ModTime: mtime,
		}); err != nil {
			return err
		}
		_, err := tw.Write(f.data)
		return err
	}
	fh, err := os.Open(f.src)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: 0o755, Size: st.Size(), ModTime: mtime,
	}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, fh); err != nil {
		return fmt.Errorf("%s: %w", f.src, err)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
