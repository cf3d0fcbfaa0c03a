// Package cri implements the engine contract over the CRI gRPC API
// (k8s.io/cri-api's RuntimeService and ImageService), for containerd's CRI
// plugin or any other CRI runtime: podrun's pods are CRI pod sandboxes
// (networked by the runtime's CNI), its containers CRI containers, its logs
// the CRI log files, its stats CRI's.
//
// Every object carries podrun's labels (node, pod UID, attempt, hashes), so
// that a restarted podrun adopts them from the runtime alone, and the CRI
// metadata (pod name, namespace, UID, attempt; container name, attempt) that
// the runtime reserves a name for: a second RunPodSandbox or CreateContainer
// of one identity fails on the reservation and is answered by adopting the
// object that holds it, never by a duplicate.
//
// Where CRI differs from the contract's Docker shape: the sandbox image is
// the runtime's own (containerd's sandbox_image), a stopped sandbox cannot
// be started again (RunSandbox of its identity is an error: the caller makes
// a new attempt), removing a sandbox removes its containers, and a host port
// is not refused when another sandbox maps it (CNI's portmap does not check).
package cri

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// DefaultEndpoint is the socket of the private containerd that
// hack/containerd.sh sets up.
const DefaultEndpoint = "unix:///run/podrun-containerd/containerd.sock"

// Options configure a Runtime.
type Options struct {
	// Endpoint is the CRI socket, as the kubelet's
	// --container-runtime-endpoint: unix:///run/containerd/containerd.sock.
	Endpoint string
	// NodeName is the node whose objects this runtime lists and touches.
	NodeName string
	// LogDir is the directory the pods' CRI log files are kept under (one
	// directory per sandbox), removed with their sandbox. Required.
	LogDir string
	// Logger receives one line per event; nil discards.
	Logger *slog.Logger
	// CallTimeout bounds each CRI call but pulls; 0 means
	// engine.DefaultRequestTimeout (2 minutes).
	CallTimeout time.Duration
	// PullProgress, when set, receives the progress of pulls, as Docker's
	// pull stream words it (from containerd's content store: pullprogress.go).
	PullProgress func(ref string, p engine.PullProgress)
	// PullProgressInterval is how often a running pull's downloads are
	// asked; 0 means DefaultPullProgressInterval.
	PullProgressInterval time.Duration
	// Clock stamps rotated logs' names (RotateLogs); nil is the real one.
	Clock clock.PassiveClock
}

// Runtime is the engine on a CRI runtime, for one node.
type Runtime struct {
	rs     internalapi.RuntimeService
	is     internalapi.ImageManagerService
	node   string
	logDir string
	log    *slog.Logger
	clock  clock.PassiveClock
	// pulls reports pulls' progress; nil when no one asked for it.
	pulls *pullWatch
	// containerd is containerd's own services, for what the CRI cannot do.
	containerd *containerdConn

	// locks serializes the calls that make one identity (a sandbox's or a
	// container's), so that this process's concurrent callers make one.
	locks keyedMutex

	mu sync.Mutex
	// owned holds the IDs of objects known to be this node's: true for
	// sandboxes, false for containers. IDs are never reused.
	owned map[string]bool
	// statuses holds what ContainerStatus said of a container, while the
	// list's state for it stays what it was then.
	statuses map[string]*runtimeapi.ContainerStatus
	// sandboxIPs holds running sandboxes' IPs (fixed while they run).
	sandboxIPs map[string]string
	// imageCreated holds images' creation times (fixed for an image ID).
	imageCreated map[string]time.Time
	// infraPresent holds the infra images found present.
	infraPresent map[string]bool
	// info is what the runtime's verbose status said of its config;
	// infoMu is held while it is asked.
	info   *runtimeInfo
	infoMu sync.Mutex
}

