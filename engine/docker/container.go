package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/podrun/podrun/engine"
)

// CreateContainer creates cfg in the sandbox sandboxID, or returns the
// container a previous call made for the same (pod UID, name, attempt).
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, sandbox *engine.SandboxConfig, cfg *engine.ContainerConfig) (string, error) {
	name := objectName(sandbox.Pod, cfg.Name, cfg.Attempt)
	sbID, err := r.own(ctx, sandboxID, true)
	if err != nil {
		return "", fmt.Errorf("create %s: sandbox: %w", name, err)
	}
	// A container runs with its sandbox's runtime and under its cgroup
	// parent, as the sandbox was made, whatever the pod's spec now says
	// (CRI's runtime handler is the sandbox's).
	place, err := r.placement(ctx, sbID)
	if err != nil {
		return "", fmt.Errorf("create %s: sandbox: %w", name, err)
	}
	made := *sandbox
	made.Runtime, made.CgroupParent = place.runtime, place.cgroupParent
	config, hc, err := r.containerConfig(ctx, sbID, &made, cfg)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	id, _, _, err := r.createOrAdopt(ctx, name, sandbox.Pod, cfg.Name, config, hc)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	r.remember(id, string(cfg.Type))
	return id, nil
}

// containerConfig is the Docker container for cfg, joined to the sandbox
// sbID's namespaces.
func (r *Runtime) containerConfig(ctx context.Context, sbID string, sb *engine.SandboxConfig, cfg *engine.ContainerConfig) (*container.Config, *container.HostConfig, error) {
	typ := cfg.Type
	if typ == "" {
		typ = engine.ContainerTypeApp
	}
	labels := map[string]string{}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	// Identity labels win over the extra ones.
	for k, v := range r.identityLabels(sb.Pod, cfg.Name, string(typ), cfg.Attempt) {
		labels[k] = v
	}
	labels[LabelContainerHash] = cfg.Hash
	labels[LabelResourcesHash] = cfg.ResourcesHash
	labels[LabelSandboxID] = sbID
	labels[LabelImage] = cfg.Image

	env := make([]string, 0, len(cfg.Env))
	for _, e := range cfg.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	config := &container.Config{
		Image:      cfg.Image,
		Env:        env,
		WorkingDir: cfg.WorkingDir,
		Tty:        cfg.TTY,
		OpenStdin:  cfg.Stdin,
		StdinOnce:  cfg.StdinOnce,
		StopSignal: cfg.StopSignal,
		Labels:     labels,
	}
	// Kubernetes: command replaces the entrypoint and, with it, the image's
	// cmd; args alone replace the cmd. Docker keeps an empty Cmd empty when
	// the Entrypoint is given, so the image's CMD is not appended.
	if len(cfg.Command) > 0 {
		config.Entrypoint = cfg.Command
		config.Cmd = cfg.Args
	} else if len(cfg.Args) > 0 {
		config.Cmd = cfg.Args
	}
	user, err := r.user(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	config.User = user

	sandboxNS := "container:" + sbID
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(sandboxNS),
		IpcMode:        container.IpcMode(sandboxNS),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		ReadonlyRootfs: cfg.Security.ReadOnlyRootfs,
		Privileged:     cfg.Security.Privileged,
		CapAdd:         cfg.Security.CapAdd,
		CapDrop:        cfg.Security.CapDrop,
		OomScoreAdj:    cfg.OOMScoreAdj,
		// The pod's runtime, as CRI runs every container with its sandbox's.
		Runtime: sb.Runtime,
	}
	switch {
	case sb.HostPID:
		hc.PidMode = "host"
	case sb.ShareProcessNamespace:
		hc.PidMode = container.PidMode(sandboxNS)
	case cfg.PIDTarget != "":
		hc.PidMode = container.PidMode("container:" + cfg.PIDTarget)
	}
	if sb.HostIPC {
		// Docker lets no one join a container's host IPC namespace.
		hc.IpcMode = "host"
	}
	if sb.HostNetwork {
		hc.UTSMode = "host"
	}
	for _, g := range cfg.Security.SupplementalGroups {
		hc.GroupAdd = append(hc.GroupAdd, strconv.FormatInt(g, 10))
	}
	hc.Resources = container.Resources{
		CPUShares: cfg.Resources.CPUShares,
		CPUQuota:  cfg.Resources.CPUQuota,
		CPUPeriod: cfg.Resources.CPUPeriod,
		Memory:    cfg.Resources.MemoryLimit,
	}
	if cfg.Resources.MemoryLimit > 0 {
		// No swap beyond the limit, as the kubelet runs containers.
		hc.Resources.MemorySwap = cfg.Resources.MemoryLimit
	}
	for _, d := range cfg.Devices {
		dm, err := deviceMapping(d)
		if err != nil {
			return nil, nil, err
		}
		hc.Resources.Devices = append(hc.Resources.Devices, dm)
	}
	hc.Resources.DeviceRequests = deviceRequests(cfg.DeviceRequests)
	// Resources of its own are the container's; its place in the cgroup
	// tree is the pod's.
	hc.Resources.CgroupParent = sb.CgroupParent
	for _, m := range cfg.Mounts {
		if m.Image != "" {
			// Refused, not sent: an older engine would fail the create
			// with a message about the mount type alone.
			ok, err := r.MountsImages(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("mount of image %s at %s: %w", m.Image, m.ContainerPath, err)
			}
			if !ok {
				return nil, nil, fmt.Errorf("mount of image %s at %s: the engine's API %s has no image mount (%s needed)",
					m.Image, m.ContainerPath, r.cli.ClientVersion(), imageMountAPI)
			}
			mm, err := imageMount(m)
			if err != nil {
				return nil, nil, err
			}
			hc.Mounts = append(hc.Mounts, mm)
			continue
		}
		if err := addMount(hc, m); err != nil {
			return nil, nil, err
		}
	}
	opts, err := securityOpts(cfg.Security)
	if err != nil {
		return nil, nil, err
	}
	hc.SecurityOpt = opts
	return config, hc, nil
}

