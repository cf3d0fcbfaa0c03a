package runner

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/health"
)

// Metrics are the sync core's Prometheus series. A nil *Metrics records
// nothing.
type Metrics struct {
	syncDuration      prometheus.Histogram
	podStarts         prometheus.Counter
	containerStarts   prometheus.Counter
	containerRestarts prometheus.Counter
	runtimeCalls      *prometheus.CounterVec
	probeResults      *prometheus.CounterVec
	relistPeriod      prometheus.Gauge
	hookHTTPFallbacks prometheus.Counter
}

// NewMetrics makes the sync core's series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "podrun_pod_sync_duration_seconds",
			Help:    "How long one sync of one pod took, actions included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		podStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podrun_pod_starts_total",
			Help: "Pod sandboxes started (a new pod, or a pod made again).",
		}),
		containerStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podrun_container_starts_total",
			Help: "Containers started.",
		}),
		containerRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podrun_container_restarts_total",
			Help: "Containers started again after an earlier run (restartCount increments).",
		}),
		runtimeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_runtime_calls_total",
			Help: "Calls podrun made to the container runtime, by method.",
		}, []string{"method"}),
		probeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podrun_probe_results_total",
			Help: "Probe runs, by probe type (Startup, Liveness, Readiness) and result.",
		}, []string{"probe_type", "result"}),
		relistPeriod: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "podrun_relist_period_seconds",
			Help: "The wait before the next periodic relist: 1 s without events, growing to 60 s while they flow.",
		}),
		hookHTTPFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podrun_lifecycle_handler_http_fallbacks_total",
			Help: "HTTPS httpGet lifecycle hooks that got a plain HTTP answer and passed over HTTP (the kubelet's kubelet_lifecycle_handler_http_fallbacks_total).",
		}),
	}
	reg.MustRegister(m.syncDuration, m.podStarts, m.containerStarts, m.containerRestarts, m.runtimeCalls, m.probeResults,
		m.relistPeriod, m.hookHTTPFallbacks)
	return m
}

// relistWait records the wait the relist began.
func (m *Metrics) relistWait(d time.Duration) {
	if m != nil {
		m.relistPeriod.Set(d.Seconds())
	}
}

func (m *Metrics) observeSync(d time.Duration) {
	if m != nil {
		m.syncDuration.Observe(d.Seconds())
	}
}

func (m *Metrics) lifecycleHTTPFallback() {
	if m != nil {
		m.hookHTTPFallbacks.Inc()
	}
}

func (m *Metrics) podStarted() {
	if m != nil {
		m.podStarts.Inc()
	}
}

func (m *Metrics) containerStarted(attempt int) {
	if m == nil {
		return
	}
	m.containerStarts.Inc()
	if attempt > 0 {
		m.containerRestarts.Inc()
	}
}

func (m *Metrics) probeResult(probeType string, result health.Result) {
	if m != nil {
		m.probeResults.WithLabelValues(probeType, result.String()).Inc()
	}
}

func (m *Metrics) runtimeCall(method string) {
	if m != nil {
		m.runtimeCalls.WithLabelValues(method).Inc()
	}
}

// countingRuntime counts every call podrun makes to its runtime, so that the
// cost of the sync loop in runtime calls can be measured (benchmarks read
// podrun_runtime_calls_total).
type countingRuntime struct {
	engine.Runtime
	m *Metrics
}

func (c countingRuntime) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	c.m.runtimeCall("RunSandbox")
	return c.Runtime.RunSandbox(ctx, cfg)
}

func (c countingRuntime) StopSandbox(ctx context.Context, id string, grace time.Duration) error {
	c.m.runtimeCall("StopSandbox")
	return c.Runtime.StopSandbox(ctx, id, grace)
}

func (c countingRuntime) RemoveSandbox(ctx context.Context, id string) error {
	c.m.runtimeCall("RemoveSandbox")
	return c.Runtime.RemoveSandbox(ctx, id)
}

func (c countingRuntime) ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error) {
	c.m.runtimeCall("ListSandboxes")
	return c.Runtime.ListSandboxes(ctx)
}

func (c countingRuntime) CreateContainer(ctx context.Context, sandboxID string, sb *engine.SandboxConfig, cfg *engine.ContainerConfig) (string, error) {
	c.m.runtimeCall("CreateContainer")
	return c.Runtime.CreateContainer(ctx, sandboxID, sb, cfg)
}

func (c countingRuntime) StartContainer(ctx context.Context, id string) error {
	c.m.runtimeCall("StartContainer")
	return c.Runtime.StartContainer(ctx, id)
}

func (c countingRuntime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	c.m.runtimeCall("StopContainer")
	return c.Runtime.StopContainer(ctx, id, grace)
}

func (c countingRuntime) RemoveContainer(ctx context.Context, id string) error {
	c.m.runtimeCall("RemoveContainer")
	return c.Runtime.RemoveContainer(ctx, id)
}

func (c countingRuntime) ListContainers(ctx context.Context) ([]*engine.Container, error) {
	c.m.runtimeCall("ListContainers")
	return c.Runtime.ListContainers(ctx)
}

func (c countingRuntime) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	c.m.runtimeCall("ImageStatus")
	return c.Runtime.ImageStatus(ctx, ref)
}

func (c countingRuntime) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	c.m.runtimeCall("PullImage")
	return c.Runtime.PullImage(ctx, ref, auth)
}