var (
	_ engine.Runtime              = (*Runtime)(nil)
	_ engine.PodObjectLister      = (*Runtime)(nil)
	_ engine.LogReader            = (*Runtime)(nil)
	_ engine.Execer               = (*Runtime)(nil)
	_ engine.ExecStreamer         = (*Runtime)(nil)
	_ engine.StatsProvider        = (*Runtime)(nil)
	_ engine.ResourceUpdater      = (*Runtime)(nil)
	_ engine.ImageService         = (*Runtime)(nil)
	_ engine.RuntimeHandlerLister = (*Runtime)(nil)
)

// New connects to the CRI runtime at opts.Endpoint (checking it speaks CRI
// v1). An unreachable runtime is engine.ErrUnavailable.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.NodeName == "" {
		return nil, errors.New("cri: a node name is required")
	}
	if opts.LogDir == "" {
		return nil, errors.New("cri: a log directory is required")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = engine.DefaultRequestTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Each client dials and checks the runtime's CRI version on its own
	// connection: both at once, so that a short-lived `podrun once` waits
	// for one round trip, not two.
	var rs internalapi.RuntimeService
	var is internalapi.ImageManagerService
	var rsErr, isErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		rs, rsErr = remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(opts.Endpoint).WithConnectionTimeout(opts.CallTimeout).Build(ctx)
	})
	wg.Go(func() {
		is, isErr = remote.NewRemoteImageServiceBuilder().WithEndpoint(opts.Endpoint).WithConnectionTimeout(opts.CallTimeout).Build(ctx)
	})
	wg.Wait()
	if rsErr != nil || isErr != nil {
		if rs != nil {
			rs.Close(ctx)
		}
		if is != nil {
			is.Close(ctx)
		}
		if rsErr != nil {
			return nil, fmt.Errorf("cri runtime service %s: %w: %v", opts.Endpoint, engine.ErrUnavailable, rsErr)
		}
		return nil, fmt.Errorf("cri image service %s: %w: %v", opts.Endpoint, engine.ErrUnavailable, isErr)
	}
	r := &Runtime{
		rs: rs, is: is, node: opts.NodeName, logDir: opts.LogDir, log: log, clock: opts.Clock,
		owned:        map[string]bool{},
		statuses:     map[string]*runtimeapi.ContainerStatus{},
		sandboxIPs:   map[string]string{},
		imageCreated: map[string]time.Time{},
		infraPresent: map[string]bool{},
		containerd:   &containerdConn{endpoint: opts.Endpoint},
	}
	if opts.PullProgress != nil {
		r.pulls = &pullWatch{containerd: r.containerd, report: opts.PullProgress, log: log,
			interval: cmp.Or(opts.PullProgressInterval, DefaultPullProgressInterval)}
	}
	return r, nil
}

// Close lets go of the connections.
func (r *Runtime) Close() error {
	ctx := context.Background()
	return errors.Join(r.rs.Close(ctx), r.is.Close(ctx), r.containerd.close())
}

// Ping checks the runtime answers and its runtime is ready.
func (r *Runtime) Ping(ctx context.Context) error {
	st, err := r.rs.Status(ctx, false)
	if err != nil {
		return wrap(err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.Type == runtimeapi.RuntimeReady && !c.Status {
			return fmt.Errorf("%w: runtime not ready: %s %s", engine.ErrUnavailable, c.Reason, c.Message)
		}
	}
	return nil
}

// RuntimeVersion is "<runtime>://<version>", as nodeInfo's
// containerRuntimeVersion.
func (r *Runtime) RuntimeVersion(ctx context.Context) (string, error) {
	v, err := r.rs.Version(ctx, "")
	if err != nil {
		return "", wrap(err)
	}
	return v.RuntimeName + "://" + v.RuntimeVersion, nil
}

// wrap maps a CRI error to the engine's: NotFound to engine.ErrNotFound,
// Unavailable to engine.ErrUnavailable.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w: %v", engine.ErrNotFound, err)
	case codes.Unavailable:
		return fmt.Errorf("%w: %v", engine.ErrUnavailable, err)
	}
	// cri-client wraps some errors in text; a runtime's "not found" is
	// then only in the message.
	if strings.Contains(err.Error(), "not found") && status.Code(err) == codes.Unknown {
		return fmt.Errorf("%w: %v", engine.ErrNotFound, err)
	}
	return err
}

