package docker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"golang.org/x/sync/errgroup"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// detail is what only inspect tells of a container.
type detail struct {
	state      engine.State
	startedAt  time.Time
	finishedAt time.Time
	exitCode   int
	oomKilled  bool
	message    string
}

var (
	_ engine.PodObjectLister  = (*Runtime)(nil)
	_ engine.PodSummaryLister = (*Runtime)(nil)
)

// list is one ContainerList of this node's objects (sandboxes only, or
// all; of the pod podUID only, when it is not ""), filtered by the engine.
func (r *Runtime) list(ctx context.Context, sandboxesOnly bool, podUID string) ([]container.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", LabelNode+"="+r.node))
	if sandboxesOnly {
		f.Add("label", LabelContainerType+"="+TypeSandbox)
	}
	if podUID != "" {
		f.Add("label", LabelPodUID+"="+podUID)
	}
	cs, err := r.listContainers(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, wrap(err)
	}
	return cs, nil
}

// ListSandboxes returns this node's sandboxes, from one ContainerList call.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error) {
	cs, err := r.list(ctx, true, "")
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	out := make([]*engine.Sandbox, 0, len(cs))
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		sb, err := r.sandboxOf(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		if sb != nil {
			seen[c.ID] = true
			out = append(out, sb)
		}
	}
	r.prune(seen, true)
	return out, nil
}

// sandboxOf maps a listed infra container; nil when it was removed since
// the list. A created one is inspected: Docker leaves a sandbox whose start
// failed (a host port taken, a stale task after an engine restart)
// "created", with an error, and that one is dead, not waiting to be
// started: it is reported exited, so that a new attempt replaces it rather
// than one start after another failing on it.
func (r *Runtime) sandboxOf(ctx context.Context, c container.Summary) (*engine.Sandbox, error) {
	r.remember(c.ID, TypeSandbox)
	state := listedState(c.State)
	if state == engine.StateRunning && r.diedPerEvent(c.ID) {
		state = engine.StateExited // see exits.go
	}
	if c.State == container.StateCreated {
		// Once Docker has recorded a failed start, the sandbox stays so
		// until a start succeeds (and the list says "running"): what the
		// inspect found is kept (in details, which holds containers' by
		// ID otherwise), so that dead sandboxes are not inspected at
		// every relist until garbage collection removes them.
		r.mu.Lock()
		d, failed := r.details[c.ID]
		r.mu.Unlock()
		if failed && d.state == engine.StateExited {
			state = engine.StateExited
		} else {
			ins, err := r.inspect(ctx, c.ID)
			if cerrdefs.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("inspect %s: %w", shortID(c.ID), wrap(err))
			}
			if ins.ContainerJSONBase != nil && ins.State != nil && (ins.State.ExitCode != 0 || ins.State.Error != "") {
				state = engine.StateExited
				r.mu.Lock()
				r.details[c.ID] = detail{state: engine.StateExited, exitCode: ins.State.ExitCode, message: ins.State.Error}
				r.mu.Unlock()
			}
		}
	}
	return sandboxSummary(c, state), nil
}

// sandboxSummary is the listed infra container c as a sandbox in state.
// Only a running sandbox has an address: one that a die event says is dead
// still shows it in Docker's list until the list catches up (exits.go),
// and the same dead sandbox must not look different then and after.
func sandboxSummary(c container.Summary, state engine.State) *engine.Sandbox {
	ip := ""
	if state == engine.StateRunning {
		ip = sandboxIP(c)
	}
	return &engine.Sandbox{
		ID:          c.ID,
		Pod:         podRef(c.Labels),
		Attempt:     attemptOf(c.Labels),
		Hash:        c.Labels[LabelSandboxHash],
		State:       state,
		IP:          ip,
		CreatedAt:   time.Unix(c.Created, 0),
		Source:      c.Labels[LabelPodSource],
		GracePeriod: labels.GracePeriodOf(c.Labels),
		QOSClass:    c.Labels[LabelQOSClass],
	}
}

// ListPodSummaries returns the sandboxes and containers of every pod of
// this node from one ContainerList call and nothing else: their states are
// the list's, and what only inspect tells (StartedAt, FinishedAt,
// ExitCode, OOMKilled, Message; a created sandbox whose start failed) is
// left out. That is all a teardown needs, and a fresh process (down)
// would otherwise inspect every container before it removes any.
func (r *Runtime) ListPodSummaries(ctx context.Context) ([]*engine.Sandbox, []*engine.Container, error) {
	cs, err := r.list(ctx, false, "")
	if err != nil {
		return nil, nil, fmt.Errorf("list pod objects: %w", err)
	}
	var sbs []*engine.Sandbox
	var ctrs []*engine.Container
	for _, c := range cs {
		typ := c.Labels[LabelContainerType]
		r.remember(c.ID, typ)
		if typ == TypeSandbox {
			sbs = append(sbs, sandboxSummary(c, listedState(c.State)))
			continue
		}
		ctrs = append(ctrs, containerSummary(c, detail{state: listedState(c.State)}))
	}
	return sbs, ctrs, nil
}

