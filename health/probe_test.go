package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// execFunc is an Execer made of a function.
type execFunc func(ctx context.Context, id string, cmd []string) (int, []byte, error)

func (f execFunc) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	return f(ctx, id, cmd)
}

func execProbe(cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}, TimeoutSeconds: 1}
}

func TestExecProbe(t *testing.T) {
	t.Parallel()
	var gotCmd []string
	var gotID string
	ex := execFunc(func(ctx context.Context, id string, cmd []string) (int, []byte, error) {
		gotID, gotCmd = id, cmd
		switch cmd[0] {
		case "ok":
			return 0, []byte("fine\n"), nil
		case "fail":
			return 1, []byte("boom\n"), nil
		case "silent":
			return 3, nil, nil
		case "hang":
			<-ctx.Done()
			return -1, nil, fmt.Errorf("exec: %w", ctx.Err())
		}
		return -1, nil, errors.New("container is not running")
	})
	c := &v1.Container{Name: "app", Env: []v1.EnvVar{
		{Name: "PORT", Value: "8080"},
		{Name: "FROM", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}}
	tgt := Target{ContainerID: "c1", Container: c, Exec: ex}

	cases := []struct {
		name    string
		cmd     []string
		want    Result
		msg     string
		wantErr bool
	}{
		{"exit 0 is success", []string{"ok"}, Success, "fine", false},
		{"non-zero exit is failure with the output", []string{"fail"}, Failure, "boom", false},
		{"non-zero exit without output says the code", []string{"silent", "x"}, Failure, `command "silent x" exited with 3`, false},
		{"runtime error is unknown", []string{"gone"}, Unknown, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, msg, err := RunProbe(context.Background(), tgt, execProbe(tc.cmd...))
			if res != tc.want || msg != tc.msg || (err != nil) != tc.wantErr {
				t.Fatalf("got %v %q %v, want %v %q err=%v", res, msg, err, tc.want, tc.msg, tc.wantErr)
			}
			if gotID != "c1" {
				t.Fatalf("exec in %q, want c1", gotID)
			}
		})
	}

	t.Run("expands static env", func(t *testing.T) {
		if _, _, err := RunProbe(context.Background(), tgt, execProbe("ok", "$(PORT)", "$(FROM)", "$(NOPE)", "$$(PORT)")); err != nil {
			t.Fatal(err)
		}
		want := []string{"ok", "8080", "", "$(NOPE)", "$(PORT)"}
		if strings.Join(gotCmd, "|") != strings.Join(want, "|") {
			t.Fatalf("command %q, want %q", gotCmd, want)
		}
	})

	t.Run("no execer is unknown", func(t *testing.T) {
		res, _, err := RunProbe(context.Background(), Target{ContainerID: "c1"}, execProbe("ok"))
		if res != Unknown || err == nil {
			t.Fatalf("got %v %v, want Unknown and an error", res, err)
		}
	})

	t.Run("timeout is failure", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res, msg, err := RunProbe(context.Background(), tgt, execProbe("hang"))
		if res != Failure || err != nil || msg != `command "hang" timed out` {
			t.Fatalf("got %v %q %v", res, msg, err)
		}
		if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
			t.Fatalf("took %v, want about timeoutSeconds (1s)", d)
		}
	})
}

// hostPort splits a test server's URL.
func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

func httpProbe(path string, port intstr.IntOrString) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: port}}, TimeoutSeconds: 1}
}

