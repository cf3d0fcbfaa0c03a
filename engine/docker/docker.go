// Package docker implements engine.Runtime on the Docker Engine API.
//
// A pod is one infra ("sandbox") container holding the network, IPC and UTS
// namespaces, and the pod's containers join it (container:<id> modes), as
// the kubelet's dockershim did. Every object carries podrun's labels
// (node, pod identity, container identity, hashes, attempt) and a
// deterministic name, so podrun keeps no state of its own: a restarted
// podrun lists by label and adopts, and a name conflict on create means
// "adopt what is there", never "make another".
//
// Only Engine API 1.41 features are used (Docker 20.10).
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// Labels podrun puts on every object it makes: engine/labels', the same
// on every engine.
const (
	LabelNode           = labels.Node
	LabelPodUID         = labels.PodUID
	LabelPodName        = labels.PodName
	LabelPodNamespace   = labels.PodNamespace
	LabelContainerName  = labels.ContainerName
	LabelContainerType  = labels.ContainerType
	LabelContainerHash  = labels.ContainerHash
	LabelResourcesHash  = labels.ResourcesHash
	LabelImage          = labels.Image
	LabelSandboxHash    = labels.SandboxHash
	LabelPodSource      = labels.PodSource
	LabelGracePeriod    = labels.GracePeriod
	LabelQOSClass       = labels.QOSClass
	LabelSandboxID      = labels.SandboxID
	LabelAttempt        = labels.Attempt
	LabelPodLabelPrefix = labels.PodLabelPrefix
	TypeSandbox         = labels.TypeSandbox
	// SandboxContainerName is the container name part of a sandbox's name.
	SandboxContainerName = "POD"
)

// DefaultInfraPullTimeout bounds the pull of the infra image in
// EnsureInfraImage.
const DefaultInfraPullTimeout = 60 * time.Second

// Options configure a Runtime.
type Options struct {
	// Host is the engine's address ("unix:///var/run/docker.sock",
	// "tcp://..."). Empty: DOCKER_HOST, or the default socket.
	Host string
	// NodeName is the node this runtime works for: it labels everything it
	// makes with it and sees nothing else. Required.
	NodeName string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// InfraPullTimeout bounds EnsureInfraImage's pull; 0 means
	// DefaultInfraPullTimeout.
	InfraPullTimeout time.Duration
	// DefaultInfraRef says the ref EnsureInfraImage is given is podrun's
	// default, not one the user chose: when it is absent and an infra
	// image podrun built before is there, that one is used without trying
	// the pull, which an air-gapped box would try, and fail, on every
	// start. A ref the user chose is pulled whenever it is absent.
	DefaultInfraRef bool
	// InfraProgram, when set, is the static executable the infra image
	// EnsureInfraImage builds runs as /pause (pause.Program()). Nil builds
	// the image from the podrun executable instead, running `podrun pause`.
	InfraProgram []byte
	// PullProgress, when set, receives every progress message of a pull (as
	// Docker reports them: a status per layer), for a progress display.
	PullProgress func(ref string, p engine.PullProgress)
	// PullProgressDeadline cancels a pull that has reported no progress for
	// this long; 0 means DefaultPullProgressDeadline.
	PullProgressDeadline time.Duration
	// CallTimeout bounds each Engine API call that is a request and its
	// answer (the kubelet's --runtime-request-timeout): pulls and streams
	// aside, and a stop's bound is this plus its grace period (see
	// timeout.go). 0 means engine.DefaultRequestTimeout.
	CallTimeout time.Duration
}

// Runtime is engine.Runtime on Docker, bound to one node name.
type Runtime struct {
	cli              *client.Client
	node             string
	log              *slog.Logger
	infraPullTimeout time.Duration
	// pullDeadline is Options.PullProgressDeadline.
	pullDeadline time.Duration
	// callTimeout is Options.CallTimeout.
	callTimeout     time.Duration
	infraProgram    []byte
	defaultInfraRef bool
	pullProgress    func(string, engine.PullProgress)

	mu sync.Mutex
	// kinds remembers the type label of IDs known to be this node's, so
	// that calls by ID need not inspect to check ownership.
	kinds map[string]string
	// details caches what only inspect tells of a container, for states in
	// which it cannot change: StartedAt of a running container, and all of
	// an exited one's.
	details map[string]detail
	// placements are where each sandbox runs its containers (runtime and
	// cgroup parent), by sandbox ID: fixed when it is made, so asked of
	// the engine once, not at every container's creation.
	placements map[string]placement
	// starts counts StartContainer calls per ID: an inspect that overlapped
	// one may describe the run before it, and is not cached.
	starts map[string]int
	// exits are what Docker's die (and oom) events told of containers
	// whose exit its list does not show yet (exits.go).
	exits map[string]detail
	// engineInfo is info's answer, once engineInfoKnown; infoMu lets one
	// caller at a time ask dockerd for it.
	engineInfo      engineInfo
	engineInfoKnown bool
	infoMu          sync.Mutex
	// imageMounts is MountsImages' answer, once imageMountsKnown.
	imageMounts, imageMountsKnown bool
	// exports are the export containers ExportImageFilesystem holds.
	exports exportSet
}

