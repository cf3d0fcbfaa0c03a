package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallingRegistry is a registry (API v2, on 127.0.0.1) whose one image
// has a layer it sends the first bytes of and then nothing: a registry
// that stalled mid-download, on which Docker waits for good.
type stallingRegistry struct {
	host string
	stop chan struct{}

	mu sync.Mutex
	// begun counts the layer's downloads begun, ended those dockerd gave
	// up (its request ended).
	begun, ended int
}

func startStallingRegistry(t *testing.T) *stallingRegistry {
	t.Helper()
	layer := make([]byte, 64<<10)
	rand.Read(layer)
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	layerDigest := digest(layer)
	config := []byte(fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[%q]}}`,
		layerDigest))
	configDigest := digest(config)
	manifest := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",`+
		`"config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":%d,"digest":%q},`+
		`"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":%d,"digest":%q}]}`,
		len(config), configDigest, len(layer), layerDigest))

	reg := &stallingRegistry{stop: make(chan struct{})}
	blob := func(w http.ResponseWriter, b []byte) {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Header().Set("Docker-Content-Digest", digest(b))
		w.Write(b)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		switch p := r.URL.Path; {
		case p == "/v2/":
		case strings.HasSuffix(p, "/manifests/1") || strings.HasSuffix(p, "/manifests/"+digest(manifest)):
			w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
			blob(w, manifest)
		case strings.HasSuffix(p, "/blobs/"+configDigest):
			blob(w, config)
		case strings.HasSuffix(p, "/blobs/"+layerDigest):
			w.Header().Set("Content-Length", fmt.Sprint(len(layer)))
			w.Write(layer[:4096])
			w.(http.Flusher).Flush()
			reg.mu.Lock()
			reg.begun++
			reg.mu.Unlock()
			select {
			case <-r.Context().Done():
				reg.mu.Lock()
				reg.ended++
				reg.mu.Unlock()
			case <-reg.stop:
			}
		default:
			http.NotFound(w, r)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(reg.stop)
		srv.Close()
	})
	reg.host = ln.Addr().String()
	return reg
}

func (r *stallingRegistry) downloads() (begun, ended int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.begun, r.ended
}

// TestOncePullWithoutProgressGivesUp: a pull from a registry that stalls
// mid-layer is cancelled once it has reported no progress for
// --image-pull-progress-deadline, as the kubelet's Docker runtime
// cancelled it: the pod's container waits with the pull's error
// (ErrImagePull, then ImagePullBackOff), and the pull is tried again
// after the back-off. Without the deadline the first pull never ends
// (Docker waits on the registry for good) and the pod shows
// ContainerCreating until the timeout.
func TestOncePullWithoutProgressGivesUp(t *testing.T) {
	e := newEnv(t)
	reg := startStallingRegistry(t)
	image := reg.host + "/podrun-stall-" + e.node + ":1"
	e.write("stall.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: stall
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: %q, imagePullPolicy: IfNotPresent}
`, image))

	// The image back-off is 10 s after the first failure: a 45 s wait
	// sees the second pull.
	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "45s", "--image-pull-progress-deadline", "2s", "-o", "json")
	if r.code != 1 {
		t.Fatalf("once: exit %d, want 1 (timed out)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "report", r.stdout, "stall-"+e.node, "cancelled: no progress for 2s (--image-pull-progress-deadline)")
	if !strings.Contains(r.stdout, `"ErrImagePull"`) && !strings.Contains(r.stdout, `"ImagePullBackOff"`) {
		t.Errorf("the report shows no pull failure:\n%s", r.stdout)
	}
	begun, ended := reg.downloads()
	t.Logf("downloads of the stalled layer: %d begun, %d ended by dockerd", begun, ended)
	if begun < 2 {
		t.Errorf("the stalled layer's download began %d times in 45 s, want the pull tried again after its back-off", begun)
	}
}