// user is Docker's "uid[:gid]" for the security context; "" keeps the
// image's user. Docker has no "group only": then the image's user is kept
// by name with the group given.
func (r *Runtime) user(ctx context.Context, cfg *engine.ContainerConfig) (string, error) {
	s := cfg.Security
	switch {
	case s.RunAsUser != nil && s.RunAsGroup != nil:
		return fmt.Sprintf("%d:%d", *s.RunAsUser, *s.RunAsGroup), nil
	case s.RunAsUser != nil:
		return strconv.FormatInt(*s.RunAsUser, 10), nil
	case s.RunAsGroup != nil:
		img, err := r.inspectImage(ctx, cfg.Image)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", cfg.Image, wrap(err))
		}
		u := "0"
		if img.Config != nil && img.Config.User != "" {
			u, _, _ = strings.Cut(img.Config.User, ":")
		}
		return fmt.Sprintf("%s:%d", u, *s.RunAsGroup), nil
	}
	return "", nil
}

// addMount binds m into the container: as a "Binds" entry (which creates a
// missing host directory, as the kubelet's Docker did), or through the
// mounts API when a path holds a colon.
func addMount(hc *container.HostConfig, m engine.Mount) error {
	switch m.Propagation {
	case "", "rprivate", "rslave", "rshared":
	default:
		return fmt.Errorf("mount %s: unknown propagation %q", m.ContainerPath, m.Propagation)
	}
	if !filepath.IsAbs(m.HostPath) || !filepath.IsAbs(m.ContainerPath) {
		return fmt.Errorf("mount %s -> %s: paths must be absolute", m.HostPath, m.ContainerPath)
	}
	if strings.Contains(m.HostPath, ":") || strings.Contains(m.ContainerPath, ":") {
		mm := mount.Mount{Type: mount.TypeBind, Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly}
		if m.Propagation != "" {
			mm.BindOptions = &mount.BindOptions{Propagation: mount.Propagation(m.Propagation)}
		}
		hc.Mounts = append(hc.Mounts, mm)
		return nil
	}
	var opts []string
	if m.ReadOnly {
		opts = append(opts, "ro")
	}
	if m.Propagation != "" {
		opts = append(opts, m.Propagation)
	}
	bind := m.HostPath + ":" + m.ContainerPath
	if len(opts) > 0 {
		bind += ":" + strings.Join(opts, ",")
	}
	hc.Binds = append(hc.Binds, bind)
	return nil
}

// deviceMapping parses "host[:container[:permissions]]", as `docker run
// --device` does.
func deviceMapping(s string) (container.DeviceMapping, error) {
	host, ctr, perms, err := engine.ParseDevice(s)
	return container.DeviceMapping{PathOnHost: host, PathInContainer: ctr, CgroupPermissions: perms}, err
}

// securityOpts is Docker's SecurityOpt for sc.
func securityOpts(sc engine.SecurityConfig) ([]string, error) {
	var opts []string
	if sc.NoNewPrivileges {
		opts = append(opts, "no-new-privileges")
	}
	switch p := sc.Seccomp; p {
	case "", "runtime/default", "docker/default", "RuntimeDefault":
		// Docker's default profile.
	case "unconfined", "Unconfined":
		opts = append(opts, "seccomp=unconfined")
	default:
		p = strings.TrimPrefix(p, "localhost/")
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("seccomp profile %q: want a local file's absolute path", sc.Seccomp)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("seccomp profile: %w", err)
		}
		// Docker takes the profile's JSON itself, not a path.
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return nil, fmt.Errorf("seccomp profile %s: not JSON: %w", p, err)
		}
		opts = append(opts, "seccomp="+buf.String())
	}
	switch p := sc.AppArmor; p {
	case "", "runtime/default", "RuntimeDefault":
	case "unconfined", "Unconfined":
		opts = append(opts, "apparmor=unconfined")
	default:
		opts = append(opts, "apparmor="+strings.TrimPrefix(p, "localhost/"))
	}
	return opts, nil
}