var (
	_ engine.Runtime         = (*Runtime)(nil)
	_ engine.ResourceUpdater = (*Runtime)(nil)
	_ engine.LogReader       = (*Runtime)(nil)
)

// New makes a Runtime. It does not contact the engine: use Ping for that.
func New(opts Options) (*Runtime, error) {
	if opts.NodeName == "" {
		return nil, errors.New("docker runtime: node name is required")
	}
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	copts = append(copts, closeHijackedOnCancel) // last: it wraps the dialer the others set
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	r := &Runtime{
		cli:              cli,
		node:             opts.NodeName,
		log:              opts.Logger,
		infraPullTimeout: opts.InfraPullTimeout,
		pullDeadline:     opts.PullProgressDeadline,
		callTimeout:      opts.CallTimeout,
		infraProgram:     opts.InfraProgram,
		defaultInfraRef:  opts.DefaultInfraRef,
		pullProgress:     opts.PullProgress,
		kinds:            map[string]string{},
		details:          map[string]detail{},
		placements:       map[string]placement{},
		starts:           map[string]int{},
		exits:            map[string]detail{},
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.infraPullTimeout <= 0 {
		r.infraPullTimeout = DefaultInfraPullTimeout
	}
	if r.pullDeadline <= 0 {
		r.pullDeadline = DefaultPullProgressDeadline
	}
	if r.callTimeout <= 0 {
		r.callTimeout = engine.DefaultRequestTimeout
	}
	return r, nil
}

// NodeName is the node this runtime works for.
func (r *Runtime) NodeName() string { return r.node }

// Close releases the client's connections.
func (r *Runtime) Close() error { return r.cli.Close() }

// Ping checks that the engine answers. Its error wraps engine.ErrUnavailable
// when the engine cannot be reached.
func (r *Runtime) Ping(ctx context.Context) error {
	p, err := r.ping(ctx)
	if err != nil {
		return fmt.Errorf("docker at %s: %w: %v", r.cli.DaemonHost(), engine.ErrUnavailable, err)
	}
	// The API version is the one this answer names: the client's first
	// request need not ping again to negotiate it.
	r.cli.NegotiateAPIVersionPing(p)
	return nil
}

// RuntimeVersion is the engine as a node's status names it:
// "docker://<Engine version>".
func (r *Runtime) RuntimeVersion(ctx context.Context) (string, error) {
	v, err := answer(r, ctx, "docker version", r.cli.ServerVersion)
	if err != nil {
		return "", failed("docker version", wrap(err))
	}
	return "docker://" + v.Version, nil
}

// wrap gives err the runner sentinel it stands for, if any, keeping its text.
func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %v", engine.ErrUnavailable, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %v", engine.ErrNotFound, err)
	}
	return err
}

// objectName is the deterministic Docker name of a pod's container (or
// sandbox, with container "POD") at an attempt.
func objectName(pod engine.PodRef, container string, attempt int) string {
	uid := pod.UID
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "podrun_" + sanitize(container) + "_" + sanitize(pod.Name) + "_" +
		sanitize(pod.Namespace) + "_" + sanitize(uid) + "_" + strconv.Itoa(attempt)
}

var invalidNameChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// sanitize keeps a name part within what Docker accepts in names (Kubernetes
// names already are).
func sanitize(s string) string { return invalidNameChars.ReplaceAllString(s, "-") }

// identityLabels are the labels every object of a pod carries.
func (r *Runtime) identityLabels(pod engine.PodRef, name, typ string, attempt int) map[string]string {
	l := labels.Identity(r.node, pod, attempt)
	l[LabelContainerName] = name
	l[LabelContainerType] = typ
	return l
}

func podRef(l map[string]string) engine.PodRef { return labels.Pod(l) }

func attemptOf(l map[string]string) int { return labels.AttemptOf(l) }

// remember records that id is this node's, of type typ.
func (r *Runtime) remember(id, typ string) {
	r.mu.Lock()
	r.kinds[id] = typ
	r.mu.Unlock()
}

