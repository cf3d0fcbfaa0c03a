package engine

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMatchRegistries(t *testing.T) {
	keys := []string{
		"https://index.docker.io/v1/", "quay.io", "quay.io/coreos", "*.example.com", "registry.local:5000",
		"127.0.0.1:5000/team", "localhost", "http://plain.example.org/v2/",
	}
	for _, tc := range []struct {
		image string
		want  []string
	}{
		// Docker Hub, however it is spelled, gets the key docker login wrote.
		{"busybox", []string{"index.docker.io"}},
		{"library/busybox:1.36", []string{"index.docker.io"}},
		{"docker.io/library/busybox@sha256:" + strings.Repeat("a", 64), []string{"index.docker.io"}},
		{"index.docker.io/user/app", []string{"index.docker.io"}},
		{"user/app:v1", []string{"index.docker.io"}},
		// The most specific key first; a path must be a prefix.
		{"quay.io/coreos/etcd:v3", []string{"quay.io/coreos", "quay.io"}},
		{"quay.io/other/app", []string{"quay.io"}},
		// Globs match one host part each.
		{"r.example.com/app", []string{"*.example.com"}},
		{"a.b.example.com/app", nil},
		{"example.com/app", nil},
		// Ports must be equal.
		{"registry.local:5000/app", []string{"registry.local:5000"}},
		{"registry.local/app", nil},
		{"registry.local:5001/app", nil},
		{"127.0.0.1:5000/team/app:1", []string{"127.0.0.1:5000/team"}},
		{"127.0.0.1:5000/other/app:1", nil},
		{"localhost/app", []string{"localhost"}},
		{"localhost:5000/app", nil},
		// Schemes and /v2/ are dropped from keys.
		{"plain.example.org/app", []string{"plain.example.org"}},
		// Not Docker Hub: no fallback.
		{"ghcr.io/org/app", nil},
	} {
		got := MatchRegistries(keys, tc.image)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("MatchRegistries(%s) = %v, want %v", tc.image, got, tc.want)
		}
	}
	// Without a Docker Hub key, Hub images match nothing.
	if got := MatchRegistries([]string{"quay.io"}, "busybox"); len(got) != 0 {
		t.Errorf("no hub key: %v", got)
	}
	// A key "docker.io" matches the normalized name directly.
	if got := MatchRegistries([]string{"docker.io"}, "busybox"); fmt.Sprint(got) != "[docker.io]" {
		t.Errorf("docker.io key: %v", got)
	}
}

func secret(name string, typ v1.SecretType, key, data string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Type: typ,
		Data: map[string][]byte{key: []byte(data)}}
}

func TestKeyringFromSecrets(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret:with:colons"))
	secrets := []*v1.Secret{
		secret("json", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"127.0.0.1:5000":{"auth":"`+auth+`"},"https://index.docker.io/v1/":{"username":"bob","password":"pw"}}}`),
		secret("cfg", v1.SecretTypeDockercfg, v1.DockerConfigKey, `{"127.0.0.1:5000":{"username":"carol","password":"pw2"}}`),
		secret("opaque", v1.SecretTypeOpaque, "x", "y"),
		secret("broken", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths":`),
	}
	k, err := KeyringFromSecrets(secrets)
	if err == nil || !strings.Contains(err.Error(), "default/opaque") || !strings.Contains(err.Error(), "default/broken") {
		t.Errorf("error = %v, want one naming the opaque and the broken secrets", err)
	}
	got := k.Lookup("127.0.0.1:5000/app:1")
	if len(got) != 2 || got[0].Username != "alice" || got[0].Password != "s3cret:with:colons" ||
		got[0].ServerAddress != "127.0.0.1:5000" || got[1].Username != "carol" {
		t.Errorf("Lookup(registry) = %+v", got)
	}
	if got := k.Lookup("busybox"); len(got) != 1 || got[0].Username != "bob" {
		t.Errorf("Lookup(busybox) = %+v", got)
	}
	if got := k.Lookup("ghcr.io/x/y"); len(got) != 0 {
		t.Errorf("Lookup(other registry) = %+v", got)
	}
	if _, err := KeyringFromSecrets([]*v1.Secret{secret("bad", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
		`{"auths":{"r.io":{"auth":"not base64!"}}}`)}); err == nil {
		t.Error("bad auth: nil error")
	}
}