func TestHTTPGetProbe(t *testing.T) {
	t.Parallel()
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
	}))
	t.Cleanup(other.Close)
	_, otherPort := hostPort(t, other.URL)

	var mu sync.Mutex
	var lastReq *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastReq = r
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "ok")
		case "/created":
			w.WriteHeader(http.StatusCreated)
		case "/fail":
			http.Error(w, "sick", http.StatusInternalServerError)
		case "/notfound":
			http.NotFound(w, r)
		case "/redirect-local":
			http.Redirect(w, r, "/fail", http.StatusFound)
		case "/redirect-local-ok":
			http.Redirect(w, r, "/ok", http.StatusMovedPermanently)
		case "/redirect-other":
			// Another host name for the same machine: not followed.
			http.Redirect(w, r, "http://localhost:"+strconv.Itoa(otherPort)+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/big":
			fmt.Fprint(w, strings.Repeat("x", 1<<20))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: int32(port)}}}
	tgt := Target{PodIP: host, Container: c}

	cases := []struct {
		path string
		want Result
		msg  string // a prefix
	}{
		{"/ok", Success, "ok"},
		{"/created", Success, ""},
		{"/fail", Failure, "HTTP probe failed with statuscode: 500"},
		{"/notfound", Failure, "HTTP probe failed with statuscode: 404"},
		{"/redirect-local", Failure, "HTTP probe failed with statuscode: 500"},
		{"/redirect-local-ok", Success, "ok"},
		{"/redirect-other", Warning, "Probe terminated redirects"},
		{"/loop", Failure, `Get "/loop": stopped after 10 redirects`},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			res, msg, err := RunProbe(context.Background(), tgt, httpProbe(tc.path, intstr.FromInt32(int32(port))))
			if err != nil || res != tc.want || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("got %v %q %v, want %v %q...", res, msg, err, tc.want, tc.msg)
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("a redirect to another host was followed (%d requests)", n)
	}

	t.Run("named port, headers and Host", func(t *testing.T) {
		p := httpProbe("ok", intstr.FromString("probe-port"))
		p.HTTPGet.HTTPHeaders = []v1.HTTPHeader{
			{Name: "Host", Value: "apiserver.example"},
			{Name: "X-Custom", Value: "a"},
			{Name: "X-Custom", Value: "b"},
		}
		if res, msg, err := RunProbe(context.Background(), tgt, p); res != Success || err != nil {
			t.Fatalf("got %v %q %v", res, msg, err)
		}
		mu.Lock()
		r := lastReq
		mu.Unlock()
		if r.Host != "apiserver.example" {
			t.Errorf("Host %q, want apiserver.example", r.Host)
		}
		if got := r.Header.Values("X-Custom"); strings.Join(got, ",") != "a,b" {
			t.Errorf("X-Custom %q, want a,b", got)
		}
		if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "kube-probe/") {
			t.Errorf("User-Agent %q, want kube-probe/...", ua)
		}
		if a := r.Header.Get("Accept"); a != "*/*" {
			t.Errorf("Accept %q, want */*", a)
		}
	})

	t.Run("headers override User-Agent and drop Accept", func(t *testing.T) {
		p := httpProbe("/ok", intstr.FromInt32(int32(port)))
		p.HTTPGet.HTTPHeaders = []v1.HTTPHeader{{Name: "user-agent", Value: "mine"}, {Name: "Accept", Value: ""}}
		if res, _, err := RunProbe(context.Background(), tgt, p); res != Success || err != nil {
			t.Fatalf("got %v %v", res, err)
		}
		mu.Lock()
		r := lastReq
		mu.Unlock()
		if ua := r.Header.Get("User-Agent"); ua != "mine" {
			t.Errorf("User-Agent %q, want mine", ua)
		}
		if _, ok := r.Header["Accept"]; ok {
			t.Errorf("Accept sent: %q", r.Header.Get("Accept"))
		}
	})

	t.Run("explicit host wins over the pod IP", func(t *testing.T) {
		p := httpProbe("/ok", intstr.FromInt32(int32(port)))
		p.HTTPGet.Host = host
		if res, _, err := RunProbe(context.Background(), Target{PodIP: "192.0.2.1", Container: c}, p); res != Success || err != nil {
			t.Fatalf("got %v %v", res, err)
		}
	})

	t.Run("body is capped", func(t *testing.T) {
		res, msg, err := RunProbe(context.Background(), tgt, httpProbe("/big", intstr.FromInt32(int32(port))))
		if res != Success || err != nil || len(msg) > maxBody {
			t.Fatalf("got %v, %d bytes, %v", res, len(msg), err)
		}
	})

	t.Run("unknown port name is unknown", func(t *testing.T) {
		res, _, err := RunProbe(context.Background(), tgt, httpProbe("/ok", intstr.FromString("nope")))
		if res != Unknown || err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Fatalf("got %v %v", res, err)
		}
	})

	t.Run("no pod IP is unknown", func(t *testing.T) {
		res, _, err := RunProbe(context.Background(), Target{Container: c}, httpProbe("/ok", intstr.FromInt32(int32(port))))
		if res != Unknown || err == nil {
			t.Fatalf("got %v %v", res, err)
		}
	})

	t.Run("connection refused is failure", func(t *testing.T) {
		closed := closedPort(t)
		res, msg, err := RunProbe(context.Background(), tgt, httpProbe("/", intstr.FromInt32(int32(closed))))
		if res != Failure || err != nil || !strings.Contains(msg, "refused") {
			t.Fatalf("got %v %q %v", res, msg, err)
		}
	})

	t.Run("timeout is failure", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res, msg, err := RunProbe(context.Background(), tgt, httpProbe("/slow", intstr.FromInt32(int32(port))))
		if res != Failure || err != nil || !strings.Contains(msg, "deadline exceeded") {
			t.Fatalf("got %v %q %v", res, msg, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

func TestHTTPSProbeSelfSigned(t *testing.T) {
	var gotPath string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		if r.URL.Path == "/livez" {
			fmt.Fprint(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: int32(port)}}}
	// As kubeadm writes it: explicit host, named port, HTTPS.
	p := httpProbe("/livez", intstr.FromString("probe-port"))
	p.HTTPGet.Host = host
	p.HTTPGet.Scheme = v1.URISchemeHTTPS
	res, msg, err := RunProbe(context.Background(), Target{Container: c}, p)
	if res != Success || err != nil || gotPath != "/livez" {
		t.Fatalf("got %v %q %v (path %q)", res, msg, err, gotPath)
	}
	p.HTTPGet.Path = "/readyz"
	res, msg, err = RunProbe(context.Background(), Target{Container: c}, p)
	if res != Failure || err != nil || msg != "HTTP probe failed with statuscode: 503" {
		t.Fatalf("got %v %q %v", res, msg, err)
	}
}

// closedPort returns a loopback port where nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func tcpProbe(port intstr.IntOrString) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: port}}, TimeoutSeconds: 1}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "etcd", ContainerPort: int32(port)}}}
	tgt := Target{PodIP: "127.0.0.1", Container: c}

	if res, msg, err := RunProbe(context.Background(), tgt, tcpProbe(intstr.FromInt32(int32(port)))); res != Success || err != nil {
		t.Fatalf("open port: %v %q %v", res, msg, err)
	}
	if res, msg, err := RunProbe(context.Background(), tgt, tcpProbe(intstr.FromString("etcd"))); res != Success || err != nil {
		t.Fatalf("named port: %v %q %v", res, msg, err)
	}
	p := tcpProbe(intstr.FromInt32(int32(port)))
	p.TCPSocket.Host = "127.0.0.1"
	if res, msg, err := RunProbe(context.Background(), Target{Container: c}, p); res != Success || err != nil {
		t.Fatalf("explicit host: %v %q %v", res, msg, err)
	}
	res, msg, err := RunProbe(context.Background(), tgt, tcpProbe(intstr.FromInt32(int32(closedPort(t)))))
	if res != Failure || err != nil || !strings.Contains(msg, "refused") {
		t.Fatalf("closed port: %v %q %v", res, msg, err)
	}
	if res, _, err := RunProbe(context.Background(), tgt, tcpProbe(intstr.FromInt32(70000))); res != Unknown || err == nil {
		t.Fatalf("port out of range: %v %v", res, err)
	}
}

// stuckHealth is a Health server whose Check answers only when the caller
// gives up.
type stuckHealth struct {
	healthpb.UnimplementedHealthServer
}

func (stuckHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// grpcServer serves register's services on a loopback port.
func grpcServer(t *testing.T, register func(*grpc.Server)) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return int32(l.Addr().(*net.TCPAddr).Port)
}

func grpcProbe(port int32, service *string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: port, Service: service}}, TimeoutSeconds: 1}
}

