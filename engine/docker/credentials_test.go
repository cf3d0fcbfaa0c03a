package docker

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigFileCredentials(t *testing.T) {
	dir := t.TempDir()
	// A credential helper: prints what `get` is asked for.
	helper := filepath.Join(dir, "docker-credential-fake")
	if err := os.WriteFile(helper, []byte(`#!/bin/sh
[ "$1" = get ] || exit 1
read server
printf '{"ServerURL":"%s","Username":"helper-user","Secret":"helper-pw"}' "$server"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	auth := base64.StdEncoding.EncodeToString([]byte("alice:pw"))
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{
  "auths": {
    "127.0.0.1:5000": {"auth": "`+auth+`"},
    "https://index.docker.io/v1/": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("hub:pw"))+`"}
  },
  "credHelpers": {"helped.example.com": "fake", "gone.example.com": "not-installed"}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := &ConfigFileCredentials{Path: path, Log: slog.New(slog.NewTextHandler(&logs, nil))}

	got := c.Lookup("127.0.0.1:5000/team/app:1")
	if len(got) != 1 || got[0].Username != "alice" || got[0].Password != "pw" || got[0].ServerAddress != "127.0.0.1:5000" {
		t.Errorf("Lookup(local registry) = %+v", got)
	}
	if got := c.Lookup("busybox:1.36"); len(got) != 1 || got[0].Username != "hub" {
		t.Errorf("Lookup(busybox) = %+v", got)
	}
	if got := c.Lookup("helped.example.com/app"); len(got) != 1 || got[0].Username != "helper-user" || got[0].Password != "helper-pw" {
		t.Errorf("Lookup(helper's registry) = %+v", got)
	}
	if got := c.Lookup("gone.example.com/app"); len(got) != 0 {
		t.Errorf("Lookup(registry of a missing helper) = %+v", got)
	}
	if !strings.Contains(logs.String(), "docker-credential-not-installed") {
		t.Errorf("no warning about the missing helper:\n%s", logs.String())
	}
	if got := c.Lookup("ghcr.io/x/y"); len(got) != 0 {
		t.Errorf("Lookup(unknown registry) = %+v", got)
	}

	// A missing file has no credentials; a broken one warns.
	if got := (&ConfigFileCredentials{Path: filepath.Join(dir, "none.json")}).Lookup("busybox"); got != nil {
		t.Errorf("missing file: %+v", got)
	}
	os.WriteFile(path, []byte("{"), 0o600)
	logs.Reset()
	if got := c.Lookup("busybox"); got != nil || !strings.Contains(logs.String(), "cannot read") {
		t.Errorf("broken file: %+v, logs %s", got, logs.String())
	}
}

func TestDefaultConfigFile(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", "/etc/dc")
	if got := DefaultConfigFile(); got != "/etc/dc/config.json" {
		t.Errorf("with DOCKER_CONFIG: %s", got)
	}
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultConfigFile(); got != "/home/u/.docker/config.json" {
		t.Errorf("default: %s", got)
	}
}
