package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/gc"
	"github.com/podrun/podrun/health"
	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
)

// annotationSourceError is set on a pod (in /pods and `ps`) whose manifest
// is invalid now: the pod runs as last good.
const annotationSourceError = "podrun.io/source-error"

type watchOptions struct {
	*globalOptions
	HealthzAddress     string
	HealthzPort        int
	Paths              []string
	URLs               []string
	SyncFrequency      time.Duration
	FileCheckFrequency time.Duration
	HTTPCheckFrequency time.Duration
	StopPodsOnExit     bool
	AllowPrivileged    bool
	GC                 gcOptions
}

func newWatchCmd(g *globalOptions, runF func(context.Context, *watchOptions) error) *cobra.Command {
	opts := &watchOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "watch --path P... --url U...",
		Short: "Run as a daemon: keep this machine's pods converged as manifests change",
		Long: `Run the pods of the manifest files, directories and URLs given, and keep them
converged: new manifests start pods, edits replace only the containers that
changed (resources alone are updated in place), removed manifests stop their
pods gracefully, and dead containers are restarted under restartPolicy.

A manifest that becomes invalid, or a URL that fails, keeps its last good
pods: only a clean removal removes a pod. Nothing is removed until every
source has delivered once. SIGTERM or SIGINT stop podrun and leave the pods
running (an upgrade of podrun is not an outage) unless --stop-pods-on-exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(opts.Paths) == 0 && len(opts.URLs) == 0 {
				return badInputf("give at least one source: --path or --url")
			}
			for _, d := range []struct {
				name string
				v    time.Duration
			}{{"sync-frequency", opts.SyncFrequency}, {"file-check-frequency", opts.FileCheckFrequency},
				{"http-check-frequency", opts.HTTPCheckFrequency}} {
				if d.v <= 0 {
					return badInputf("--%s must be positive", d.name)
				}
			}
			if err := opts.GC.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return watchRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.Paths, "path", nil, "manifest file or directory to watch (repeatable)")
	f.StringArrayVar(&opts.URLs, "url", nil, "manifest URL to poll (repeatable)")
	f.DurationVar(&opts.SyncFrequency, "sync-frequency", time.Minute, "how often every pod is synced, events or not")
	f.DurationVar(&opts.FileCheckFrequency, "file-check-frequency", 20*time.Second, "how often paths are rescanned, besides change notifications")
	f.DurationVar(&opts.HTTPCheckFrequency, "http-check-frequency", 20*time.Second, "how often URLs are polled")
	f.BoolVar(&opts.StopPodsOnExit, "stop-pods-on-exit", false, "stop and remove the pods when podrun exits")
	f.BoolVar(&opts.AllowPrivileged, "allow-privileged", false, "allow privileged containers")
	f.StringVar(&opts.HealthzAddress, "healthz-bind-address", "127.0.0.1", "address of the HTTP server (/healthz, /readyz, /pods, /metrics)")
	f.IntVar(&opts.HealthzPort, "healthz-port", 10248, "port of the HTTP server; 0 disables it")
	addGCFlags(f, &opts.GC)
	return cmd
}

// sourceState is what the runner may ask of the merger from its own
// goroutines: the merger itself belongs to the watch loop.
type sourceState struct {
	mu      sync.Mutex
	ready   bool
	failing map[string]bool
	errs    map[string]error
	desired map[string]bool
}

func (s *sourceState) set(m *manifest.Merger) {
	desired := map[string]bool{}
	for _, p := range m.Pods() {
		desired[string(p.UID)] = true
	}
	s.mu.Lock()
	s.ready, s.failing, s.errs, s.desired = m.Ready(), m.Failing(), m.Errors(), desired
	s.mu.Unlock()
}

// Desired returns the UIDs of the pods the sources define now.
func (s *sourceState) Desired() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desired
}

func (s *sourceState) errors() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

func (s *sourceState) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

func (s *sourceState) Keep(source string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing[source]
}

func watchRun(ctx context.Context, opts *watchOptions) error {
	mopts := manifest.Options{NodeName: opts.NodeName, Logger: opts.Log}
	var sources []interface {
		Run(context.Context, chan<- manifest.SourceUpdate)
	}
	var names []string
	for _, p := range opts.Paths {
		sources = append(sources, &manifest.FileSource{Path: p, Options: mopts, Rescan: opts.FileCheckFrequency, Logger: opts.Log})
		names = append(names, p)
	}
	if len(opts.URLs) > 0 {
		client, header, err := urlClient(opts.globalOptions)
		if err != nil {
			return err
		}
		for _, u := range opts.URLs {
			sources = append(sources, &manifest.URLSource{URL: u, Header: header, Client: client,
				Interval: opts.HTTPCheckFrequency, Options: mopts, Logger: opts.Log})
			names = append(names, u)
		}
	}

	rt, err := connect(ctx, opts.globalOptions)
	if err != nil {
		return err
	}
	defer rt.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srcMetrics := newSourceMetrics(reg)
	state := &sourceState{}
	opts.imageUsage = gc.NewImageUsage()
	r, err := newRunner(ctx, opts.globalOptions, rt, opts.AllowPrivileged, func(c *runner.Config) {
		c.SyncFrequency = opts.SyncFrequency
		c.SourcesReady = state.Ready
		c.KeepSource = state.Keep
		c.Metrics = runner.NewMetrics(reg)
	})
	if err != nil {
		return err
	}
	var server *health.Server
	if opts.HealthzPort != 0 {
		server, err = health.Listen(health.ServerOptions{
			Addr:    net.JoinHostPort(opts.HealthzAddress, strconv.Itoa(opts.HealthzPort)),
			Healthy: r.Healthy,
			Ready: func() error {
				if !state.Ready() {
					return errors.New("not every source has delivered its manifests yet")
				}
				return nil
			},
			Pods:     func() []*v1.Pod { return podsWithSourceErrors(r.Pods(), names, state.errors()) },
			Gatherer: reg,
			Logger:   opts.Log,
		})
		if err != nil {
			return badInput(fmt.Errorf("--healthz-port: %w", err))
		}
	}

	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	updates := make(chan runner.PodUpdate, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run(runCtx, updates)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		waitGC := startGC(runCtx, &opts.GC, rt, opts.InfraImage, opts.imageUsage,
			gcSources{Ready: state.Ready, Desired: state.Desired, Keep: state.Keep}, opts.Log)
		waitGC()
	}()
	sourceUpdates := make(chan manifest.SourceUpdate, len(sources))
	for _, s := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Run(runCtx, sourceUpdates)
		}()
	}
	if server != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := server.Serve(runCtx); err != nil {
				opts.Log.Error("HTTP server", "err", err)
			}
		}()
		opts.Log.Info("serving /healthz, /readyz, /pods, /metrics", "address", server.Addr())
	}
	opts.Log.Info("podrun watching", "sources", names, "node", opts.NodeName)

	merger := manifest.NewMerger(names)
	for loop := true; loop; {
		select {
		case <-ctx.Done():
			loop = false
		case u := <-sourceUpdates:
			changes := merger.Update(u)
			state.set(merger)
			r.SetObjects(merger.Objects())
			srcMetrics.observe(u)
			for _, pu := range podUpdates(changes, opts.AllowPrivileged, opts.Log.Error) {
				updates <- pu
			}
		}
	}

	stop()
	wg.Wait()
	opts.Log.Info("podrun stopped")
	if opts.StopPodsOnExit {
		return stopAll(r, merger.Pods())
	}
	return nil
}

// podUpdates turns the merger's changes into runner updates, refusing
// privileged pods that are not allowed (the pod's last accepted spec, if
// any, stays).
func podUpdates(changes []manifest.PodChange, allowPrivileged bool, logError func(string, ...any)) []runner.PodUpdate {
	var out []runner.PodUpdate
	for _, c := range changes {
		op := runner.OpAdd
		switch c.Op {
		case manifest.OpUpdate:
			op = runner.OpUpdate
		case manifest.OpRemove:
			op = runner.OpRemove
		}
		if op != runner.OpRemove {
			if err := admit([]*podSource{{Pod: c.Pod, Source: c.Pod.Annotations[manifest.AnnotationSource]}}, allowPrivileged); err != nil {
				logError("pod refused", "pod", c.Pod.Namespace+"/"+c.Pod.Name, "err", err)
				continue
			}
		}
		out = append(out, runner.PodUpdate{Op: op, Pods: []*v1.Pod{c.Pod}})
	}
	return out
}

// stopAll removes every pod podrun was running, for --stop-pods-on-exit.
func stopAll(r *runner.Runner, pods []*v1.Pod) error {
	longest := 30 * time.Second
	for _, p := range pods {
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
			longest = max(longest, time.Duration(*g)*time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), longest+time.Minute)
	defer cancel()
	if err := removePods(ctx, r, pods); err != nil {
		return fmt.Errorf("stop pods on exit: %w", err)
	}
	return nil
}

// urlClient builds the HTTP client and headers of URL sources from the
// flags.
func urlClient(g *globalOptions) (*http.Client, http.Header, error) {
	header, err := manifest.ParseHeaders(g.URLHeaders)
	if err != nil {
		return nil, nil, badInput(err)
	}
	client, err := manifest.NewHTTPClient(g.URLCA)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("--manifest-url-ca: %w", err))
	}
	return client, header, nil
}

// podsWithSourceErrors annotates each pod whose manifest has a problem now
// with that problem. A directory source's problems name their files, so a
// pod gets only the problems of its own file.
func podsWithSourceErrors(pods []*v1.Pod, sources []string, errs map[string]error) []*v1.Pod {
	if len(errs) == 0 {
		return pods
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p
		origin := p.Annotations[manifest.AnnotationSource]
		for _, src := range sources {
			err := errs[src]
			if err == nil || !fromSource(origin, src) {
				continue
			}
			msg := err.Error()
			if !isURL(src) && !samePath(origin, src) {
				// A directory: keep the lines about this pod's file.
				var mine []string
				for _, line := range strings.Split(msg, "\n") {
					if strings.Contains(line, filepath.Base(origin)+":") {
						mine = append(mine, line)
					}
				}
				msg = strings.Join(mine, "\n")
			}
			if msg == "" {
				continue
			}
			cp := p.DeepCopy()
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			cp.Annotations[annotationSourceError] = msg
			out[i] = cp
		}
	}
	return out
}

// fromSource reports whether a pod defined at origin (an absolute file path
// or a URL) comes from the configured source src.
func fromSource(origin, src string) bool {
	if isURL(src) {
		return origin == src
	}
	return samePath(origin, src) || samePath(filepath.Dir(origin), src)
}

func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// sourceMetrics are the Prometheus series of the manifest sources.
type sourceMetrics struct {
	errors      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

func newSourceMetrics(reg prometheus.Registerer) *sourceMetrics {
	m := &sourceMetrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_source_errors_total",
			Help: "Source reads (scans, fetches) that found a problem; the last good pods were kept.",
		}, []string{"source"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podrun_source_last_success_timestamp_seconds",
			Help: "When the source was last read without a problem.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.errors, m.lastSuccess)
	return m
}

func (m *sourceMetrics) observe(u manifest.SourceUpdate) {
	if u.Err != nil {
		m.errors.WithLabelValues(u.Source).Inc()
		return
	}
	m.lastSuccess.WithLabelValues(u.Source).SetToCurrentTime()
}