// StartContainer starts a created (or exited) container of this node.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return fmt.Errorf("start %s: %w", shortID(id), err)
	}
	// What is cached of it describes a run that is over, and so may what a
	// list inspects while the start is under way.
	r.newRun(full)
	err = r.start(ctx, full)
	r.newRun(full)
	if cerrdefs.IsNotFound(err) {
		if _, ierr := r.inspect(ctx, full); ierr == nil {
			// The container is there: what is missing is the sandbox whose
			// namespaces it joins. That is no ErrNotFound of the container.
			return fmt.Errorf("start %s: its sandbox is gone: %v", shortID(id), err)
		}
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", shortID(id), wrap(err))
	}
	return nil
}

// newRun drops what is cached of id's last run.
func (r *Runtime) newRun(id string) {
	r.mu.Lock()
	delete(r.details, id)
	delete(r.exits, id)
	r.starts[id]++
	r.mu.Unlock()
}

// StopContainer stops a container with its stop signal, and SIGKILL after
// grace (rounded up to whole seconds, as Docker counts).
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.stop(ctx, id, grace, false); err != nil {
		return fmt.Errorf("stop %s: %w", shortID(id), err)
	}
	return nil
}

// RemoveContainer removes a container (killing it if it runs) and its
// anonymous volumes. A missing container is not an error. One that Docker
// cannot remove (yet) is a *RemovalError (wrapped) naming it and its Docker
// state: dead with its filesystem busy after a dockerd restart, say, which
// a later retry removes.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if err := r.remove(ctx, id, false); err != nil {
		return fmt.Errorf("remove %s: %w", shortID(id), err)
	}
	return nil
}

// errCannotUpdate is returned for a resource change Docker cannot make in
// place; the container must be replaced.
var errCannotUpdate = errors.New("cannot be changed in place")

// UpdateContainerResources changes a container's CPU and memory settings in
// place. A zero field removes the limit where Docker can (CPU quota; CPU
// shares go back to Docker's default); a memory limit cannot be removed in
// place, which is an error.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res *engine.Resources) error {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return fmt.Errorf("update %s: %w", shortID(id), err)
	}
	ins, err := r.inspect(ctx, full)
	if err != nil {
		return fmt.Errorf("update %s: %w", shortID(id), wrap(err))
	}
	if res.MemoryLimit == 0 && ins.HostConfig != nil && ins.HostConfig.Memory > 0 {
		return fmt.Errorf("update %s: removing the memory limit: %w", shortID(id), errCannotUpdate)
	}
	u := container.UpdateConfig{Resources: container.Resources{
		CPUShares: res.CPUShares,
		CPUQuota:  res.CPUQuota,
		CPUPeriod: res.CPUPeriod,
		Memory:    res.MemoryLimit,
	}}
	if u.CPUShares == 0 {
		u.CPUShares = 1024 // what "no shares" gives at create
	}
	if u.CPUQuota == 0 {
		u.CPUQuota = -1 // unlimited
	}
	if u.Memory > 0 {
		u.MemorySwap = u.Memory
	}
	resp, err := answer(r, ctx, "update container "+shortID(full), func(ctx context.Context) (container.UpdateResponse, error) {
		return r.cli.ContainerUpdate(ctx, full, u)
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", shortID(id), wrap(err))
	}
	for _, w := range resp.Warnings {
		r.log.Warn("docker update", "id", shortID(full), "warning", w)
	}
	return nil
}

// placement is where a sandbox runs its containers.
type placement struct {
	runtime, cgroupParent string
}

// placement returns the sandbox sbID's placement, inspecting it the first
// time only.
func (r *Runtime) placement(ctx context.Context, sbID string) (placement, error) {
	r.mu.Lock()
	p, ok := r.placements[sbID]
	r.mu.Unlock()
	if ok {
		return p, nil
	}
	ins, err := r.inspect(ctx, sbID)
	if err != nil {
		return placement{}, wrap(err)
	}
	if ins.ContainerJSONBase != nil && ins.HostConfig != nil {
		p = placement{runtime: ins.HostConfig.Runtime, cgroupParent: ins.HostConfig.CgroupParent}
	}
	r.mu.Lock()
	r.placements[sbID] = p
	r.mu.Unlock()
	return p, nil
}
