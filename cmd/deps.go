package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/cri"
	"github.com/podrun/podrun/engine/docker"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/pause"
	"github.com/podrun/podrun/runner"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

// The engine interfaces are what the commands need of the container
// engine, each no more than its commands use. The sync core's optional
// abilities (engine.Execer, engine.EventSource, ...) are found on the
// value by the runner itself. engine/docker implements them all (connect);
// the tests use the in-memory runner/enginetest.Fake.

// baseEngine is what every command that talks to the engine needs: the
// runtime contract, and letting go of the connection.
type baseEngine interface {
	engine.Runtime
	io.Closer
}

// podEngine is the engine of the commands that start pods (once, watch).
type podEngine interface {
	baseEngine
	// EnsureInfraImage returns a local image to run sandboxes with: ref
	// when it is present or can be pulled, else one built from the
	// executable exe (docker.Runtime.EnsureInfraImage). An error that
	// wraps engine.ErrUnavailable means the engine cannot be reached.
	EnsureInfraImage(ctx context.Context, ref, exe string) (string, error)
	// DataRoot is the directory the engine keeps its images in, whose
	// filesystem the low disk space check watches.
	DataRoot(ctx context.Context) (string, error)
	// CgroupDriver is the engine's cgroup driver ("cgroupfs", "systemd"):
	// podrun makes pod cgroups only under cgroupfs.
	CgroupDriver(ctx context.Context) (string, error)
}

// watchEngine is the engine of `watch`, which also collects garbage
// images and, joined to a cluster, names the engine in the node's status.
type watchEngine interface {
	podEngine
	engine.ImageService
	// LogReader serves the node API's containerLogs.
	engine.LogReader
	// ExecStreamer serves the node API's exec and run.
	engine.ExecStreamer
	// RuntimeVersion is "<engine>://<version>", as nodeInfo's
	// containerRuntimeVersion.
	RuntimeVersion(ctx context.Context) (string, error)
}

// logEngine is the engine of `logs`.
type logEngine interface {
	ListContainers(ctx context.Context) ([]*engine.Container, error)
	ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error)
	engine.LogReader
	io.Closer
}

var (
	_ watchEngine = (*docker.Runtime)(nil)
	_ logEngine   = (*docker.Runtime)(nil)
	_ watchEngine = (*cri.Runtime)(nil)
	_ logEngine   = (*cri.Runtime)(nil)
)

