// Package nodeapi is podrun's node API: the kubelet's port 10250 server,
// which the apiserver dials for `kubectl logs`. It serves
// /containerLogs/{namespace}/{pod}/{container}, /pods and /healthz over
// TLS, to clients authenticated by client certificate or bearer token and
// authorized by SubjectAccessReview, as the kubelet does; anonymous
// requests are refused. With an executor it serves /exec (SPDY and
// WebSocket streams) and /run; /attach and /portForward answer 501.
package nodeapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podrun/podrun/manifest"
)

// PodLister gives the node's pods with their live status (the sync core's
// status cache), named as the sync core names them: a static pod
// <name>-<node>, an apiserver pod by its API name, in their namespaces.
type PodLister interface {
	Pods() []*v1.Pod
}

// Options are the node API's settings and dependencies.
type Options struct {
	// NodeName is the node's name: what requests are authorized against
	// (nodes/<NodeName>) and what a self-signed certificate is made for.
	NodeName string
	// Addr is host:port to listen on (the kubelet's address and port:
	// 0.0.0.0:10250).
	Addr string
	// TLSCertFile and TLSKeyFile are the serving certificate and key
	// (KubeletConfiguration tlsCertFile, tlsPrivateKeyFile). When both are
	// empty, a self-signed certificate is kept under RootDir
	// (SelfSignedCertFile, SelfSignedKeyFile), made on first start, and
	// made again when it expires within 30 days or does not name NodeName
	// and NodeIPs.
	TLSCertFile string
	TLSKeyFile  string
	RootDir     string
	NodeIPs     []net.IP
	// Authenticator says who sent a request (NewAuthenticator); a request
	// it does not authenticate is refused with 401.
	Authenticator authenticator.Request
	// Authorizer says whether the user may (NewAuthorizer, or AlwaysAllow);
	// denied is 403.
	Authorizer Authorizer
	// Pods are the node's pods with their status, for /pods and to find
	// the pod of /containerLogs.
	Pods PodLister
	// Logs reads containers' logs (EngineLogs over the engine).
	Logs LogReader
	// Exec runs commands in containers for /exec and /run (the engine);
	// nil: they answer 501.
	Exec ContainerExecer
	// StreamIdleTimeout closes an exec stream with no traffic for this
	// long (the kubelet's streamingConnectionIdleTimeout): 4 h when 0.
	StreamIdleTimeout time.Duration
	// Healthy fails /healthz when podrun is stuck; nil: always healthy.
	Healthy func() error
	Logger  *slog.Logger
	// WriteTimeout bounds each write to a client (a client that stops
	// reading a followed log is dropped): 1 min when 0. There is no
	// bound on a whole response, so a followed log streams for as long
	// as the container runs.
	WriteTimeout time.Duration
	// Now is the clock sinceSeconds is counted from (time.Now when nil).
	Now func() time.Time
}

// Server is the node API. Listen, then Serve.
type Server struct {
	opts Options
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	// stopStreams ends the requests in flight (followed logs) when the
	// server stops.
	stopStreams context.CancelFunc
}

const (
	defaultWriteTimeout = time.Minute
	shutdownTimeout     = 5 * time.Second
)

