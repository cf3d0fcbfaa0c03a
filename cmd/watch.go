package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/gc"
	"github.com/podrun/podrun/health"
	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

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
	RuntimeClasses     runtimeClassOptions
	ExtendedResources  extendedResources
	GC                 gcOptions
	LogRotation        logRotationOptions
	Cluster            clusterOptions
	// EvictionHard are the node-pressure eviction thresholds
	// (--eviction-hard), parsed.
	EvictionHard    []node.Threshold
	evictionHardRaw string
	// measureNode measures the node's memory and filesystems (the root
	// dir's, the engine's data root): for the node's status and eviction.
	measureNode func() (node.Measurements, error)
	// Engine connects to the container engine (connect by default).
	Engine func(context.Context) (watchEngine, error)
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
			if err := opts.RuntimeClasses.parse(); err != nil {
				return err
			}
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
			if err := opts.LogRotation.parse(); err != nil {
				return err
			}
			if err := opts.Cluster.validate(); err != nil {
				return err
			}
			thresholds, err := node.ParseThresholds(opts.evictionHardRaw)
			if err != nil {
				return badInput(fmt.Errorf("--eviction-hard: %w", err))
			}
			opts.EvictionHard = thresholds
			if opts.Engine == nil {
				opts.Engine = connectAs[watchEngine](g)
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
	addRuntimeClassFlag(f, &opts.RuntimeClasses)
	f.StringVar(&opts.HealthzAddress, "healthz-bind-address", "127.0.0.1", "address of the HTTP server (/healthz, /readyz, /metrics; /pods is on <root-dir>/podrun.sock)")
	f.IntVar(&opts.HealthzPort, "healthz-port", 10248, "port of the HTTP server; 0 disables it (not the socket)")
	f.StringVar(&opts.evictionHardRaw, "eviction-hard", node.DefaultEvictionHard,
		"node-pressure eviction thresholds, as the kubelet's flag (signal<quantity or signal<N%); empty: no eviction")
	addExtendedResourceFlag(f, &opts.ExtendedResources)
	addPodMaxPIDsFlag(f, g)
	addSysctlFlag(f, g)
	addGCFlags(f, &opts.GC)
	addLogRotationFlags(f, &opts.LogRotation)
	addClusterFlags(f, &opts.Cluster)
	return cmd
}

// watchGCPercent is the garbage collector's target (GOGC) of a watch: 50,
// or -1 (keep it) when GOGC is set (lookupEnv finds it): the user's
// choice. A watch's heap is mostly what it keeps (pods, their state and
// status), and Go's default, 100, lets it grow to twice that between
// collections. At the rate an idle watch allocates, collecting at half
// that growth costs next to no CPU and takes 4-5 MiB off the RSS of a
// node of 100 pods (docs/memory.md); Prometheus lowers its default too.
// once, which exits when its pods are up, keeps Go's default.
func watchGCPercent(lookupEnv func(string) (string, bool)) int {
	if _, set := lookupEnv("GOGC"); set {
		return -1
	}
	return 50
}

