package cri

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// CreateContainer creates the container of (pod UID, cfg.Name, cfg.Attempt)
// in the sandbox sbID, or returns the one that exists.
func (r *Runtime) CreateContainer(ctx context.Context, sbID string, sb *engine.SandboxConfig, cfg *engine.ContainerConfig) (string, error) {
	if !safeName(cfg.Name) || !safeName(sb.Pod.UID) {
		return "", fmt.Errorf("create container %q of pod %q: not a safe name", cfg.Name, sb.Pod.UID)
	}
	sbStatus, err := r.sandboxStatus(ctx, sbID)
	if err != nil {
		return "", fmt.Errorf("create container %s: sandbox %s: %w", cfg.Name, shortID(sbID), err)
	}
	if sbStatus.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		// Not ErrNotFound: the sandbox is there, only stopped.
		return "", fmt.Errorf("create container %s: sandbox %s is not running", cfg.Name, shortID(sbID))
	}
	unlock := r.locks.lock("c/" + sb.Pod.UID + "/" + cfg.Name + "/" + strconv.Itoa(cfg.Attempt))
	defer unlock()
	config, err := r.containerConfig(sb, cfg)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	sbConfig, err := r.sandboxConfig(sb)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	// The log directory is the sandbox's, where it was made.
	sbConfig.LogDirectory = r.sandboxLogDir(sbStatus.Labels[labels.PodUID], labels.AttemptOf(sbStatus.Labels))
	// The runtime reserves the identity's name first: the create is tried,
	// and the container that holds the name looked for only when it is
	// taken (a new container, the common case, makes no list first).
	for try := 0; ; try++ {
		id, err := r.rs.CreateContainer(ctx, sbID, config, sbConfig)
		if err == nil {
			r.remember(id, false)
			r.log.Debug("created container", "pod", sb.Pod.UID, "container", cfg.Name, "attempt", cfg.Attempt, "id", shortID(id))
			return id, nil
		}
		if !isReserved(err) || try == reservedTries {
			return "", fmt.Errorf("create container %s: %w", cfg.Name, wrap(err))
		}
		if id, ferr := r.findContainer(ctx, sbID, sb.Pod.UID, cfg.Name, cfg.Attempt); ferr != nil || id != "" {
			if ferr != nil {
				return "", fmt.Errorf("create container %s: %w", cfg.Name, ferr)
			}
			return id, nil
		}
		if err := waitRetry(ctx); err != nil {
			return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
		}
	}
}

// findContainer returns the ID of this node's container of (uid, name,
// attempt) in the sandbox sbID, or "".
func (r *Runtime) findContainer(ctx context.Context, sbID, uid, name string, attempt int) (string, error) {
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sbID, LabelSelector: map[string]string{
		labels.Node: r.node, labels.PodUID: uid, labels.ContainerName: name, labels.Attempt: strconv.Itoa(attempt),
	}})
	if err != nil {
		return "", wrap(err)
	}
	if len(cs) == 0 {
		return "", nil
	}
	return cs[0].Id, nil
}

