package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// eventCutProxy is a proxy on a unix socket in front of dockerd's that
// passes every request, but can cut Docker's event streams: those open are
// broken, and new ones refused, until resumed. podrun behind it sees the
// engine as it is, without its events.
type eventCutProxy struct {
	sock string
	srv  *http.Server

	mu      sync.Mutex
	cut     bool
	streams map[*http.Request]context.CancelFunc
}

func startEventCutProxy(t *testing.T) *eventCutProxy {
	t.Helper()
	upstream := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		upstream = strings.TrimPrefix(h, "unix://")
	}
	// A short path: a unix socket's is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "podrun-evcut")
	if err != nil {
		t.Fatal(err)
	}
	p := &eventCutProxy{sock: filepath.Join(dir, "docker.sock"), streams: map[*http.Request]context.CancelFunc{}}
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", upstream)
		}},
		FlushInterval: -1, // the event stream, as it comes
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			rp.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			http.Error(w, "event stream cut by the test", http.StatusServiceUnavailable)
			return
		}
		p.streams[r] = cancel
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.streams, r)
			p.mu.Unlock()
		}()
		rp.ServeHTTP(w, r.WithContext(ctx))
	}), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	t.Cleanup(func() {
		p.srv.Close()
		os.RemoveAll(dir)
	})
	return p
}

// cutEvents breaks the open event streams and refuses new ones.
func (p *eventCutProxy) cutEvents() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, cancel := range p.streams {
		cancel()
	}
}

// TestWatchNoticesAnExitWhileEventsAreCut: podrun whose Docker event
// stream breaks goes back to relisting every second, and so restarts a
// container killed while no event can tell it. (With events flowing, the
// relist's period had grown: the one-hour resync would not catch it.)
func TestWatchNoticesAnExitWhileEventsAreCut(t *testing.T) {
	e := newEnv(t)
	proxy := startEventCutProxy(t)
	e.write("pod.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: cut
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "3600"]
`)
	port := freePort(t)
	cmd := exec.Command(podrunBin, e.args("watch", "--path", e.dir, "--sync-frequency", "1h",
		"--healthz-port", strconv.Itoa(port))...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+proxy.sock)
	var stderr bytes.Buffer // read only once the process has ended
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("podrun watch stderr:\n%s", stderr.String())
		}
	})
	waitFor(t, "the pod to come up", 2*time.Minute, func() bool { return e.running()["cut/app"] != "" })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	const period = "podrun_relist_period_seconds"
	waitFor(t, "the relist's period to grow while events flow", 2*time.Minute, func() bool { return metric(t, base, period, nil) >= 8 })

	proxy.cutEvents()
	waitFor(t, "the relist's period to drop to 1 s with the events cut", time.Minute, func() bool { return metric(t, base, period, nil) == 1 })
	old := e.running()["cut/app"]
	if err := docker.ContainerKill(context.Background(), old, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed container to be restarted, no event telling", time.Minute, func() bool {
		id := e.running()["cut/app"]
		return id != "" && id != old
	})
	if metric(t, base, period, nil) != 1 {
		t.Errorf("the relist's period grew while the events were cut")
	}
}