// forget drops what is known of id (after its removal).
func (r *Runtime) forget(id string) {
	r.mu.Lock()
	delete(r.kinds, id)
	delete(r.details, id)
	delete(r.placements, id)
	delete(r.starts, id)
	delete(r.exits, id)
	r.mu.Unlock()
}

// own checks that id names an object of this node whose type is one of
// types (sandbox, or init/app) and returns its full ID. An object of another
// node, or not podrun's, is ErrNotFound: this runtime does not see it.
func (r *Runtime) own(ctx context.Context, id string, sandbox bool) (string, error) {
	r.mu.Lock()
	typ, ok := r.kinds[id]
	r.mu.Unlock()
	if !ok {
		ins, err := r.inspect(ctx, id)
		if err != nil {
			return "", wrap(err)
		}
		if ins.Config == nil || ins.Config.Labels[LabelNode] != r.node {
			return "", fmt.Errorf("container %s: %w on node %s", id, engine.ErrNotFound, r.node)
		}
		typ = ins.Config.Labels[LabelContainerType]
		if ins.ID != id {
			// A name or a short ID: work with the full one, remember nothing.
			id = ins.ID
		} else {
			r.remember(id, typ)
		}
	}
	if (typ == TypeSandbox) != sandbox {
		what := "container"
		if sandbox {
			what = "sandbox"
		}
		return "", fmt.Errorf("%s %s: %w on node %s", what, id, engine.ErrNotFound, r.node)
	}
	return id, nil
}

// adopt inspects the object holding name after a create conflict and returns
// its ID when it is the one the caller wanted to make (same node, pod and
// container name; the name carries the attempt). ok is false when the name
// became free meanwhile.
func (r *Runtime) adopt(ctx context.Context, name string, pod engine.PodRef, cname string) (ins container.InspectResponse, ok bool, err error) {
	ins, err = r.inspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return ins, false, nil
	}
	if err != nil {
		return ins, false, fmt.Errorf("inspect %s: %w", name, wrap(err))
	}
	l := map[string]string{}
	if ins.Config != nil && ins.Config.Labels != nil {
		l = ins.Config.Labels
	}
	if l[LabelNode] != r.node || l[LabelPodUID] != pod.UID || l[LabelContainerName] != cname {
		return ins, false, fmt.Errorf("name %s is taken by container %.12s, which is not this pod's on node %s (node %q, pod uid %q): remove it or change the pod",
			name, ins.ID, r.node, l[LabelNode], l[LabelPodUID])
	}
	r.log.Info("adopted existing container", "name", name, "id", shortID(ins.ID), "state", stateOf(ins))
	return ins, true, nil
}

func stateOf(ins container.InspectResponse) string {
	if ins.ContainerJSONBase == nil || ins.State == nil {
		return ""
	}
	return ins.State.Status
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// graceSeconds is grace as Docker's stop timeout: whole seconds, rounded up.
func graceSeconds(grace time.Duration) int {
	if grace <= 0 {
		return 0
	}
	return int((grace + time.Second - 1) / time.Second)
}

// stop stops a container of this node within grace (Docker sends the
// container's stop signal, then SIGKILL).
func (r *Runtime) stop(ctx context.Context, id string, grace time.Duration, sandbox bool) error {
	full, err := r.own(ctx, id, sandbox)
	if err != nil {
		return err
	}
	secs := graceSeconds(grace)
	err = callWithin(ctx, "stop container "+shortID(full), r.stopBound(grace), func(ctx context.Context) error {
		return r.cli.ContainerStop(ctx, full, container.StopOptions{Timeout: &secs})
	})
	return wrap(err)
}

// remove force-removes a container of this node with its anonymous volumes.
// A missing one is not an error. When Docker answers but the container
// stays (its filesystem busy, dead, another removal of it under way that
// does not end within removalWait), the error is a *RemovalError naming it
// and its Docker state; a removal in progress that ends with the container
// gone is no error.
func (r *Runtime) remove(ctx context.Context, id string, sandbox bool) error {
	full, err := r.own(ctx, id, sandbox)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = r.removeForce(ctx, full)
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
	case client.IsErrConnectionFailed(err), ctx.Err() != nil, timedOut(err):
		// No answer: nothing to learn of the container's state.
		return wrap(err)
	default:
		// Docker answered, and did not remove it: see in what state it
		// left the container (another removal may also have taken it).
		if err := r.removalFailed(ctx, full, err); err != nil {
			return err
		}
	}
	r.forget(full)
	return nil
}
