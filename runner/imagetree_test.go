package runner

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tarEntry is one entry of a test tar stream.
type tarEntry struct {
	typ      byte
	name     string
	link     string
	mode     int64
	body     string
	size     int64 // the header's size when not len(body) (a lie)
	uid, gid int
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: time.Unix(1700000000, 0)}
		if e.mode == 0 {
			h.Mode = 0o644
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.size != 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil && e.size == 0 {
				t.Fatal(err)
			}
		}
	}
	if e := entries; len(e) > 0 && e[len(e)-1].size != 0 {
		// A header that lies about its size: the stream ends early.
		return buf.Bytes()
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// extractInto extracts data into a new directory "copy" of a new
// directory, and returns both (the parent is the "outside" an escape
// would reach).
func extractInto(t *testing.T, data []byte) (outside, dir string, st extractStats, err error) {
	t.Helper()
	outside = t.TempDir()
	dir = filepath.Join(outside, "copy")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	st, err = extractTree(bytes.NewReader(data), root)
	return outside, dir, st, err
}

// onlyCopy fails the test if outside holds anything but the copy (and
// the test's own keep-* files).
func onlyCopy(t *testing.T, outside string) {
	t.Helper()
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "copy" && !strings.HasPrefix(e.Name(), "keep") {
			t.Errorf("the extraction wrote %s outside its directory", filepath.Join(outside, e.Name()))
		}
	}
}

func TestExtractTree(t *testing.T) {
	data := makeTar(t,
		tarEntry{typ: tar.TypeDir, name: "./", mode: 0o755},
		tarEntry{typ: tar.TypeDir, name: "bin/", mode: 0o555},
		tarEntry{typ: tar.TypeReg, name: "bin/tool", mode: 0o4755, body: "#!/bin/sh\n", uid: 1234, gid: 5678},
		tarEntry{typ: tar.TypeSymlink, name: "bin/sh", link: "tool"},
		tarEntry{typ: tar.TypeLink, name: "bin/tool2", link: "bin/tool"},
		tarEntry{typ: tar.TypeReg, name: "etc/deep/conf", body: "x=1\n"}, // parents not listed
		tarEntry{typ: tar.TypeSymlink, name: "etc/mtab", link: "/proc/mounts"},
		tarEntry{typ: tar.TypeFifo, name: "run/fifo"},
		tarEntry{typ: tar.TypeChar, name: "dev/null", mode: 0o666},
	)
	_, dir, st, err := extractInto(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 2 {
		t.Errorf("skipped %d entries, want 2 (fifo, char device)", st.Skipped)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bin/tool")); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("bin/tool = %q, %v", b, err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "bin/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fs.FileMode(0o755) | fs.ModeSetuid; fi.Mode() != want {
		t.Errorf("bin/tool mode %v, want %v", fi.Mode(), want)
	}
	if sys := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (sys.Uid != 1234 || sys.Gid != 5678) {
		t.Errorf("bin/tool owned by %d:%d, want 1234:5678", sys.Uid, sys.Gid)
	}
	if !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("bin/tool mtime %v", fi.ModTime())
	}
	if sys := fi.Sys().(*syscall.Stat_t); sys.Nlink != 2 {
		t.Errorf("bin/tool has %d links, want 2 (bin/tool2)", sys.Nlink)
	}
	if l, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || l != "tool" {
		t.Errorf("bin/sh -> %q, %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "etc/mtab")); err != nil || l != "/proc/mounts" {
		t.Errorf("etc/mtab -> %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("bin: %v, %v; want mode 0555, set after its contents", fi.Mode(), err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("top: %v, %v; want the tar's 0755", fi.Mode(), err)
	}
	for _, p := range []string{"run/fifo", "dev/null"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it skipped", p, err)
		}
	}
}

// TestExtractTreeHostile: no entry of a hostile stream writes, links or
// changes anything outside the copy's directory.
func TestExtractTreeHostile(t *testing.T) {
	passwd, err := os.Lstat("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	passwdLinks := passwd.Sys().(*syscall.Stat_t).Nlink
	for _, tc := range []struct {
		name    string
		entries func(outside string) []tarEntry
		wantErr string
	}{
		{"dotdot name", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeReg, name: "../escaped", body: "x"}}
		}, "'..'"},
		{"dotdot inside a name", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeReg, name: "bin/../../escaped", body: "x"}}
		}, "'..'"},
		{"dotdot dir", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeDir, name: "../escaped/", mode: 0o777}}
		}, "'..'"},
		{"absolute name", func(outside string) []tarEntry {
			return []tarEntry{{typ: tar.TypeReg, name: filepath.Join(outside, "escaped"), body: "x"}}
		}, "not a relative name"},
		{"symlinked dir, absolute, then a file through it", func(outside string) []tarEntry {
			return []tarEntry{
				{typ: tar.TypeSymlink, name: "evil", link: outside},
				{typ: tar.TypeReg, name: "evil/escaped", body: "x"},
			}
		}, "escapes"},
		{"symlinked dir, relative, then a file through it", func(string) []tarEntry {
			return []tarEntry{
				{typ: tar.TypeDir, name: "a/", mode: 0o755},
				{typ: tar.TypeSymlink, name: "a/evil", link: "../.."},
				{typ: tar.TypeReg, name: "a/evil/escaped", body: "x"},
			}
		}, "escapes"},
		{"symlinked dir then a dir through it", func(outside string) []tarEntry {
			return []tarEntry{
				{typ: tar.TypeSymlink, name: "evil", link: outside},
				{typ: tar.TypeDir, name: "evil/escaped/", mode: 0o777},
			}
		}, "escapes"},
		{"symlink then a file of its name", func(outside string) []tarEntry {
			// The file replaces the symlink; it does not write through it.
			return []tarEntry{
				{typ: tar.TypeSymlink, name: "evil", link: filepath.Join(outside, "keep-target")},
				{typ: tar.TypeReg, name: "evil", body: "x"},
			}
		}, ""},
		{"hardlink to /etc/passwd", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeLink, name: "passwd", link: "/etc/passwd"}}
		}, "not a relative name"},
		{"hardlink through dotdot", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeLink, name: "passwd", link: "../../../../../../etc/passwd"}}
		}, "'..'"},
		{"hardlink through a symlinked dir", func(string) []tarEntry {
			return []tarEntry{
				{typ: tar.TypeSymlink, name: "etc", link: "/etc"},
				{typ: tar.TypeLink, name: "passwd", link: "etc/passwd"},
			}
		}, "escapes"},
		{"hardlink to a symlink to /etc/passwd", func(string) []tarEntry {
			// Links the symlink itself, never its target.
			return []tarEntry{
				{typ: tar.TypeSymlink, name: "pw", link: "/etc/passwd"},
				{typ: tar.TypeLink, name: "passwd", link: "pw"},
			}
		}, ""},
		{"header size lie", func(string) []tarEntry {
			return []tarEntry{{typ: tar.TypeReg, name: "big", body: "only this", size: 1 << 40}}
		}, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			outside, dir, _, err := func() (string, string, extractStats, error) {
				outside := t.TempDir()
				target := filepath.Join(outside, "keep-target")
				if err := os.WriteFile(target, []byte("original"), 0o644); err != nil {
					t.Fatal(err)
				}
				data = makeTar(t, tc.entries(outside)...)
				dir := filepath.Join(outside, "copy")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				root, err := os.OpenRoot(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer root.Close()
				st, err := extractTree(bytes.NewReader(data), root)
				return outside, dir, st, err
			}()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("extract: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("extract = %v, want an error with %q", err, tc.wantErr)
			}
			onlyCopy(t, outside)
			if b, err := os.ReadFile(filepath.Join(outside, "keep-target")); err != nil || string(b) != "original" {
				t.Errorf("a file outside changed: %q, %v", b, err)
			}
			fi, err := os.Lstat("/etc/passwd")
			if err != nil {
				t.Fatal(err)
			}
			if n := fi.Sys().(*syscall.Stat_t).Nlink; n != passwdLinks || !fi.ModTime().Equal(passwd.ModTime()) || fi.Mode() != passwd.Mode() {
				t.Errorf("/etc/passwd changed: %d links (was %d), mode %v, mtime %v", n, passwdLinks, fi.Mode(), fi.ModTime())
			}
			// Nothing in the copy is a hardlink of a file outside it.
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
					return nil
				}
				fi, err := os.Lstat(p)
				if err == nil && os.SameFile(fi, passwd) {
					t.Errorf("%s is /etc/passwd", p)
				}
				return nil
			})
		})
	}
}

