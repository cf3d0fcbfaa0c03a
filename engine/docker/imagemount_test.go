package docker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/podrun/podrun/engine"
)

// apiServer is a Docker Engine API stand-in that answers /_ping with its
// API version and records the bodies of container creations.
type apiServer struct {
	*httptest.Server
	mu      sync.Mutex
	pings   int
	creates []string // the request paths
	bodies  [][]byte // and their bodies
}

func newAPIServer(t *testing.T, version string) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case strings.HasSuffix(req.URL.Path, "/_ping"):
			s.pings++
			w.Header().Set("API-Version", version)
			_, _ = io.WriteString(w, "OK")
		case strings.HasSuffix(req.URL.Path, "/containers/create"):
			b, _ := io.ReadAll(req.Body)
			s.creates = append(s.creates, req.URL.Path)
			s.bodies = append(s.bodies, b)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"Id":"0123456789ab"}`)
		default:
			http.Error(w, `{"message":"not in this test"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestImageMountByAPIVersion: at Engine API 1.48 an image mount reaches
// Docker as a read-only mount of type "image" (with its subpath), and
// MountsImages says so, asking the engine once; at 1.41 MountsImages says
// no and a container that names an image mount is refused before any
// request is sent.
func TestImageMountByAPIVersion(t *testing.T) {
	t.Setenv("DOCKER_API_VERSION", "") // negotiated, as podrun runs
	const img = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cfg := &engine.ContainerConfig{Name: "app", Image: "busybox", Mounts: []engine.Mount{
		{Image: img, ContainerPath: "/data"},
		{Image: img, ImageSubPath: "etc/app.conf", ContainerPath: "/conf"},
		{HostPath: "/var/lib/podrun/x", ContainerPath: "/x"},
	}}
	sb := &engine.SandboxConfig{Pod: engine.PodRef{Name: "p", Namespace: "default", UID: "u1"}}
	ctx := context.Background()

	for _, tc := range []struct {
		version string
		mounts  bool
	}{{"1.48", true}, {"1.51", true}, {"1.41", false}} {
		t.Run(tc.version, func(t *testing.T) {
			srv := newAPIServer(t, tc.version)
			r, err := New(Options{NodeName: "n1", Host: "tcp://" + strings.TrimPrefix(srv.URL, "http://"), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for range 2 {
				ok, err := r.MountsImages(ctx)
				if err != nil || ok != tc.mounts {
					t.Fatalf("MountsImages = %v, %v; want %v", ok, err, tc.mounts)
				}
			}
			srv.mu.Lock()
			pings := srv.pings
			srv.mu.Unlock()
			if pings != 1 {
				t.Errorf("%d pings for two asks, want 1", pings)
			}
			config, hc, err := r.containerConfig(ctx, "sb1", sb, cfg)
			if !tc.mounts {
				if err == nil || !strings.Contains(err.Error(), "no image mount") {
					t.Fatalf("containerConfig with an image mount at API %s: %v, want a refusal", tc.version, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.cli.ContainerCreate(ctx, config, hc, nil, nil, "podrun_app"); err != nil {
				t.Fatal(err)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.creates) != 1 || !strings.HasPrefix(srv.creates[0], "/v"+tc.version+"/") {
				t.Fatalf("creates %v, want one at /v%s/", srv.creates, tc.version)
			}
			var sent struct{ HostConfig container.HostConfig }
			if err := json.Unmarshal(srv.bodies[0], &sent); err != nil {
				t.Fatal(err)
			}
			want := []mount.Mount{
				{Type: mount.TypeImage, Source: img, Target: "/data", ReadOnly: true},
				{Type: mount.TypeImage, Source: img, Target: "/conf", ReadOnly: true,
					ImageOptions: &mount.ImageOptions{Subpath: "etc/app.conf"}},
			}
			if got := sent.HostConfig.Mounts; !reflect.DeepEqual(got, want) {
				t.Errorf("mounts sent: %+v, want %+v", got, want)
			}
			if b := sent.HostConfig.Binds; len(b) != 1 || b[0] != "/var/lib/podrun/x:/x" {
				t.Errorf("binds sent: %v, want the host path alone", b)
			}
		})
	}
}

// TestImageMountSubPathRefused: a subpath that is not a clean relative
// path never reaches the engine.
func TestImageMountSubPathRefused(t *testing.T) {
	for _, sub := range []string{"/etc", "../x", "a/../../b", "a//b", ".."} {
		if _, err := imageMount(engine.Mount{Image: "sha256:x", ImageSubPath: sub, ContainerPath: "/d"}); err == nil {
			t.Errorf("subpath %q accepted", sub)
		}
	}
}
