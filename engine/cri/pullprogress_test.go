package cri

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podrun/podrun/engine"
)

// TestPullProgress pulls an image from a registry on 127.0.0.1 through a
// proxy that holds the layer's download halfway until podrun has reported
// the bytes done so far: the progress must come from containerd while the
// CRI pull runs, then each layer and the image's status when it is done; a
// second pull of the same image is up to date.
func TestPullProgress(t *testing.T) {
	needContainerd(t)
	reg := startTestRegistry(t)
	const layerSize = 4 << 20
	repo := "podrun-test/progress-" + randHex(8)
	layer := reg.push(t, repo, layerSize)

	// The proxy: everything passes, but the layer's body stops halfway
	// until release is closed.
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	upstream := &url.URL{Scheme: "http", Host: reg.host}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/blobs/"+layer.digest) {
			proxy.ServeHTTP(w, req)
			return
		}
		proxy.ServeHTTP(&halfwayWriter{ResponseWriter: w, half: layer.size / 2, release: release}, req)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ref := ln.Addr().String() + "/" + repo + ":1"

	var mu sync.Mutex
	var got []engine.PullProgress
	report := func(r string, p engine.PullProgress) {
		if r != ref {
			t.Errorf("progress of %q, want %q", r, ref)
		}
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		if p.Status == "Downloading" && p.Current > 0 && p.Current < p.Total {
			releaseOnce.Do(func() { close(release) })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := New(ctx, Options{Endpoint: endpoint, NodeName: "rt-pull-" + randHex(6), LogDir: filepath.Join(logRoot(t), "pull"),
		PullProgress: report, PullProgressInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() }) // after the image's removal below
	t.Cleanup(func() {
		// By ID: every name the pull made goes (ref, its digest, the ID).
		if img, err := r.ImageStatus(context.Background(), ref); err == nil {
			r.RemoveImage(context.Background(), img.ID)
		}
	})

	auth := &engine.AuthConfig{Username: reg.user, Password: reg.pass, ServerAddress: ln.Addr().String()}
	// The proxy releases the layer by itself after a while, so that a
	// pull whose progress is never reported still ends (and fails below).
	go func() {
		select {
		case <-release:
		case <-time.After(time.Minute):
			releaseOnce.Do(func() { close(release) })
		}
	}()
	if _, err := r.PullImage(ctx, ref, auth); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	first := got
	got = nil
	mu.Unlock()
	id := layerID(layer.digest)
	var partial, complete bool
	for _, p := range first {
		switch {
		case p.ID == id && p.Status == "Downloading" && p.Current > 0 && p.Current < p.Total:
			if p.Total != layer.size {
				t.Errorf("downloading: total %d, want the layer's %d", p.Total, layer.size)
			}
			partial = true
		case p.ID == id && p.Status == "Pull complete":
			if p.Current != layer.size || p.Total != layer.size {
				t.Errorf("pull complete: %d of %d bytes, want %d", p.Current, p.Total, layer.size)
			}
			complete = true
		}
	}
	if len(first) < 2 || !strings.HasPrefix(first[0].Status, "Pulling") {
		t.Fatalf("the pull's messages do not start with its start: %+v", first)
	}
	if !partial {
		t.Errorf("no progress of layer %s while it was halfway: %+v", id, first)
	}
	if !complete {
		t.Errorf("layer %s not reported complete: %+v", id, first)
	}
	if last := first[len(first)-1]; last.Status != "Status: Downloaded newer image for "+ref {
		t.Errorf("last message %+v, want the image's status", last)
	}

	if _, err := r.PullImage(ctx, ref, auth); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[len(got)-1].Status != "Status: Image is up to date for "+ref {
		t.Errorf("second pull: %+v, want it up to date", got)
	}
}

// halfwayWriter writes a response until half bytes of it are out, then
// waits for release before writing the rest.
type halfwayWriter struct {
	http.ResponseWriter
	half    int64
	written int64
	release <-chan struct{}
}

func (w *halfwayWriter) Write(b []byte) (int, error) {
	if w.written < w.half && w.written+int64(len(b)) >= w.half {
		n, err := w.ResponseWriter.Write(b[:w.half-w.written])
		w.written += int64(n)
		if err != nil {
			return n, err
		}
		w.ResponseWriter.(http.Flusher).Flush()
		<-w.release
		m, err := w.ResponseWriter.Write(b[n:])
		w.written += int64(m)
		return n + m, err
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	return n, err
}

func (w *halfwayWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// testRegistry is a docker-registry with basic auth on 127.0.0.1
// (hack/registry.sh), for one test.
type testRegistry struct {
	host, user, pass string
}

func startTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	r := &testRegistry{host: "127.0.0.1:" + strconv.Itoa(port), user: "podrun", pass: "s3cret-" + randHex(8)}
	script := filepath.Join("..", "..", "hack", "registry.sh")
	if out, err := exec.Command("bash", script, "start", dir, strconv.Itoa(port), r.user, r.pass).CombinedOutput(); err != nil {
		t.Fatalf("start the registry: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stop the registry: %v\n%s", err, out)
		}
	})
	return r
}

// blob is what the registry holds of one layer.
type blob struct {
	digest string
	size   int64
}

// push puts an image of one layer (a file of size random bytes, so that
// it does not compress) into the registry as repo:1, through the
// registry's HTTP API.
func (r *testRegistry) push(t *testing.T, repo string, size int) blob {
	t.Helper()
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	content := make([]byte, size)
	rand.Read(content)
	if err := tw.WriteHeader(&tar.Header{Name: "random", Mode: 0o644, Size: int64(size)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(tarred.Bytes())
	zw.Close()
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{sha256Digest(tarred.Bytes())}},
	})
	layer := blob{digest: r.upload(t, repo, gz.Bytes()), size: int64(gz.Len())}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config": map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json",
			"digest": r.upload(t, repo, config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
			"digest": layer.digest, "size": layer.size}},
	})
	req, _ := http.NewRequest(http.MethodPut, "http://"+r.host+"/v2/"+repo+"/manifests/1", bytes.NewReader(manifest))
	req.Header.Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
	r.do(t, req, http.StatusCreated)
	return layer
}

// upload puts one blob into the registry (a monolithic upload) and
// returns its digest.
func (r *testRegistry) upload(t *testing.T, repo string, data []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.host+"/v2/"+repo+"/blobs/uploads/", nil)
	resp := r.do(t, req, http.StatusAccepted)
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	digest := sha256Digest(data)
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	req, _ = http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	r.do(t, req, http.StatusCreated)
	return digest
}

func (r *testRegistry) do(t *testing.T, req *http.Request, want int) *http.Response {
	t.Helper()
	req.SetBasicAuth(r.user, r.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s, want %d\n%s", req.Method, req.URL.Path, resp.Status, want, body)
	}
	return resp
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestLayerID(t *testing.T) {
	for in, want := range map[string]string{
		"sha256:0123456789abcdef0123": "0123456789ab",
		"sha256:abc":                  "abc",
		"0123456789abcdef":            "0123456789ab",
	} {
		if got := layerID(in); got != want {
			t.Errorf("layerID(%q) = %q, want %q", in, got, want)
		}
	}
}