// Listen checks opts, loads or makes the serving certificate and binds
// the address, so a port already taken or a bad certificate is an error at
// start rather than a log line later.
func Listen(opts Options) (*Server, error) {
	switch {
	case opts.NodeName == "":
		return nil, errors.New("node api: no node name")
	case opts.Authenticator == nil || opts.Authorizer == nil:
		return nil, errors.New("node api: an authenticator and an authorizer are needed")
	case opts.Pods == nil || opts.Logs == nil:
		return nil, errors.New("node api: no pods or logs to serve")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	if opts.StreamIdleTimeout <= 0 {
		opts.StreamIdleTimeout = defaultStreamIdleTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, log: opts.Logger.With("component", "nodeapi")}
	cert, made, err := servingCertificate(opts.TLSCertFile, opts.TLSKeyFile, opts.RootDir, opts.NodeName, opts.NodeIPs, time.Now())
	if err != nil {
		return nil, fmt.Errorf("node api: %w", err)
	}
	if made {
		s.log.Info("made a self-signed serving certificate", "cert", SelfSignedCertFile, "root", opts.RootDir,
			"names", cert.Leaf.DNSNames, "ips", cert.Leaf.IPAddresses, "notAfter", cert.Leaf.NotAfter)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("node api: listen on %s: %w", opts.Addr, err)
	}
	s.ln = ln
	base, cancel := context.WithCancel(context.Background())
	s.stopStreams = cancel
	s.srv = &http.Server{
		Handler: s.Handler(),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			// As the kubelet: a client certificate is asked for but
			// verified by the authenticator, so one from another CA is a
			// 401 rather than a failed handshake, and a bearer token
			// needs none.
			ClientAuth: tls.RequestClientCert,
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return base },
		// TLS handshake errors (port scans, a client that does not trust
		// the self-signed certificate) are not worth more than debug.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close releases the listener of a server that will not Serve.
func (s *Server) Close() error {
	s.stopStreams()
	return s.srv.Close()
}

// Serve serves until ctx ends, then ends the requests in flight (followed
// logs) and shuts down, bounded in time.
func (s *Server) Serve(ctx context.Context) error {
	s.log.Info("node api serving", "addr", s.Addr(), "node", s.opts.NodeName)
	errc := make(chan error, 1)
	go func() { errc <- s.srv.ServeTLS(s.ln, "", "") }()
	select {
	case err := <-errc:
		s.stopStreams()
		if errors.Is(err, http.ErrServerClosed) { // Close
			return nil
		}
		return fmt.Errorf("node api on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	s.stopStreams()
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(shutdown); err != nil {
		s.log.Warn("node api did not stop in time; closing its connections", "err", err)
		_ = s.srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("node api on %s: %w", s.Addr(), err)
	}
	return nil
}

// Handler is the server's routes behind authentication and authorization,
// for tests and for embedding.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	// The methods of the kubelet's routes: exec, attach and portForward
	// GET and POST, run POST.
	notServed := []string{"GET /attach/", "POST /attach/", "GET /portForward/", "POST /portForward/"}
	if s.opts.Exec != nil {
		for _, p := range []string{"/{namespace}/{pod}/{container}", "/{namespace}/{pod}/{uid}/{container}"} {
			mux.HandleFunc("GET /exec"+p, s.exec)
			mux.HandleFunc("POST /exec"+p, s.exec)
			mux.HandleFunc("POST /run"+p, s.run)
		}
	} else {
		notServed = append(notServed, "GET /exec/", "POST /exec/", "POST /run/")
	}
	for _, p := range notServed {
		mux.HandleFunc(p, notImplemented)
	}
	return &guard{s: s, next: routedMethods{mux}}
}

// routedMethods answers 405 Method Not Allowed, with the methods the path
// takes in Allow, to a method that no route of the path takes, as the
// kubelet's go-restful router does (jsr311: "405: Method Not Allowed").
// HEAD among them: net/http's "GET /path" pattern also matches HEAD, but
// the kubelet's routes are GET, POST, ... only, so a HEAD reads no log and
// lists no pods. /healthz, which the kubelet installs as a plain handler
// (healthz.InstallHandler), takes HEAD.
type routedMethods struct{ mux *http.ServeMux }

func (m routedMethods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	takes := func(method string) bool {
		probe := *r
		probe.Method = method
		_, pattern := m.mux.Handler(&probe)
		return pattern != ""
	}
	healthz := r.URL.Path == "/healthz"
	if healthz || (r.Method != http.MethodHead && takes(r.Method)) {
		m.mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if takes(method) {
			allow = append(allow, method)
		}
	}
	if len(allow) == 0 { // no such path: 404
		m.mux.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	http.Error(w, "405: Method Not Allowed", http.StatusMethodNotAllowed)
}

// guard authenticates and authorizes every request, bounds its writes and
// logs it, one line a request.
type guard struct {
	s    *Server
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	rc := http.NewResponseController(rec)
	_ = rc.SetWriteDeadline(start.Add(s.opts.WriteTimeout))
	// Without a server-wide WriteTimeout, a deadline left on the
	// connection would outlive the request.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()

	log := s.log.With("method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	resp, ok, err := s.opts.Authenticator.AuthenticateRequest(r)
	if err != nil || !ok {
		if err == nil {
			err = errUnauthenticated
		}
		log.Info("node api request refused: unauthenticated", "status", http.StatusUnauthorized, "err", err)
		refuse(rec, "Unauthorized", http.StatusUnauthorized)
		return
	}
	u := resp.User
	log = log.With("user", describeUser(u))
	var subresources []string
	allowed := false
	for _, a := range requestAttributes(u, r, s.opts.NodeName) {
		subresources = append(subresources, a.GetSubresource())
		d, reason, err := s.opts.Authorizer.Authorize(r.Context(), a)
		if err != nil {
			msg := fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
				u.GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource())
			log.Warn("node api request failed: authorization error", "status", http.StatusInternalServerError, "err", err)
			refuse(rec, msg, http.StatusInternalServerError)
			return
		}
		if d == authorizer.DecisionAllow {
			allowed = true
			break
		}
		if reason != "" {
			log = log.With("reason", reason)
		}
	}
	if !allowed {
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)",
			u.GetName(), verbFor(r.Method), subresources)
		log.Info("node api request refused: forbidden", "status", http.StatusForbidden, "subresources", subresources)
		refuse(rec, msg, http.StatusForbidden)
		return
	}
	// No route reads a request body (exec's streams come over the
	// hijacked connection, /run's command in the query), and net/http
	// would drain an unread one with no deadline: a request that declares
	// one (ContentLength -1: chunked) is refused as the guard refuses. 413:
	// the most content the node API takes is none (RFC 9110 lets a 413
	// close the connection).
	if r.ContentLength != 0 {
		log.Info("node api request refused: it has a body", "status", http.StatusRequestEntityTooLarge, "contentLength", r.ContentLength)
		refuse(rec, "podrun's node API takes no request body", http.StatusRequestEntityTooLarge)
		return
	}

	g.next.ServeHTTP(rec, r)

	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelWarn
	}
	log.Log(r.Context(), level, "node api request", "status", status, "bytes", rec.bytes, "duration", time.Since(start).Round(time.Millisecond))
}

// refuse answers a request the guard turns away, whose body no one has
// read (no route reads one), and closes its connection. There is no
// server ReadTimeout (it would cut streams), so net/http, to keep the
// connection, would read up to 256 KiB of the unread body with no
// deadline, twice: before writing the answer (chunkWriter.writeHeader)
// and when closing the body after it (finishRequest, body.Close). A
// client that declares a body and sends none would then never be
// answered and would hold the connection and its goroutine.
// "Connection: close" skips the first read; the expired read deadline
// ends the second at once. (Over HTTP/2, net/http makes the close a
// GOAWAY.)
func refuse(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	http.Error(w, msg, code)
}

// recorder remembers a response's status and size; Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack takes the connection over for a stream (exec's SPDY and
// WebSocket upgrades look for an http.Hijacker).
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.opts.Healthy != nil {
		if err := s.opts.Healthy(); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "not ok: %v\n", err)
			return
		}
	}
	io.WriteString(w, "ok")
}