// TestExtractTreeTruncated: a stream that ends in a header is an error.
func TestExtractTreeTruncated(t *testing.T) {
	data := makeTar(t, tarEntry{typ: tar.TypeReg, name: "a", body: "abc"})
	_, _, _, err := extractInto(t, data[:300])
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("extract of a truncated stream = %v, want unexpected EOF", err)
	}
}

// TestExtractTreeRefusesDeepNesting: an image whose directories nest
// deeper than podrun walks (maxWalkDepth) is refused at the first entry
// too deep, with a short message; one just that deep is extracted. The
// extraction of a chain 2000 deep, a stream of a few kilobytes, took a
// minute and a half (os.Root opens every level of every entry's name).
func TestExtractTreeRefusesDeepNesting(t *testing.T) {
	stream := func(depth int) *bytes.Buffer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i := 1; i <= depth; i++ {
			if err := tw.WriteHeader(&tar.Header{Name: strings.Repeat("d/", i), Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	extract := func(depth int) error {
		root, err := os.OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		_, err = extractTree(stream(depth), root)
		return err
	}
	if err := extract(maxWalkDepth); err != nil {
		t.Fatalf("a tree %d deep: %v", maxWalkDepth, err)
	}
	err := extract(maxWalkDepth + 1)
	if err == nil || !strings.Contains(err.Error(), "levels deep, more than podrun extracts") {
		t.Fatalf("a tree %d deep: %v, want it refused", maxWalkDepth+1, err)
	}
	if len(err.Error()) > 200 {
		t.Errorf("the refusal is %d bytes long: %.200s", len(err.Error()), err)
	}
}