func isNotFound(err error) bool { return errors.Is(wrap(err), engine.ErrNotFound) }

// shortID is an ID as people read it.
func shortID(id string) string { return id[:min(12, len(id))] }

// safeName reports whether s may be one element of a path: podrun's log
// directories are named after pod UIDs and container names, which come
// from manifests.
func safeName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 253 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// selector selects this node's objects, of the pod uid only when it is
// not "".
func (r *Runtime) selector(uid string) map[string]string {
	sel := map[string]string{labels.Node: r.node}
	if uid != "" {
		sel[labels.PodUID] = uid
	}
	return sel
}

func (r *Runtime) remember(id string, sandbox bool) {
	r.mu.Lock()
	r.owned[id] = sandbox
	r.mu.Unlock()
}

func (r *Runtime) forget(id string) {
	r.mu.Lock()
	delete(r.owned, id)
	delete(r.statuses, id)
	delete(r.sandboxIPs, id)
	r.mu.Unlock()
}

// known reports whether id is known to be this node's sandbox (sandbox) or
// container (!sandbox).
func (r *Runtime) known(id string, sandbox bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.owned[id]
	return ok && s == sandbox
}

// identityLabels are the labels of every object of pod.
func (r *Runtime) identityLabels(pod engine.PodRef, attempt int) map[string]string {
	return labels.Identity(r.node, pod, attempt)
}

// runtimeInfo is what podrun reads of the runtime's configuration, from
// its verbose status (containerd's CRI plugin reports its config there).
type runtimeInfo struct {
	SandboxImage string
	Handlers     []string
	CgroupDriver string
	ImageRoot    string
}

// runtimeInfo asks the runtime's verbose status once and keeps the answer
// (a runtime changes its configuration only by a restart). An error is not
// kept. Concurrent first callers (a starting podrun's infra image and
// oom_score_adj checks) wait for one call.
func (r *Runtime) runtimeInfo(ctx context.Context) (*runtimeInfo, error) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	r.mu.Lock()
	info := r.info
	r.mu.Unlock()
	if info != nil {
		return info, nil
	}
	st, err := r.rs.Status(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("runtime status: %w", wrap(err))
	}
	info = &runtimeInfo{CgroupDriver: "cgroupfs"}
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() != "" {
			info.Handlers = append(info.Handlers, h.GetName())
		}
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
		Root         string `json:"containerdRootDir"`
		Containerd   struct {
			DefaultRuntimeName string `json:"defaultRuntimeName"`
			Runtimes           map[string]struct {
				Options map[string]any `json:"options"`
			} `json:"runtimes"`
		} `json:"containerd"`
	}
	if raw := st.GetInfo()["config"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return nil, fmt.Errorf("runtime status: config: %w", err)
		}
	}
	info.SandboxImage = cfg.SandboxImage
	info.ImageRoot = cfg.Root
	if len(info.Handlers) == 0 {
		for name, rt := range cfg.Containerd.Runtimes {
			info.Handlers = append(info.Handlers, name)
			if name == cfg.Containerd.DefaultRuntimeName && rt.Options["SystemdCgroup"] == true {
				info.CgroupDriver = "systemd"
			}
		}
	}
	if len(info.Handlers) == 0 {
		// A runtime that says nothing has its default, by the name
		// containerd and CRI-O give it.
		info.Handlers = []string{"runc"}
	}
	sortStrings(info.Handlers)
	r.mu.Lock()
	r.info = info
	r.mu.Unlock()
	return info, nil
}

// keyedMutex is a mutex per key, held only while in use.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// reservedTries bounds how often a call that found its identity's name
// reserved, but no object holding it, looks again (50 ms apart): the
// holder is being made, and shows within moments.
const reservedTries = 200

// waitRetry waits before the next try of an adoption, or returns ctx's
// error.
func waitRetry(ctx context.Context) error {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isReserved reports whether err is the runtime's refusal of a name another
// object of the same identity holds.
func isReserved(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is reserved for")
}