func TestGRPCProbe(t *testing.T) {
	t.Parallel()
	hs := grpchealth.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)
	port := grpcServer(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	bare := grpcServer(t, func(*grpc.Server) {})
	tgt := Target{PodIP: "127.0.0.1"}
	str := func(s string) *string { return &s }

	cases := []struct {
		name    string
		port    int32
		service *string
		want    Result
		msg     string // a prefix
	}{
		{"server SERVING", port, nil, Success, "service healthy"},
		{"service SERVING", port, str("api"), Success, "service healthy"},
		{"service NOT_SERVING", port, str("db"), Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", port, str("nope"), Failure, "error: health rpc probe failed: rpc error: code = NotFound"},
		{"no health service", bare, nil, Failure, "error: this server does not implement the grpc health protocol"},
		{"nothing listening", int32(closedPort(t)), nil, Failure, "timeout: failed to connect service"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, msg, err := RunProbe(context.Background(), tgt, grpcProbe(tc.port, tc.service))
			if err != nil || res != tc.want || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("got %v %q %v, want %v %q...", res, msg, err, tc.want, tc.msg)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		stuck := grpcServer(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, stuckHealth{}) })
		start := time.Now()
		res, msg, err := RunProbe(context.Background(), tgt, grpcProbe(stuck, nil))
		if res != Failure || err != nil || msg != "timeout: health rpc did not complete within 1s" {
			t.Fatalf("got %v %q %v", res, msg, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
	})

	t.Run("bad port is unknown", func(t *testing.T) {
		if res, _, err := RunProbe(context.Background(), tgt, grpcProbe(0, nil)); res != Unknown || err == nil {
			t.Fatalf("got %v %v", res, err)
		}
	})
}

// dropFirst is a listener that closes the first connection it accepts, as
// a server that is not serving yet would.
type dropFirst struct {
	net.Listener
	dropped atomic.Bool
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.dropped.Swap(true) {
			return c, err
		}
		_ = c.Close()
	}
}

