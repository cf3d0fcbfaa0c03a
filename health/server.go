package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/manifest"
)

// ServerOptions are what podrun's HTTP server reports on.
type ServerOptions struct {
	// Addr is host:port of the TCP listener (127.0.0.1:10248 by default in
	// podrun), which serves /healthz, /readyz and /metrics; "" for none.
	Addr string
	// Socket is the path of the unix socket that serves those and /pods,
	// to podrun's own user (and root) only; "" for none. Pod specs carry
	// what manifests hold as literals (env values, commands, probe
	// headers), and the files may be readable by root alone: /pods must
	// not undo that for every local user, as a TCP port would.
	Socket string
	// Healthy fails when podrun is stuck (its sync loop has not turned).
	Healthy func() error
	// Ready fails until every source has delivered once.
	Ready func() error
	// Pods returns the pods with their live status. Secret data is never in
	// a pod, and no endpoint execs into a container.
	Pods func() []*v1.Pod
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// IdleTimeout closes a kept-alive connection that sends no request for
	// so long; 0 means 2 minutes, as the node API's. Any local user may
	// connect: without it, connections held open would pin podrun's file
	// descriptors and goroutines for ever.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown when Serve's context
	// ends: the requests in flight get so long to finish, then every
	// connection still open is closed. 0 means 5 seconds.
	ShutdownTimeout time.Duration
}

// Server is podrun's HTTP server: /healthz, /readyz, /metrics on TCP, and
// /pods with them on a unix socket.
type Server struct {
	opts ServerOptions
	tcp  *listening
	unix *listening
}

type listening struct {
	srv *http.Server
	ln  net.Listener
}

// Listen binds the server's addresses, so that a port already taken (or
// a socket another podrun serves) is an error at start rather than a log
// line later.
func Listen(opts ServerOptions) (*Server, error) {
	if opts.Addr == "" && opts.Socket == "" {
		return nil, errors.New("no address and no socket to serve on")
	}
	s := &Server{opts: opts}
	if opts.Addr != "" {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
		}
		s.tcp = s.serving(ln, s.publicMux())
	}
	if opts.Socket != "" {
		ln, err := listenOwnerOnly(opts.Socket, opts.Logger)
		if err != nil {
			if s.tcp != nil {
				s.tcp.ln.Close()
			}
			return nil, err
		}
		s.unix = s.serving(ln, s.Handler())
	}
	return s, nil
}

func (s *Server) serving(ln net.Listener, h http.Handler) *listening {
	idle := s.opts.IdleTimeout
	if idle <= 0 {
		idle = 2 * time.Minute
	}
	return &listening{ln: ln, srv: &http.Server{
		Handler:           noBody(h),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
		// Every answer is small and whole (no stream): a client that
		// does not read it is not waited for.
		WriteTimeout:   time.Minute,
		MaxHeaderBytes: 1 << 20,
	}}
}

// Addr is the TCP address the server listens on, "" without one.
func (s *Server) Addr() string {
	if s.tcp == nil {
		return ""
	}
	return s.tcp.ln.Addr().String()
}

// Serve serves until ctx ends, then shuts down (bounded by
// ShutdownTimeout) and returns with no connection of the server open.
func (s *Server) Serve(ctx context.Context) error {
	var all []*listening
	for _, l := range []*listening{s.tcp, s.unix} {
		if l != nil {
			all = append(all, l)
		}
	}
	errc := make(chan error, len(all))
	for _, l := range all {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	var first error
	select {
	case first = <-errc:
	case <-ctx.Done():
	}
	bound := s.opts.ShutdownTimeout
	if bound <= 0 {
		bound = 5 * time.Second
	}
	shutdown, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var errs []error
	for _, l := range all {
		err := l.srv.Shutdown(shutdown)
		if !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
			continue
		}
		// Shutdown leaves open what is not idle: a request still being
		// sent (a new connection counts as idle only after 5 s), an
		// answer the client does not read. Close ends them: their
		// handlers, all quick and in memory, then return as their writes
		// fail and their requests' contexts end, so that no connection
		// and no goroutine of the server outlives podrun's shutdown. Its
		// listener is closed already: what Close says of it again is no
		// news.
		if s.opts.Logger != nil {
			s.opts.Logger.Warn("health server did not stop in time; closing its connections", "bound", bound, "err", err)
		}
		_ = l.srv.Close()
	}
	// Every Serve returns once its server is shut down.
	pending := len(all)
	if first != nil {
		errs = append(errs, first)
		pending--
	}
	for ; pending > 0; pending-- {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Handler is every route, as the unix socket serves them; for tests and
// for embedding.
func (s *Server) Handler() http.Handler {
	mux := s.publicMux()
	mux.HandleFunc("GET /pods", s.pods)
	return mux
}

// publicMux is what TCP serves: nothing a manifest holds.
func (s *Server) publicMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", check(s.opts.Healthy))
	mux.HandleFunc("GET /readyz", check(s.opts.Ready))
	if s.opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

func check(f func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if f != nil {
			if err := f(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ok: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}
}

func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	list := &v1.PodList{}
	list.APIVersion, list.Kind = "v1", "PodList"
	if s.opts.Pods != nil {
		for _, p := range s.opts.Pods() {
			cp := p.DeepCopy()
			cp.APIVersion, cp.Kind = "v1", "Pod"
			// /pods is shown (ps, scripts, logs): a manifest URL's
			// credentials stay with root.
			manifest.RedactSourceAnnotation(cp)
			list.Items = append(list.Items, *cp)
		}
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(list); err != nil && s.opts.Logger != nil {
		s.opts.Logger.Warn("write /pods", "err", err)
	}
}

// noBody refuses a request that declares a body (Content-Length, chunked):
// no route reads one, and net/http, to keep the connection, would read the
// unread body before answering and again after, with no deadline (there is
// no ReadTimeout), so a client that declares a body and never sends it
// would hold a connection and its goroutine for ever. The answer is a 413
// with "Connection: close" (which skips the first read) and an expired
// read deadline (which ends the second at once), as the node API refuses.
func noBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		http.Error(w, "podrun's health server takes no request body", http.StatusRequestEntityTooLarge)
	})
}
