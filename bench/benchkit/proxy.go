package benchkit

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// DockerProxy is a reverse proxy on a unix socket in front of the engine's
// socket that counts the requests going through it, by endpoint: podrun
// run with DOCKER_HOST=proxy.Host() has every Docker API call it makes
// counted, those its runtime methods make inside (inspects) included.
type DockerProxy struct {
	Sock string
	srv  *http.Server

	mu     sync.Mutex
	counts map[string]int
	bytes  map[string]int64
}

// StartDockerProxy listens on a socket in dir and forwards to the engine
// (DOCKER_HOST when it is a unix socket, else /var/run/docker.sock).
func StartDockerProxy(dir string) (*DockerProxy, error) {
	upstream := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		upstream = strings.TrimPrefix(h, "unix://")
	}
	sock := filepath.Join(dir, "docker-proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	p := &DockerProxy{Sock: sock, counts: map[string]int{}, bytes: map[string]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = "docker"
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", upstream)
			},
			MaxIdleConnsPerHost: 64,
		},
		FlushInterval: -1, // the events stream, as it comes
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := Endpoint(r.Method, r.URL.Path)
		if key == "GET /containers/json" && strings.Contains(r.URL.Query().Get("filters"), "io.podrun.pod.uid") {
			key += " (one pod)"
		}
		p.mu.Lock()
		p.counts[key]++
		p.mu.Unlock()
		cw := &countingWriter{ResponseWriter: w}
		rp.ServeHTTP(cw, r)
		p.mu.Lock()
		p.bytes[key] += cw.n
		p.mu.Unlock()
	}), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// countingWriter counts the bytes of a response body.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// Flush passes flushes on (the event stream needs them).
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (hijacked by
// exec and attach).
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Bytes returns the response bytes so far by endpoint.
func (p *DockerProxy) Bytes() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.bytes)
}

// Host is the DOCKER_HOST value that goes through the proxy.
func (p *DockerProxy) Host() string { return "unix://" + p.Sock }

// Counts returns the requests so far by endpoint.
func (p *DockerProxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Close stops the proxy.
func (p *DockerProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
}

var apiVersion = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

// Endpoint names a Docker API request without its IDs and names:
// "GET /containers/json", "POST /containers/{id}/start",
// "GET /images/{name}/json". (The proxy tells a list of one pod's objects,
// filtered by io.podrun.pod.uid, as "GET /containers/json (one pod)".)
func Endpoint(method, path string) string {
	path = apiVersion.ReplaceAllString(path, "")
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) >= 3 && seg[0] == "images":
		// Image names hold slashes: keep the first and the last segment.
		path = "/images/{name}/" + seg[len(seg)-1]
	case len(seg) >= 3 && (seg[0] == "containers" || seg[0] == "exec" || seg[0] == "networks"):
		path = "/" + seg[0] + "/{id}/" + strings.Join(seg[2:], "/")
	case len(seg) == 2 && seg[0] == "containers" && seg[1] != "json" && seg[1] != "create" && seg[1] != "prune":
		path = "/containers/{id}"
	}
	return method + " " + path
}

// Diff returns b - a by key, keys sorted, zero differences left out.
func Diff(a, b map[string]int) ([]string, map[string]int) {
	out := map[string]int{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, out
}