// containerConfig is the CRI container config for cfg in the sandbox sb.
func (r *Runtime) containerConfig(sb *engine.SandboxConfig, cfg *engine.ContainerConfig) (*runtimeapi.ContainerConfig, error) {
	typ := cfg.Type
	if typ == "" {
		typ = engine.ContainerTypeApp
	}
	lbl := maps.Clone(cfg.Labels)
	if lbl == nil {
		lbl = map[string]string{}
	}
	// Identity labels win over the extra ones.
	maps.Copy(lbl, r.identityLabels(sb.Pod, cfg.Attempt))
	lbl[labels.ContainerName] = cfg.Name
	lbl[labels.ContainerType] = string(typ)
	lbl[labels.ContainerHash] = cfg.Hash
	lbl[labels.ResourcesHash] = cfg.ResourcesHash
	lbl[labels.Image] = cfg.Image

	if len(cfg.DeviceRequests) > 0 {
		return nil, fmt.Errorf("device requests (GPUs) are Docker's: not supported on CRI")
	}
	sc, err := securityContext(sb, cfg.Security)
	if err != nil {
		return nil, err
	}
	if ns := sc.NamespaceOptions; cfg.PIDTarget != "" && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		// As the kubelet runs an ephemeral container with a target.
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, cfg.PIDTarget
	}
	config := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: cfg.Name, Attempt: uint32(cfg.Attempt)},
		Image:      &runtimeapi.ImageSpec{Image: cfg.Image},
		Command:    cfg.Command,
		Args:       cfg.Args,
		WorkingDir: cfg.WorkingDir,
		Labels:     lbl,
		LogPath:    cfg.Name + "_" + strconv.Itoa(cfg.Attempt) + ".log",
		Stdin:      cfg.Stdin,
		StdinOnce:  cfg.StdinOnce,
		Tty:        cfg.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(&cfg.Resources, cfg.OOMScoreAdj),
			SecurityContext: sc,
		},
	}
	if cfg.StopSignal != "" {
		// Runtimes that predate the field (containerd 1.6) keep the
		// image's STOPSIGNAL.
		name := strings.ToUpper(cfg.StopSignal)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if v, ok := runtimeapi.Signal_value[name]; ok {
			config.StopSignal = runtimeapi.Signal(v)
		}
	}
	for _, e := range cfg.Env {
		config.Envs = append(config.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	for _, m := range cfg.Mounts {
		if m.Image != "" {
			return nil, fmt.Errorf("mount %s: image mounts are not supported on CRI here", m.ContainerPath)
		}
		cm := &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly}
		switch m.Propagation {
		case "", "rprivate":
		case "rslave":
			cm.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
		case "rshared":
			cm.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
		default:
			return nil, fmt.Errorf("mount %s: propagation %q", m.ContainerPath, m.Propagation)
		}
		config.Mounts = append(config.Mounts, cm)
	}
	for _, d := range cfg.Devices {
		dev, err := device(d)
		if err != nil {
			return nil, err
		}
		config.Devices = append(config.Devices, dev)
	}
	return config, nil
}

// device is the CRI device of "host[:container[:permissions]]".
func device(s string) (*runtimeapi.Device, error) {
	host, ctr, perms, err := engine.ParseDevice(s)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Device{HostPath: host, ContainerPath: ctr, Permissions: perms}, nil
}

// linuxResources are the CRI resources of res.
func linuxResources(res *engine.Resources, oomScoreAdj int) *runtimeapi.LinuxContainerResources {
	out := &runtimeapi.LinuxContainerResources{
		CpuShares:          res.CPUShares,
		CpuQuota:           res.CPUQuota,
		CpuPeriod:          res.CPUPeriod,
		MemoryLimitInBytes: res.MemoryLimit,
		OomScoreAdj:        int64(oomScoreAdj),
	}
	if res.MemoryLimit > 0 {
		// No swap beyond the limit, as the kubelet runs containers.
		out.MemorySwapLimitInBytes = res.MemoryLimit
	}
	return out
}

// securityContext is the CRI security context of a container of sb.
func securityContext(sb *engine.SandboxConfig, sc engine.SecurityConfig) (*runtimeapi.LinuxContainerSecurityContext, error) {
	out := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions:   namespaceOptions(sb),
		Privileged:         sc.Privileged,
		ReadonlyRootfs:     sc.ReadOnlyRootfs,
		NoNewPrivs:         sc.NoNewPrivileges,
		SupplementalGroups: sc.SupplementalGroups,
	}
	if len(sc.CapAdd) > 0 || len(sc.CapDrop) > 0 {
		out.Capabilities = &runtimeapi.Capability{AddCapabilities: capNames(sc.CapAdd), DropCapabilities: capNames(sc.CapDrop)}
	}
	if sc.RunAsUser != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	}
	if sc.RunAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	switch p := sc.Seccomp; p {
	case "", "runtime/default", "docker/default", "RuntimeDefault":
		out.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case "unconfined", "Unconfined":
		out.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	default:
		p = strings.TrimPrefix(p, "localhost/")
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("seccomp profile %q: want a local file's absolute path", sc.Seccomp)
		}
		out.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: p}
	}
	switch p := sc.AppArmor; p {
	case "", "runtime/default", "RuntimeDefault":
	case "unconfined", "Unconfined":
		out.Apparmor = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	default:
		out.Apparmor = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(p, "localhost/")}
	}
	return out, nil
}

// capNames are capabilities as CRI runtimes take them: "NET_ADMIN" (with
// or without CAP_), or "ALL".
func capNames(caps []string) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = strings.TrimPrefix(strings.ToUpper(c), "CAP_")
	}
	return out
}

// ownContainer checks that id is this node's container: ErrNotFound
// otherwise.
func (r *Runtime) ownContainer(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	resp, err := r.rs.ContainerStatus(ctx, id, false)
	return owned(r, "container", id, false, resp.GetStatus(), err)
}