// connect opens this node's engine: the CRI runtime at
// --container-runtime-endpoint when it is set, else the Docker Engine;
// and checks it answers. Failing to reach it is exit code 3.
func connect(ctx context.Context, g *globalOptions) (watchEngine, error) {
	if err := checkNodeName(g.NodeName); err != nil {
		return nil, err
	}
	progress, endProgress := g.Images.pullProgress(g.ErrOut)
	g.endPullProgress = endProgress
	if g.RuntimeEndpoint != "" {
		return connectCRI(ctx, g, progress)
	}
	rt, err := docker.New(g.dockerOptions(progress))
	if err != nil {
		return nil, unreachable(fmt.Errorf("docker: %w", err))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Ping(pingCtx); err != nil {
		rt.Close()
		return nil, unreachable(fmt.Errorf("cannot reach the Docker Engine (is dockerd running? see --docker-host): %w", err))
	}
	g.runtimeName = "docker"
	return rt, nil
}

// connectCRI opens the CRI runtime at g.RuntimeEndpoint, its pods' log
// files kept under the root dir, its pulls shown by progress.
func connectCRI(ctx context.Context, g *globalOptions, progress func(string, engine.PullProgress)) (watchEngine, error) {
	endpoint, err := criEndpoint(g.RuntimeEndpoint)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rt, err := cri.New(pingCtx, g.criOptions(endpoint, progress))
	if err != nil {
		return nil, unreachable(fmt.Errorf("cannot reach the CRI runtime at %s (see --container-runtime-endpoint): %w", endpoint, err))
	}
	if err := rt.Ping(pingCtx); err != nil {
		rt.Close()
		return nil, unreachable(fmt.Errorf("CRI runtime at %s: %w", endpoint, err))
	}
	version, err := rt.RuntimeVersion(pingCtx)
	if err != nil {
		rt.Close()
		return nil, unreachable(fmt.Errorf("CRI runtime at %s: %w", endpoint, err))
	}
	// Pod status names container IDs as the kubelet does: containerd://...
	g.runtimeName, _, _ = strings.Cut(version, "://")
	return rt, nil
}

// dockerOptions are the Docker Engine's options for these flags, its
// pulls shown by progress.
func (g *globalOptions) dockerOptions(progress func(string, engine.PullProgress)) docker.Options {
	return docker.Options{Host: g.DockerHost, NodeName: g.NodeName, Logger: g.Log, PullProgress: progress,
		PullProgressDeadline: g.Images.PullProgressDeadline, CallTimeout: g.RuntimeRequestTimeout,
		InfraProgram: pause.Program(), DefaultInfraRef: g.InfraImage == defaultInfraImage}
}

// criOptions are the options of the CRI runtime at endpoint for these
// flags, its pods' log files kept under the root dir, its pulls shown by
// progress.
func (g *globalOptions) criOptions(endpoint string, progress func(string, engine.PullProgress)) cri.Options {
	return cri.Options{Endpoint: endpoint, NodeName: g.NodeName, LogDir: filepath.Join(g.RootDir, "logs"), Logger: g.Log,
		PullProgress: progress, CallTimeout: g.RuntimeRequestTimeout, Clock: g.Clock}
}

// runtimeNameOr is the connected engine's name, or def before connect
// named it (an engine the tests gave).
func (g *globalOptions) runtimeNameOr(def string) string {
	if g.runtimeName == "" {
		return def
	}
	return g.runtimeName
}

// criEndpoint is the CRI endpoint s as a URL: unix:///path, or a bare
// absolute path.
func criEndpoint(s string) (string, error) {
	switch {
	case strings.HasPrefix(s, "unix:///"):
		return s, nil
	case filepath.IsAbs(s):
		return "unix://" + s, nil
	}
	return "", badInputf("--container-runtime-endpoint %q: want unix:///path/to/socket", s)
}

// debugOnly is a slog handler that passes every record on at debug level.
type debugOnly struct{ slog.Handler }

func (h debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h debugOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugOnly{h.Handler.WithAttrs(attrs)}
}

func (h debugOnly) WithGroup(name string) slog.Handler { return debugOnly{h.Handler.WithGroup(name)} }

// connectAs is connect as a command's Engine dependency, typed as the
// engine interface E that command needs (which *docker.Runtime and
// *cri.Runtime implement: see the assertions above).
func connectAs[E any](g *globalOptions) func(context.Context) (E, error) {
	return func(ctx context.Context) (E, error) {
		rt, err := connect(ctx, g)
		if err != nil {
			var none E
			return none, err
		}
		return any(rt).(E), nil
	}
}

func checkNodeName(name string) error {
	if name == "" {
		return badInputf("--node-name is empty and the hostname is unknown: set --node-name")
	}
	if name != strings.ToLower(name) {
		return badInputf("--node-name %q: must be lower case", name)
	}
	return nil
}

// claimRootDir makes the root dir this node's (runner.ClaimRootDir), for
// once and watch, which run pods in it; checkRootDir only checks that it is
// no other node's, for the commands that use it but make no pods. Either
// comes before the engine is reached: another node's root dir is bad input,
// and nothing is started.
func (g *globalOptions) claimRootDir() error { return g.ownRootDir(runner.ClaimRootDir) }
func (g *globalOptions) checkRootDir() error { return g.ownRootDir(runner.CheckRootDir) }

// lockRootDir takes the root dir for this watch alone (runner.LockRootDir),
// then its node name on the machine (runner.LockNodeName); another watch on
// either is bad input.
func (g *globalOptions) lockRootDir() (unlock func(), err error) {
	unlockRoot, err := runner.LockRootDir(g.RootDir)
	if _, busy := errors.AsType[*runner.RootDirBusyError](err); busy {
		return nil, badInput(err)
	}
	if err != nil || g.NodeLockDir == "" {
		return unlockRoot, err
	}
	unlockNode, err := runner.LockNodeName(g.NodeLockDir, g.NodeName)
	if err != nil {
		unlockRoot()
		if _, busy := errors.AsType[*runner.NodeBusyError](err); busy {
			return nil, badInput(err)
		}
		return nil, err
	}
	return func() { unlockNode(); unlockRoot() }, nil
}

func (g *globalOptions) ownRootDir(own func(rootDir, nodeName string) error) error {
	// The name is checked first: it may be recorded.
	if err := checkNodeName(g.NodeName); err != nil {
		return err
	}
	err := own(g.RootDir, g.NodeName)
	if _, other := errors.AsType[*runner.RootDirOwnerError](err); other {
		return badInput(err)
	}
	if _, unsafe := errors.AsType[*runner.RootDirUnsafeError](err); unsafe {
		return badInput(err)
	}
	return err
}

// earlyEngine is an engine being reached while its caller does something
// else first (onceRun reads the manifests meanwhile).
type earlyEngine struct {
	cancel context.CancelFunc
	done   chan struct{}
	rt     podEngine
	err    error
	taken  bool
}

// reachEarly begins to reach the engine with open and to ask it its
// cgroup driver, newRunner's first question, whose answer the engine
// keeps (Docker's comes from `docker info`, asked once a process).
func reachEarly(ctx context.Context, open func(context.Context) (podEngine, error)) *earlyEngine {
	ctx, cancel := context.WithCancel(ctx)
	e := &earlyEngine{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		if e.rt, e.err = open(ctx); e.err == nil {
			// An error is not kept: newRunner asks again and reports it.
			_, _ = e.rt.CgroupDriver(ctx)
		}
	}()
	return e
}

// take waits for the engine and hands it to the caller, who closes it.
func (e *earlyEngine) take() (podEngine, error) {
	<-e.done
	e.taken = e.err == nil
	return e.rt, e.err
}

// discard ends what reachEarly began, once the engine is no longer used:
// an engine not taken is closed.
func (e *earlyEngine) discard() {
	e.cancel()
	<-e.done
	if e.err == nil && !e.taken {
		e.rt.Close()
	}
}

// newRunner builds the sync core on rt, making sure the infra image exists
// (building podrun's own when it cannot be pulled). The host's facts
// (g.Host) and clock (g.Clock) are the runner's.
func newRunner(ctx context.Context, g *globalOptions, rt podEngine, allowPrivileged bool, tune ...func(*runner.Config)) (*runner.Runner, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find podrun's executable: %w", err)
	}
	sysctls, err := runner.NewSysctlAllowlist(g.AllowedUnsafeSysctls)
	if err != nil {
		return nil, badInputf("--allowed-unsafe-sysctls: %v", err)
	}
	// The infra image's check is a round trip to the engine (more, when
	// it must be pulled or built), the cgroup driver and data root are
	// docker info, and the host's facts are read from /proc and /sys.
	// None waits for another: each is time before the first pod starts.
	var infra string
	infraDone := make(chan error, 1)
	go func() {
		var err error
		infra, err = rt.EnsureInfraImage(ctx, g.InfraImage, exe)
		infraDone <- err
	}()
	var host node.Host
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		host = g.Host()
	}()
	cgroups, cgroupsErr := podCgroups(ctx, rt, g.NodeName, g.PodMaxPIDs)
	var admit func(*v1.Pod) error
	if cgroupsErr == nil {
		admit = g.Images.admitter(ctx, g.RootDir, rt, g.Log)
	}
	oomFloor := g.oomFloor()
	<-hostDone
	if err := <-infraDone; err != nil {
		if errors.Is(err, engine.ErrUnavailable) {
			return nil, unreachable(err)
		}
		return nil, fmt.Errorf("infra image: %w", err)
	}
	if cgroupsErr != nil {
		return nil, cgroupsErr
	}
	cfg := runner.Config{
		Runtime:               rt,
		RuntimeName:           g.runtimeNameOr("docker"),
		NodeName:              g.NodeName,
		RootDir:               g.RootDir,
		InfraImage:            infra,
		HostIP:                host.IP,
		AllowPrivileged:       allowPrivileged,
		Clock:                 g.Clock,
		Log:                   g.Log,
		RuntimeRequestTimeout: g.RuntimeRequestTimeout,
		NodeMilliCPU:          host.MilliCPU,
		NodeMemory:            host.MemoryBytes,
		OOMScoreAdjFloor:      oomFloor,
		HostDNS:               hostDNS(host.DNS),
		Images:                g.Images.runnerImages(g.Log, g.imageUsage),
		Admit:                 admit,
		PodCgroups:            cgroups,
		Sysctls:               sysctls,
	}
	for _, t := range tune {
		t(&cfg)
	}
	return runner.New(cfg), nil
}

