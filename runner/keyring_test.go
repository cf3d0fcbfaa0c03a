package runner

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// pullRuntime is a Runtime that only pulls: images are missing until pulled,
// and a registry that accepts only user "good".
type pullRuntime struct {
	Runtime
	mu      sync.Mutex
	auths   []string
	present map[string]bool
	active  atomic.Int32
	most    atomic.Int32
	delay   time.Duration
}

func (p *pullRuntime) ImageStatus(ctx context.Context, ref string) (*Image, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.present[ref] {
		return &Image{ID: "id-" + ref}, nil
	}
	return nil, fmt.Errorf("image %s: %w", ref, ErrNotFound)
}

func (p *pullRuntime) PullImage(ctx context.Context, ref string, auth *AuthConfig) (*Image, error) {
	n := p.active.Add(1)
	defer p.active.Add(-1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(p.delay)
	p.mu.Lock()
	defer p.mu.Unlock()
	user := "<anonymous>"
	if auth != nil {
		user = auth.Username
	}
	p.auths = append(p.auths, ref+" "+user)
	if strings.HasPrefix(ref, "private/") && user != "good" {
		return nil, errors.New("unauthorized: authentication required")
	}
	if p.present == nil {
		p.present = map[string]bool{}
	}
	p.present[ref] = true
	return &Image{ID: "id-" + ref, Size: 1}, nil
}

func newPullRunner(rt Runtime, secrets ...*v1.Secret) *Runner {
	r := New(Config{Runtime: rt, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.SetObjects(nil, secrets)
	return r
}

func pullPod(secrets ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	for _, s := range secrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
	}
	return p
}

func TestEnsureImageCredentials(t *testing.T) {
	ctx := context.Background()
	cfg := func(user string) string {
		return `{"auths":{"docker.io":{"username":"` + user + `","password":"x"}}}`
	}
	rt := &pullRuntime{}
	r := newPullRunner(rt,
		secret("wrong", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, cfg("wrong")),
		secret("right", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, cfg("good")))
	var used []string
	node := &BasicKeyring{}
	node.Add("docker.io", AuthConfig{Username: "node"})
	opts := &ImageOptions{Credentials: node, Used: func(id string, _ time.Time) { used = append(used, id) }}

	// The pod's secrets first, in order, then the node's: the first that
	// works wins.
	c := &v1.Container{Name: "c", Image: "private/app:1", ImagePullPolicy: v1.PullIfNotPresent}
	if err := r.ensureImage(ctx, pullPod("missing", "wrong", "right"), c, opts); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rt.auths, ", "); got != "private/app:1 wrong, private/app:1 good" {
		t.Errorf("pulls: %s", got)
	}
	if fmt.Sprint(used) != "[id-private/app:1]" {
		t.Errorf("used: %v", used)
	}

	// Present: no pull, but used all the same.
	rt.auths = nil
	if err := r.ensureImage(ctx, pullPod(), c, opts); err != nil || len(rt.auths) != 0 || len(used) != 2 {
		t.Errorf("present image: err %v, pulls %v, used %v", err, rt.auths, used)
	}

	// All credentials refused: ErrImagePull, naming each attempt.
	c2 := &v1.Container{Name: "c", Image: "private/other:1", ImagePullPolicy: v1.PullAlways}
	err := r.ensureImage(ctx, pullPod("wrong"), c2, opts)
	var ie *imageError
	if !errors.As(err, &ie) || ie.reason != reasonErrImagePull || !strings.Contains(err.Error(), "as wrong") ||
		!strings.Contains(err.Error(), "as node") {
		t.Errorf("refused: %v", err)
	}

	// No credentials at all: anonymous.
	rt.auths = nil
	if err := r.ensureImage(ctx, pullPod(), &v1.Container{Name: "c", Image: "quay.io/app:1", ImagePullPolicy: v1.PullAlways}, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rt.auths, ", "); got != "quay.io/app:1 <anonymous>" {
		t.Errorf("anonymous pull: %s", got)
	}

	// Never: not pulled.
	err = r.ensureImage(ctx, pullPod(), &v1.Container{Name: "c", Image: "never:1", ImagePullPolicy: v1.PullNever}, opts)
	if !errors.As(err, &ie) || ie.reason != reasonErrImageNeverPull {
		t.Errorf("Never: %v", err)
	}
}

func TestSerializedPulls(t *testing.T) {
	for _, serialize := range []bool{true, false} {
		rt := &pullRuntime{delay: 50 * time.Millisecond}
		r := newPullRunner(rt)
		opts := &ImageOptions{SerializePulls: serialize}
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &v1.Container{Name: "c", Image: fmt.Sprintf("app%d:1", i%3), ImagePullPolicy: v1.PullIfNotPresent}
				if err := r.ensureImage(context.Background(), pullPod(), c, opts); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		most := rt.most.Load()
		if serialize && most != 1 {
			t.Errorf("serialized: %d pulls at once", most)
		}
		if !serialize && most < 2 {
			t.Errorf("parallel: at most %d pull at once", most)
		}
	}
}

func TestAdmitError(t *testing.T) {
	err := fmt.Errorf("admit: %w", &AdmitError{Reason: "OutOfDisk", Message: "12 MiB free"})
	if reason, ok := AdmitReason(err); !ok || reason != "OutOfDisk" {
		t.Errorf("AdmitReason = %q, %v", reason, ok)
	}
	if _, ok := AdmitReason(errors.New("x")); ok {
		t.Error("AdmitReason of another error")
	}
}
