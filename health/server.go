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
)

// ServerOptions are what podrun's HTTP server reports on.
type ServerOptions struct {
	// Addr is host:port to listen on (127.0.0.1:10248 by default in
	// podrun; nothing listens on other addresses unless asked).
	Addr string
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
}

// Server is podrun's HTTP server: /healthz, /readyz, /pods, /metrics.
type Server struct {
	opts ServerOptions
	srv  *http.Server
	ln   net.Listener
}

// Listen binds the server's address, so that a port already taken is an
// error at start rather than a log line later.
func Listen(opts ServerOptions) (*Server, error) {
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	s := &Server{opts: opts, ln: ln}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = 2 * time.Minute
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
		// Every answer is small and whole (no stream): a client that
		// does not read it is not waited for.
		WriteTimeout:   time.Minute,
		MaxHeaderBytes: 1 << 20,
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx ends, then shuts down (bounded).
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the server's routes, for tests and for embedding.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", check(s.opts.Healthy))
	mux.HandleFunc("GET /readyz", check(s.opts.Ready))
	mux.HandleFunc("GET /pods", s.pods)
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