// oomFloor is the lowest oom_score_adj the runner may give containers
// (runner.Config.OOMScoreAdjFloor), from g.OOM's probe.
func (g *globalOptions) oomFloor() *int {
	if g.OOM == nil {
		return nil
	}
	return g.OOM().Floor()
}

// probeOOMOnce is g.OOM: probe once per podrun, the first time it is
// asked, and where podrun may not lower scores say so, once, in log's
// logger (the commands' logger exists only once the flags are parsed):
// Guaranteed and node-critical pods then get its own score rather than the
// kubelet's -997, and start.
func probeOOMOnce(log func() *slog.Logger, probe func() node.OOMProtection) func() node.OOMProtection {
	return sync.OnceValue(func() node.OOMProtection {
		p := probe()
		if floor := p.Floor(); floor != nil {
			log().Warn("podrun may not lower oom_score_adj: Guaranteed, node-critical and sandbox containers get podrun's own score instead of the kubelet's -997 and -998, still below every Burstable and BestEffort container's",
				"floor", *floor, "reason", p.Reason)
		}
		return p
	})
}

// hostDNS is the host's resolver configuration for the runner.
func hostDNS(rc *node.ResolvConf) *engine.DNSConfig {
	if rc == nil {
		return nil
	}
	return &engine.DNSConfig{Servers: rc.Servers, Searches: rc.Searches, Options: rc.Options}
}