// ListPodObjects returns the sandboxes and containers of the pod uid, or of
// every pod of this node when uid is "", from one ContainerList call (plus
// the inspects ListContainers makes).
func (r *Runtime) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	cs, err := r.list(ctx, false, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("list pod objects: %w", err)
	}
	var sbs []*engine.Sandbox
	var ctrs []*engine.Container
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		if c.Labels[LabelContainerType] == TypeSandbox {
			sb, err := r.sandboxOf(ctx, c)
			if err != nil {
				return nil, nil, fmt.Errorf("list pod objects: %w", err)
			}
			if sb != nil {
				seen[c.ID] = true
				sbs = append(sbs, sb)
			}
			continue
		}
		ctr, err := r.containerOf(ctx, c)
		if err != nil {
			return nil, nil, fmt.Errorf("list pod objects: %w", err)
		}
		if ctr != nil {
			seen[c.ID] = true
			ctrs = append(ctrs, ctr)
		}
	}
	if uid == "" {
		// A complete list: what it did not return is gone.
		r.prune(seen, true)
		r.prune(seen, false)
	}
	return sbs, ctrs, nil
}

// listedState maps the Docker state of a listed container (an infra one or not).
func listedState(s string) engine.State {
	switch s {
	case container.StateCreated:
		return engine.StateCreated
	case container.StateRunning, container.StatePaused, container.StateRestarting:
		return engine.StateRunning
	case container.StateExited, container.StateDead, container.StateRemoving:
		return engine.StateExited
	}
	return engine.StateUnknown
}

// sandboxIP is the infra container's address on its network; "" with the
// host's network (the caller uses the host's address) or when not running.
func sandboxIP(c container.Summary) string {
	if c.HostConfig.NetworkMode == "host" || c.NetworkSettings == nil {
		return ""
	}
	if n := c.NetworkSettings.Networks["bridge"]; n != nil && n.IPAddress != "" {
		return n.IPAddress
	}
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for name := range c.NetworkSettings.Networks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n := c.NetworkSettings.Networks[name]; n != nil && n.IPAddress != "" {
			return n.IPAddress
		}
	}
	return ""
}