// owned returns the status st of the object id (a sandbox or not) when its
// labels name this node, and ErrNotFound when they do not; err is the
// status call's.
func owned[S interface{ GetLabels() map[string]string }](r *Runtime, kind, id string, sandbox bool, st S, err error) (S, error) {
	var none S
	if err != nil {
		return none, wrap(err)
	}
	if st.GetLabels()[labels.Node] != r.node {
		return none, fmt.Errorf("%s %s: %w (another node's)", kind, shortID(id), engine.ErrNotFound)
	}
	r.remember(id, sandbox)
	return st, nil
}

// StartContainer starts a created container; a running one is left alone.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if r.known(id, false) {
		// Known to be this node's (this process made or saw it): start it
		// at once, and ask its status only when the start fails, to tell
		// "already running" from a failure. Bring-up's create-then-start
		// saves a round trip per container.
		err := r.rs.StartContainer(ctx, id)
		if err == nil {
			return nil
		}
		if startInFlight(err) {
			return r.awaitStart(ctx, id, err)
		}
		st, serr := r.ownContainer(ctx, id)
		if serr != nil {
			return fmt.Errorf("start container %s: %w", shortID(id), serr)
		}
		if st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return nil
		}
		return startError(id, err)
	}
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("start container %s: %w", shortID(id), err)
	}
	if st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	if err := r.rs.StartContainer(ctx, id); err != nil {
		if startInFlight(err) {
			return r.awaitStart(ctx, id, err)
		}
		return startError(id, err)
	}
	return nil
}

// startInFlightWait bounds the wait for another request's start of a
// container: a start takes seconds at most, even on a busy machine.
const startInFlightWait = time.Minute

// startInFlight is containerd's answer to a start of a container that
// another request is still starting: one a podrun killed mid-start asked
// for, which containerd finishes (or fails) on its own.
func startInFlight(err error) bool {
	return strings.Contains(err.Error(), "already in starting state")
}

// awaitStart waits for the start another request runs to end, and ends as
// it did: nil when the container runs, an error with the runtime's reason
// when it exited instead. Starting it again would fail the same way until
// then, and be recorded as the container's own start failure.
func (r *Runtime) awaitStart(ctx context.Context, id string, startErr error) error {
	ctx, cancel := context.WithTimeout(ctx, startInFlightWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := r.ownContainer(ctx, id)
		if err != nil {
			return fmt.Errorf("start container %s: %w", shortID(id), err)
		}
		switch st.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			return nil
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			return fmt.Errorf("start container %s: started by an earlier request, which ended with exit code %d (%s: %s)",
				shortID(id), st.ExitCode, st.Reason, st.Message)
		}
		select {
		case <-ctx.Done():
			return startError(id, startErr)
		case <-tick.C:
		}
	}
}

// startError is the failed start of container id, whose status said it is
// there: a NotFound from the runtime then names its sandbox or its start's
// task, not the container, so it is not engine.ErrNotFound.
func startError(id string, err error) error {
	err = wrap(err)
	if errorsIsNotFound(err) {
		err = fmt.Errorf("%v", err)
	}
	return fmt.Errorf("start container %s: %w", shortID(id), err)
}

// StopContainer stops a running container: its stop signal, then SIGKILL
// after grace.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", shortID(id), err)
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	timeout := int64((grace + time.Second - 1) / time.Second)
	if err := r.rs.StopContainer(ctx, id, timeout); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %s: %w", shortID(id), wrap(err))
	}
	return nil
}

// RemoveContainer removes a container (killing it if it runs) and its log
// files, the current one and the rotated ones (RotateLogs): the runtime
// leaves that to its caller, and a crash-looping container would otherwise
// fill the disk with one file per restart.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		if errorsIsNotFound(err) {
			r.forget(id)
			return nil
		}
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	err = r.rs.RemoveContainer(ctx, id)
	if isExitNotRecorded(err) {
		if werr := r.waitExitRecorded(ctx, id); werr != nil {
			err = fmt.Errorf("%w (waited for its exit to be recorded: %v)", err, werr)
		} else {
			err = r.rs.RemoveContainer(ctx, id)
		}
	}
	if isStrayTask(err) {
		if kerr := r.endStrayTask(ctx, id); kerr != nil {
			r.log.Warn("cannot end the task the CRI left running", "container", shortID(id), "err", kerr)
		} else {
			r.log.Info("ended the task the CRI left running", "container", shortID(id))
			err = r.rs.RemoveContainer(ctx, id)
		}
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), wrap(err))
	}
	r.forget(id)
	if err := r.removeUnderLogDir(st.LogPath); err != nil {
		r.log.Warn("remove container log", "container", shortID(id), "err", err)
	}
	if err := r.removeRotatedLogs(id, st.LogPath); err != nil {
		r.log.Warn("remove rotated container logs", "container", shortID(id), "err", err)
	}
	return nil
}

