package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigUnknownKeys: a key of podrun's config file that is no flag is
// an error naming the file, the line and the key, with the key meant.
func TestConfigUnknownKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "podrun.yaml")
	os.WriteFile(cfg, []byte("nod-name: edge-1\nroot-dir: /var/lib/podrun\n"+
		"node:\n  name: edge-1\n  labels: {zone: a}\n  colour: blue\n"+
		"images: []\n"), 0o600)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"version", "--config", cfg}, strings.NewReader(""), &out, &errOut)
	want := "podrun: " + cfg + `:1: unknown key "nod-name" (did you mean "node-name"?)` + "\n" +
		cfg + `:4: unknown key "node.name" (did you mean "node-name"?)` + "\n" +
		cfg + `:5: unknown key "node.labels" (did you mean "node-labels"?)` + "\n" +
		cfg + `:6: unknown key "node.colour"` + "\n" +
		cfg + `:7: unknown key "images"` + "\n"
	if code != exitBadInput || errOut.String() != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, errOut.String(), exitBadInput, want)
	}
	if out.Len() != 0 {
		t.Errorf("the command ran anyway:\n%s", out.String())
	}
}

// TestConfigFileThatIsNoConfigFile: a config file that is a FIFO (read
// blocking, it would hang the start until a writer came) or far larger
// than any config (read whole into memory) is bad input, at once.
func TestConfigFileThatIsNoConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 256<<20); err != nil { // sparse: no disk spent
		t.Fatal(err)
	}
	for file, want := range map[string]string{fifo: "not a regular file", huge: "over 1 MiB"} {
		done := make(chan string, 1)
		go func() {
			var errOut bytes.Buffer
			code := run(context.Background(), []string{"version", "--config", file}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
			done <- fmt.Sprintf("exit %d: %s", code, errOut.String())
		}()
		select {
		case got := <-done:
			if !strings.HasPrefix(got, fmt.Sprintf("exit %d: ", exitBadInput)) || !strings.Contains(got, want) {
				t.Errorf("config file %s: %s; want exit %d saying %q", filepath.Base(file), got, exitBadInput, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("config file %s: podrun still reads it after 30 s", filepath.Base(file))
		}
	}
}

// TestConfigKnownKeys: one file serves every command, so a flag of any of
// them is a key each accepts; keys are read whatever their case, as viper
// reads them.
func TestConfigKnownKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "podrun.yaml")
	os.WriteFile(cfg, []byte("# podrun\nnode-name: edge-1\nhealthz-port: 10300\npath: [/etc/podrun/manifests]\n"+
		"Log-Level: warn\nwait: ready\n"), 0o600)
	for _, cmd := range []string{"version", "validate"} {
		var errOut bytes.Buffer
		args := []string{cmd, "--config", cfg}
		if cmd == "validate" {
			args = append(args, "-")
		}
		code := run(context.Background(), args, strings.NewReader("apiVersion: v1\nkind: List\nitems: []\n"), &bytes.Buffer{}, &errOut)
		if code != exitOK {
			t.Errorf("%s: exit %d: %s", cmd, code, errOut.String())
		}
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, []byte("# nothing yet\n"), 0o600)
	if code := run(context.Background(), []string{"version", "--config", empty}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != exitOK {
		t.Errorf("a config file of comments only: exit %d", code)
	}

	keys := configKeys(newRootCmd(&globalOptions{}))
	for _, k := range []string{"node-name", "path", "healthz-port", "wait", "grace-period", "output", "daemon"} {
		if !slices.Contains(keys, k) {
			t.Errorf("config keys lack %q", k)
		}
	}
	for _, k := range []string{"config", "help"} {
		if slices.Contains(keys, k) {
			t.Errorf("config keys hold %q", k)
		}
	}
}