func watchRun(ctx context.Context, opts *watchOptions) error {
	if percent := watchGCPercent(os.LookupEnv); percent > 0 {
		debug.SetGCPercent(percent)
	}
	mopts := manifest.Options{NodeName: opts.NodeName, Logger: opts.Log, Strict: opts.Strict}
	var sources []source.Named
	for _, p := range opts.Paths {
		sources = append(sources, source.Named{Name: p,
			Source: &source.FileSource{Path: p, Options: mopts, Rescan: opts.FileCheckFrequency, Logger: opts.Log}})
	}
	if len(opts.URLs) > 0 {
		client, header, err := urlClient(opts.globalOptions)
		if err != nil {
			return err
		}
		for _, u := range opts.URLs {
			sources = append(sources, source.Named{Name: u, Source: &source.URLSource{URL: u, Header: header, Client: client,
				Interval: opts.HTTPCheckFrequency, Options: mopts, Logger: opts.Log}})
		}
	}

	var kc *kubeClient
	if opts.Cluster.Kubeconfig != "" {
		kc = &kubeClient{path: opts.Cluster.Kubeconfig, userAgent: "podrun/" + kubeletVersion()}
		// client-go logs through klog: one log, podrun's, structured
		// (with the CRI engine, klog's lines are debug ones already:
		// setupLogging).
		if opts.RuntimeEndpoint == "" {
			klog.SetSlogLogger(opts.Log.With("component", "client-go"))
		}
		// Last, so that a pod named alike in a local manifest and in the
		// API is the local one (and reported). ConfigMaps and Secrets
		// named alike do not meet: each serves its own source's pods.
		sources = append(sources, source.Named{Name: source.DefaultAPIServerSourceName,
			Source: &source.APIServerSource{NodeName: opts.NodeName, Client: clientAs[source.APIClient](kc), Logger: opts.Log}})
	}

	if err := opts.claimRootDir(); err != nil {
		return err
	}
	unlock, err := opts.lockRootDir()
	if err != nil {
		return err
	}
	defer unlock()
	rt, err := opts.Engine(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	opts.measureNode = nodeMeasurer(ctx, opts.RootDir, rt)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := source.NewMux(sources, source.NewMetrics(reg))
	opts.imageUsage = gc.NewImageUsage()
	var events *clusterEvents
	if kc != nil {
		events = newClusterEvents(opts.NodeName)
	}
	r, err := newRunner(ctx, opts.globalOptions, rt, opts.AllowPrivileged, opts.RuntimeClasses.tune, func(c *runner.Config) {
		if events != nil {
			c.Events = events.recorder
		}
		if kc != nil {
			// Projected service-account tokens: TokenRequest, as the node.
			c.Tokens = &source.TokenManager{Client: clientAs[source.TokenAPI](kc), Clock: opts.Clock}
			// Service links: API pods wait for the Services (SetServices).
			c.ClusterServices = true
		}
		c.SyncFrequency = opts.SyncFrequency
		c.ExtendedResources = opts.ExtendedResources
		c.SourcesReady = mux.Ready
		c.KeepSource = mux.Keep
		c.Metrics = runner.NewMetrics(reg)
		c.ClusterDNS, c.ClusterDomain = opts.Cluster.ClusterDNS, opts.Cluster.ClusterDomain
		// The node's address in the cluster is its pods' hostIP (and a
		// hostNetwork pod's podIP), as the kubelet's --node-ip.
		if opts.Cluster.NodeIP != "" {
			c.HostIP = opts.Cluster.NodeIP
		}
	})
	if err != nil {
		return err
	}
	// Joined to a cluster: the node agent, the status manager (whose
	// refused mirror pods /pods shows) and the node API.
	var cl *cluster
	annotatePods := func(pods []*v1.Pod) []*v1.Pod { return pods }
	if kc != nil {
		if cl, err = newCluster(ctx, opts, kc, events, rt, r, mux, reg); err != nil {
			return err
		}
		annotatePods = cl.statuses.AnnotateMirrorErrors
	}
	// The socket always (ps reads /pods there); TCP unless port 0.
	srvOpts := health.ServerOptions{
		Socket:  filepath.Join(opts.RootDir, health.SocketName),
		Healthy: r.Healthy,
		Ready: func() error {
			if !mux.Ready() {
				return errors.New("not every source has delivered its manifests yet")
			}
			return nil
		},
		Pods:     func() []*v1.Pod { return annotatePods(mux.AnnotateErrors(mux.AnnotateWarnings(r.Pods()))) },
		Gatherer: reg,
		Logger:   opts.Log,
	}
	if opts.HealthzPort != 0 {
		srvOpts.Addr = net.JoinHostPort(opts.HealthzAddress, strconv.Itoa(opts.HealthzPort))
	}
	server, err := health.Listen(srvOpts)
	if err != nil {
		if cl != nil && cl.nodeAPI != nil {
			cl.nodeAPI.Close()
		}
		return badInput(fmt.Errorf("HTTP server: %w", err))
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
	waitGC, reclaim := startGC(runCtx, &opts.GC, rt, opts.InfraImage, opts.imageUsage,
		gcSources{Ready: mux.Ready, Desired: mux.Desired, Keep: mux.Keep, ImagesInUse: r.ImageVolumeImages,
			Evicted: r.EvictedPods, Recent: r.RecentObjects}, opts.Log)
	wg.Add(1)
	go func() {
		defer wg.Done()
		waitGC()
	}()
	// The CRI engine's logs; dockerd rotates its own.
	if lr, ok := rt.(logRotator); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rotateLogs(runCtx, lr, opts.LogRotation, opts.Clock, opts.Log)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := server.Serve(runCtx); err != nil {
			opts.Log.Error("HTTP server", "err", err)
		}
	}()
	opts.Log.Info("serving /healthz, /readyz, /metrics", "address", server.Addr(), "socket", srvOpts.Socket)
	if cl != nil {
		cl.start(runCtx, &wg)
	}
	// Always: local storage limits are enforced whatever the thresholds.
	{
		evictions := newEvictionManager(ctx, opts, rt, r, reclaim)
		wg.Add(1)
		go func() {
			defer wg.Done()
			evictions.Run(runCtx)
		}()
	}
	shownSources := mux.Names()
	for i, src := range shownSources {
		shownSources[i] = manifest.RedactedSource(src)
	}
	opts.Log.Info("podrun watching", "sources", shownSources, "node", opts.NodeName)

	// The sources run until ctx ends; the runner, GC and server until stop.
	var conflicts conflictLog
	mux.Run(ctx, func(c source.Changes) {
		r.SetObjects(c.ConfigMaps, c.Secrets)
		r.SetRuntimeClasses(c.RuntimeClasses)
		conflicts.update(opts.Log, c.Conflicts)
		podUps, refused := podUpdates(c.Pods, opts.AllowPrivileged)
		for _, err := range refused {
			opts.Log.Error("pod refused", "err", err)
		}
		for _, pu := range podUps {
			updates <- pu
		}
	})

	stop()
	wg.Wait()
	opts.Log.Info("podrun stopped")
	if opts.StopPodsOnExit {
		return stopAll(r, mux.Pods())
	}
	return nil
}

// stopAll removes every pod podrun was running, for --stop-pods-on-exit,
// bounded as once --rm's removal (removalBound), on the real clock.
// watch's context has ended by then: only the bound ends this removal.
func stopAll(r *runner.Runner, pods []*v1.Pod) error {
	if err := removePodsWithin(context.Background(), nil, r, pods); err != nil {
		return fmt.Errorf("stop pods on exit: %w", err)
	}
	return nil
}

// urlClient builds the HTTP client and headers of URL sources from the
// flags.
func urlClient(g *globalOptions) (*http.Client, http.Header, error) {
	header, err := source.ParseHeaders(g.URLHeaders)
	if err != nil {
		return nil, nil, badInput(err)
	}
	client, err := source.NewHTTPClient(g.URLCA)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("--manifest-url-ca: %w", err))
	}
	return client, header, nil
}