// A gRPC probe whose first connection fails dials again within its
// timeout, as the kubelet's blocking dial does, rather than failing the
// probe (a liveness probe with failureThreshold 1 then killed a healthy
// server: conformance "should *not* be restarted with a GRPC liveness
// probe").
func TestGRPCProbeRetriesAFailedConnection(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &dropFirst{Listener: inner}
	hs := grpchealth.NewServer()
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)

	p := grpcProbe(int32(inner.Addr().(*net.TCPAddr).Port), nil)
	p.TimeoutSeconds = 5
	res, msg, err := RunProbe(context.Background(), Target{PodIP: "127.0.0.1"}, p)
	if err != nil || res != Success || msg != "service healthy" {
		t.Fatalf("got %v %q %v, want success", res, msg, err)
	}
	if !l.dropped.Load() {
		t.Fatal("the first connection was not dropped: the test tested nothing")
	}
}

func TestProbeWithoutHandler(t *testing.T) {
	if res, _, err := RunProbe(context.Background(), Target{}, &v1.Probe{}); res != Unknown || err == nil {
		t.Fatalf("got %v %v", res, err)
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: 6443}, {Name: "8080", ContainerPort: 9090}}}
	cases := []struct {
		in   intstr.IntOrString
		want int
		ok   bool
	}{
		{intstr.FromInt32(10257), 10257, true},
		{intstr.FromString("probe-port"), 6443, true},
		{intstr.FromString("8080"), 9090, true}, // a name first, as the kubelet
		{intstr.FromString("2379"), 2379, true},
		{intstr.FromString("missing"), 0, false},
		{intstr.FromInt32(0), 0, false},
		{intstr.FromString("70000"), 0, false},
	}
	for _, tc := range cases {
		got, err := resolvePort(tc.in, c)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("resolvePort(%v) = %d, %v; want %d ok=%v", tc.in.String(), got, err, tc.want, tc.ok)
		}
	}
}
