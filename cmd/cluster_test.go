package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The kubeconfig may be written after podrun starts: Get says so until
// it is, then makes the client once and closes Made.
func TestKubeClientWaitsForTheKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.conf")
	kc := &kubeClient{path: path, userAgent: "podrun/test"}
	made := kc.Made()
	if _, err := kc.Get(); !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("no file yet: %v", err)
	}
	select {
	case <-made:
		t.Fatal("Made closed without a client")
	default:
	}
	os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	first, err := kc.Get()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-made:
	default:
		t.Fatal("Made not closed once the client was made")
	}
	if again, _ := kc.Get(); again != first {
		t.Error("a second Get made another client")
	}
}