// newTeardownRunner is a runner for removing pods: it starts nothing, so it
// needs no infra image.
func newTeardownRunner(g *globalOptions, rt baseEngine) *runner.Runner {
	return runner.New(runner.Config{
		Runtime: rt, RuntimeName: g.runtimeNameOr("docker"), NodeName: g.NodeName, RootDir: g.RootDir, Log: g.Log, HostIP: g.Host().IP,
		Clock: g.Clock, PodCgroups: runner.NewPodCgroups(g.NodeName, "", 0), RuntimeRequestTimeout: g.RuntimeRequestTimeout,
	})
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// addPodMaxPIDsFlag adds --pod-max-pids, the kubelet's flag.
func addPodMaxPIDsFlag(f *pflag.FlagSet, g *globalOptions) {
	f.Int64Var(&g.PodMaxPIDs, "pod-max-pids", 0,
		"the most processes a pod may have, all its containers together (its own cgroup's pids.max); 0: no limit")
}

// addSysctlFlag adds --allowed-unsafe-sysctls, the kubelet's flag.
func addSysctlFlag(f *pflag.FlagSet, g *globalOptions) {
	f.StringSliceVar(&g.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", nil,
		"unsafe sysctls (or patterns ending in *) pods may set besides the safe ones, comma-separated; others are refused (SysctlForbidden)")
}

// podCgroups is the runner's pod cgroups of node for this engine: they
// need Docker's cgroupfs driver, which --pod-max-pids then requires.
func podCgroups(ctx context.Context, rt podEngine, node string, maxPIDs int64) (*runner.PodCgroups, error) {
	if maxPIDs < 0 {
		return nil, badInputf("--pod-max-pids %d: want 0 (no limit) or more", maxPIDs)
	}
	driver, err := rt.CgroupDriver(ctx)
	if err != nil {
		if errors.Is(err, engine.ErrUnavailable) {
			return nil, unreachable(err)
		}
		return nil, fmt.Errorf("cgroup driver: %w", err)
	}
	if maxPIDs > 0 && driver != "cgroupfs" {
		return nil, badInputf("--pod-max-pids needs a pod cgroup, which podrun makes only under Docker's cgroupfs "+
			"cgroup driver; this engine uses %q", driver)
	}
	return runner.NewPodCgroups(node, driver, maxPIDs), nil
}