func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	list := &v1.PodList{}
	list.APIVersion, list.Kind = "v1", "PodList"
	for _, p := range s.opts.Pods.Pods() {
		if p == nil {
			continue
		}
		cp := p.DeepCopy()
		cp.APIVersion, cp.Kind = "v1", "Pod"
		// Read by whoever may read nodes/pods: a manifest URL's
		// credentials stay on the node.
		manifest.RedactSourceAnnotation(cp)
		list.Items = append(list.Items, *cp)
	}
	if list.Items == nil {
		list.Items = []v1.Pod{}
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(list); err != nil {
		s.log.Debug("write /pods", "err", err)
	}
}

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	req, limit, status, err := parseLogRequest(r.URL.Query(), s.opts.Now())
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	pod := findPod(s.opts.Pods.Pods(), ns, name)
	if pod == nil {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := &logWriter{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout, limit: limit, stop: cancel}
	err = s.opts.Logs.ContainerLogs(ctx, ns, name, container, req, out)
	out.mu.Lock()
	defer out.mu.Unlock()
	out.done = true
	switch {
	case out.limited || r.Context().Err() != nil:
		// limitBytes reached, or the client (or the server) went away.
	case err != nil && !out.started:
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
	case err != nil:
		// The 200 is sent: as the kubelet (response.WriteError after its
		// zero-byte write), the error ends the body.
		s.log.Warn("container log stream broken", "namespace", ns, "pod", name, "container", container, "err", err)
		_ = out.rc.SetWriteDeadline(time.Now().Add(out.timeout))
		_, _ = io.WriteString(w, err.Error())
	case !out.started:
		setLogHeaders(w)
		w.WriteHeader(http.StatusOK)
	}
}

func setLogHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// errLimitReached stops a log reader once limitBytes are written.
var errLimitReached = errors.New("limitBytes reached")

// logWriter streams a log to the client: the status is sent with the first
// write (until then an error can still be a 4xx), even one of no bytes,
// which a LogReader makes once it has found the container's run, so that a
// followed log that is still silent gets its headers at once, as the
// kubelet's GetKubeletContainerLogs does; every write is flushed and
// bounded in time, and limitBytes cuts the stream. Safe for concurrent use.
type logWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	limit   int64 // 0: none
	stop    context.CancelFunc

	mu      sync.Mutex
	started bool
	done    bool // the handler returned: no more writes
	written int64
	limited bool
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.done:
		return 0, io.ErrClosedPipe
	case l.limited:
		return 0, errLimitReached
	case len(p) == 0 && l.started:
		return 0, nil
	}
	if !l.started {
		l.started = true
		setLogHeaders(l.w)
		l.w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		_ = l.rc.SetWriteDeadline(time.Now().Add(l.timeout))
		return 0, l.rc.Flush()
	}
	full := len(p)
	if l.limit > 0 && l.written+int64(len(p)) >= l.limit {
		p = p[:l.limit-l.written]
		l.limited = true
	}
	_ = l.rc.SetWriteDeadline(time.Now().Add(l.timeout))
	n, err := l.w.Write(p)
	l.written += int64(n)
	if err == nil {
		err = l.rc.Flush()
	}
	if err != nil {
		return n, err
	}
	if l.limited {
		l.stop()
		return n, errLimitReached
	}
	return full, nil
}

func notImplemented(w http.ResponseWriter, r *http.Request) {
	what := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
	http.Error(w, fmt.Sprintf("%s is not implemented by podrun's node API: it needs SPDY or WebSocket streaming, "+
		"which podrun does not serve yet", what), http.StatusNotImplemented)
}