// newEvictionManager is node-pressure eviction for watch: the thresholds
// of --eviction-hard over the root dir's and the engine's filesystems and
// the machine's memory, evicting through the runner.
func newEvictionManager(ctx context.Context, opts *watchOptions, rt watchEngine, r *runner.Runner,
	reclaim func(context.Context)) *node.EvictionManager {
	stats, _ := rt.(engine.StatsProvider)
	return node.NewEvictionManager(node.EvictionConfig{
		Thresholds:     opts.EvictionHard,
		Measure:        opts.measureNode,
		MemoryCapacity: uint64(max(opts.Host().MemoryBytes, 0)),
		Pods:           r,
		Stats:          stats,
		EmptyDirUsage:  r.EmptyDirUsage,
		Reclaim:        reclaim,
		Clock:          opts.Clock,
		Log:            opts.Log,
	})
}

// nodeMeasurer measures the node: memory, the root dir's filesystem and
// the engine's data root's (asked of the engine once, here).
func nodeMeasurer(ctx context.Context, rootDir string, rt podEngine) func() (node.Measurements, error) {
	imagesDir := ""
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if root, err := rt.DataRoot(dctx); err == nil {
		imagesDir = root
	}
	cancel()
	return func() (node.Measurements, error) { return node.MeasureNode(rootDir, imagesDir) }
}