// isExitNotRecorded reports whether err is one of containerd 1.6's
// refusals to remove a container whose task has just ended but whose exit
// its CRI has not recorded yet: its forced stop finds no task and returns,
// and the status still says running ("container is still running, to
// stop first"); or its kill reaches the shim as the task's end closes it
// ("failed to kill container ...: ttrpc: closed").
func isExitNotRecorded(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "still running, to stop first") ||
		strings.Contains(msg, "failed to kill container") && strings.Contains(msg, "ttrpc: closed")
}

// exitRecordWait bounds how long waitExitRecorded waits; the CRI records
// an exit within milliseconds of its event.
const exitRecordWait = 10 * time.Second

// waitExitRecorded waits until the CRI's status of container id no longer
// says running (or the container is gone).
func (r *Runtime) waitExitRecorded(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, exitRecordWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := r.rs.ContainerStatus(ctx, id, false)
		switch {
		case isNotFound(err):
			return nil
		case err != nil:
			return wrap(err)
		case resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// ListContainers returns this node's containers.
func (r *Runtime) ListContainers(ctx context.Context) ([]*engine.Container, error) {
	cs, err := r.listContainers(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return cs, nil
}

// ListPodObjects returns the sandboxes and containers of the pod uid, or of
// every pod of this node when uid is "".
func (r *Runtime) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	sbs, err := r.listSandboxes(ctx, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("list pod objects: %w", err)
	}
	cs, err := r.listContainers(ctx, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("list pod objects: %w", err)
	}
	return sbs, cs, nil
}

func (r *Runtime) listContainers(ctx context.Context, uid string) ([]*engine.Container, error) {
	sel := r.selector(uid)
	list, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]*engine.Container, 0, len(list))
	for _, c := range list {
		r.remember(c.Id, false)
		st, err := r.status(ctx, c)
		if isNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, err
		}
		out = append(out, containerOf(c, st))
	}
	return out, nil
}

// status is the container's status, asked again only when its listed state
// changed since the last ask: what a status says (start, finish, exit)
// changes only with the state.
func (r *Runtime) status(ctx context.Context, c *runtimeapi.Container) (*runtimeapi.ContainerStatus, error) {
	r.mu.Lock()
	st := r.statuses[c.Id]
	r.mu.Unlock()
	if st != nil && st.State == c.State {
		return st, nil
	}
	resp, err := r.rs.ContainerStatus(ctx, c.Id, false)
	if err != nil {
		return nil, wrap(err)
	}
	st = resp.GetStatus()
	if st.State == c.State {
		r.mu.Lock()
		r.statuses[c.Id] = st
		r.mu.Unlock()
	}
	return st, nil
}

// containerOf is the engine's view of a listed container and its status.
func containerOf(c *runtimeapi.Container, st *runtimeapi.ContainerStatus) *engine.Container {
	lbl := c.Labels
	out := &engine.Container{
		ID:            c.Id,
		SandboxID:     c.PodSandboxId,
		Pod:           labels.Pod(lbl),
		Name:          lbl[labels.ContainerName],
		Type:          engine.ContainerType(lbl[labels.ContainerType]),
		Attempt:       labels.AttemptOf(lbl),
		Hash:          lbl[labels.ContainerHash],
		ResourcesHash: lbl[labels.ResourcesHash],
		Image:         lbl[labels.Image],
		ImageID:       c.ImageRef,
		CreatedAt:     time.Unix(0, c.CreatedAt),
		ExitCode:      int(st.ExitCode),
	}
	if out.Image == "" {
		out.Image = c.GetImage().GetImage()
	}
	if st.StartedAt > 0 {
		out.StartedAt = time.Unix(0, st.StartedAt)
	}
	if st.FinishedAt > 0 {
		// A process that exits at once may be recorded as finished a
		// moment before its start was.
		out.FinishedAt = time.Unix(0, max(st.FinishedAt, st.StartedAt))
	}
	switch st.State {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		out.State = engine.StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		out.State = engine.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		out.State = engine.StateExited
		out.OOMKilled = st.Reason == "OOMKilled"
		if st.Reason != "Completed" && st.Reason != "Error" && st.Reason != "OOMKilled" {
			out.Message = strings.TrimSpace(st.Reason + ": " + st.Message)
		}
	default:
		out.State = engine.StateUnknown
	}
	return out
}