// ListContainers returns this node's containers. It costs one ContainerList
// call, plus one inspect for each container seen for the first time in its
// present state (what inspect tells of a running or exited container does
// not change, and is cached) and for each created one. The inspects run
// inspectsAtOnce at a time: a process that lists for the first time (down,
// once, a restarted watch) inspects every container.
func (r *Runtime) ListContainers(ctx context.Context) ([]*engine.Container, error) {
	cs, err := r.list(ctx, false, "")
	if err != nil {
		return nil, failed("list containers", err)
	}
	cs = slices.DeleteFunc(cs, func(c container.Summary) bool { return c.Labels[LabelContainerType] == TypeSandbox })
	mapped := make([]*engine.Container, len(cs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inspectsAtOnce)
	for i, c := range cs {
		g.Go(func() error {
			ctr, err := r.containerOf(gctx, c)
			mapped[i] = ctr
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]*engine.Container, 0, len(cs))
	seen := make(map[string]bool, len(cs))
	for _, ctr := range mapped {
		if ctr != nil {
			seen[ctr.ID] = true
			out = append(out, ctr)
		}
	}
	r.prune(seen, false)
	return out, nil
}

// inspectsAtOnce bounds the inspects one list makes together: enough to
// overlap their round trips, few enough not to queue up in dockerd.
const inspectsAtOnce = 8

// containerOf maps a listed container, with what only inspect tells (see
// detail); nil when it was removed since the list.
func (r *Runtime) containerOf(ctx context.Context, c container.Summary) (*engine.Container, error) {
	typ := c.Labels[LabelContainerType]
	r.remember(c.ID, typ)
	d, err := r.detail(ctx, c.ID, c.State)
	if cerrdefs.IsNotFound(err) {
		return nil, nil // removed since the list
	}
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", shortID(c.ID), wrap(err))
	}
	return containerSummary(c, d), nil
}

// containerSummary is the listed container c with what inspect told of it.
func containerSummary(c container.Summary, d detail) *engine.Container {
	image := c.Labels[LabelImage]
	if image == "" {
		image = c.Image
	}
	return &engine.Container{
		ID:            c.ID,
		SandboxID:     c.Labels[LabelSandboxID],
		Pod:           podRef(c.Labels),
		Name:          c.Labels[LabelContainerName],
		Type:          engine.ContainerType(c.Labels[LabelContainerType]),
		Attempt:       attemptOf(c.Labels),
		Hash:          c.Labels[LabelContainerHash],
		ResourcesHash: c.Labels[LabelResourcesHash],
		Image:         image,
		ImageID:       c.ImageID,
		State:         d.state,
		CreatedAt:     time.Unix(c.Created, 0),
		StartedAt:     d.startedAt,
		FinishedAt:    d.finishedAt,
		ExitCode:      d.exitCode,
		OOMKilled:     d.oomKilled,
		Message:       d.message,
	}
}

// detail returns what inspect tells of container id, which the list saw in
// Docker state listState: from the cache when it holds the container in that
// state, else by inspecting it.
func (r *Runtime) detail(ctx context.Context, id, listState string) (detail, error) {
	want := engine.StateUnknown
	switch listState {
	case container.StateRunning, container.StatePaused, container.StateRestarting:
		want = engine.StateRunning
	case container.StateExited, container.StateDead, container.StateRemoving:
		want = engine.StateExited
	}
	r.mu.Lock()
	d, ok := r.details[id]
	starts := r.starts[id]
	exit, died := r.exits[id]
	r.mu.Unlock()
	if want == engine.StateRunning && died && exit.state == engine.StateExited {
		// Docker said it died; its list catches up later (exits.go).
		if ok && exit.startedAt.IsZero() {
			exit.startedAt = d.startedAt
		}
		return exit, nil
	}
	if ok && d.state == want {
		return d, nil
	}
	ins, err := r.inspect(ctx, id)
	if err != nil {
		return detail{}, err
	}
	d = detailOf(ins)
	if d.state == engine.StateRunning || d.state == engine.StateExited {
		r.mu.Lock()
		if r.starts[id] == starts {
			r.details[id] = d
			if d.state == engine.StateExited {
				delete(r.exits, id) // the list has caught up
			}
		}
		r.mu.Unlock()
	}
	return d, nil
}

// detailOf maps an inspected container's state. A container whose start
// failed stays "created" in Docker, with an exit code and an error: it is
// reported as exited (at its creation), as the kubelet did.
func detailOf(ins container.InspectResponse) detail {
	if ins.ContainerJSONBase == nil || ins.State == nil {
		return detail{state: engine.StateUnknown}
	}
	st := ins.State
	d := detail{
		startedAt:  dockerTime(st.StartedAt),
		finishedAt: dockerTime(st.FinishedAt),
		exitCode:   st.ExitCode,
		oomKilled:  st.OOMKilled,
		message:    st.Error,
	}
	if !d.finishedAt.IsZero() && d.finishedAt.Before(d.startedAt) {
		// A process that exits at once may do so before Docker stamps its
		// start: it did not finish before it started.
		d.startedAt = d.finishedAt
	}
	switch st.Status {
	case container.StateRunning, container.StatePaused, container.StateRestarting:
		d.state = engine.StateRunning
	case container.StateExited, container.StateDead, container.StateRemoving:
		d.state = engine.StateExited
	case container.StateCreated:
		d.state = engine.StateCreated
		if st.ExitCode != 0 || st.Error != "" {
			d.state = engine.StateExited
			created := dockerTime(ins.Created)
			if d.startedAt.IsZero() {
				d.startedAt = created
			}
			if d.finishedAt.IsZero() {
				d.finishedAt = created
			}
		}
	default:
		d.state = engine.StateUnknown
	}
	return d
}

// dockerTime parses Docker's RFC 3339 times; Docker's "0001-01-01T00:00:00Z"
// (never) and anything unparsable are the zero time.
func dockerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.IsZero() || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// prune forgets the objects of one class (sandboxes, or containers) that a
// complete list of that class did not return: they are gone.
func (r *Runtime) prune(seen map[string]bool, sandboxes bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, typ := range r.kinds {
		if (typ == TypeSandbox) == sandboxes && !seen[id] {
			delete(r.kinds, id)
			delete(r.details, id)
			delete(r.starts, id)
			delete(r.exits, id)
		}
	}
	for id := range r.exits {
		if _, known := r.kinds[id]; !known {
			delete(r.exits, id) // its destroy event was missed
		}
	}
}
