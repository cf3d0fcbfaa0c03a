package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// RunSandbox creates and starts the pod's infra container, or adopts the one
// a previous call (or a previous podrun) made for the same (pod UID,
// attempt), starting it if it is not running.
func (r *Runtime) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	name := objectName(cfg.Pod, SandboxContainerName, cfg.Attempt)
	config, hc := r.sandboxConfig(cfg)
	id, state, made, err := r.createOrAdopt(ctx, name, cfg.Pod, SandboxContainerName, config, hc)
	if err != nil {
		return "", fmt.Errorf("run sandbox %s: %w", name, err)
	}
	r.remember(id, TypeSandbox)
	if made {
		// Its containers' placement is the one just given: they need not
		// inspect it (an adopted one is inspected, as it was made then).
		r.mu.Lock()
		r.placements[id] = placement{runtime: hc.Runtime, cgroupParent: hc.CgroupParent}
		r.mu.Unlock()
	}
	if state != container.StateRunning {
		err := r.start(ctx, id)
		// What a die event said of its last run is over (exits.go).
		r.noteEvent(id, events.ActionStart, nil, time.Time{})
		if err != nil {
			return "", fmt.Errorf("start sandbox %s: %w", name, wrap(err))
		}
	}
	return id, nil
}

// sandboxConfig is the infra container for cfg.
func (r *Runtime) sandboxConfig(cfg *engine.SandboxConfig) (*container.Config, *container.HostConfig) {
	l := r.identityLabels(cfg.Pod, SandboxContainerName, TypeSandbox, cfg.Attempt)
	labels.AddSandbox(l, cfg)
	config := &container.Config{
		Image:  cfg.Image,
		Labels: l,
	}
	hc := &container.HostConfig{
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		// Containers join the sandbox's IPC namespace: Docker lets them only
		// when it is "shareable".
		IpcMode:     container.IPCModeShareable,
		Sysctls:     cfg.Sysctls,
		OomScoreAdj: cfg.OOMScoreAdj,
		Runtime:     cfg.Runtime,
	}
	hc.CgroupParent = cfg.CgroupParent
	if cfg.HostNetwork {
		// The host's network and its hostname: Docker would otherwise give
		// the container a UTS namespace of its own.
		hc.NetworkMode = network.NetworkHost
		hc.UTSMode = "host"
	} else {
		hc.NetworkMode = network.NetworkBridge
		config.Hostname = cfg.Hostname
		config.ExposedPorts, hc.PortBindings = portBindings(cfg.Ports)
	}
	if cfg.HostIPC {
		hc.IpcMode = "host"
	}
	if cfg.HostPID {
		hc.PidMode = "host"
	}
	if cfg.DNS != nil {
		hc.DNS = cfg.DNS.Servers
		hc.DNSSearch = cfg.DNS.Searches
		hc.DNSOptions = cfg.DNS.Options
	}
	return config, hc
}

// portBindings publishes the ports that have a host port (a container port
// alone publishes nothing, as in Kubernetes).
func portBindings(ports []engine.PortMapping) (nat.PortSet, nat.PortMap) {
	if len(ports) == 0 {
		return nil, nil
	}
	exposed := nat.PortSet{}
	bindings := nat.PortMap{}
	for _, p := range ports {
		if p.HostPort == 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		key := nat.Port(strconv.Itoa(int(p.ContainerPort)) + "/" + proto)
		exposed[key] = struct{}{}
		bindings[key] = append(bindings[key], nat.PortBinding{
			HostIP:   p.HostIP,
			HostPort: strconv.Itoa(int(p.HostPort)),
		})
	}
	return exposed, bindings
}

// StopSandbox stops the sandbox's infra container within grace.
func (r *Runtime) StopSandbox(ctx context.Context, id string, grace time.Duration) error {
	if err := r.stop(ctx, id, grace, true); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", shortID(id), err)
	}
	return nil
}

// RemoveSandbox removes the sandbox's infra container (killing it if it
// runs). The pod's containers are left alone. A sandbox Docker cannot
// remove (yet) is a *RemovalError (wrapped), as for RemoveContainer.
func (r *Runtime) RemoveSandbox(ctx context.Context, id string) error {
	if err := r.remove(ctx, id, true); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", shortID(id), err)
	}
	return nil
}

// createOrAdopt creates the container name, or, when the name is taken,
// adopts the container holding it if it is the one wanted (see adopt). It
// returns the ID and the Docker state of what it returns ("created" for a
// new one), and whether this call made it.
func (r *Runtime) createOrAdopt(ctx context.Context, name string, pod engine.PodRef, cname string, config *container.Config, hc *container.HostConfig) (id, state string, made bool, err error) {
	// After a name conflict, the holder may not be inspectable yet (Docker
	// reserves the name before it registers the container) or any more (it
	// was removed): try again, for a while at most. Docker's names are
	// unique, so no try can make a duplicate.
	const tries = 40
	for try := 0; ; try++ {
		resp, err := r.create(ctx, config, hc, name)
		if err == nil {
			for _, w := range resp.Warnings {
				r.log.Warn("docker create", "name", name, "warning", w)
			}
			r.log.Debug("created container", "name", name, "id", shortID(resp.ID))
			return resp.ID, container.StateCreated, true, nil
		}
		if !cerrdefs.IsConflict(err) || try == tries {
			if cerrdefs.IsNotFound(err) {
				// The only thing create does not find is the image.
				return "", "", false, fmt.Errorf("image %s: %w: %v", config.Image, engine.ErrNotFound, err)
			}
			return "", "", false, wrap(err)
		}
		ins, ok, err := r.adopt(ctx, name, pod, cname)
		if err != nil {
			return "", "", false, err
		}
		if ok {
			return ins.ID, stateOf(ins), false, nil
		}
		select {
		case <-ctx.Done():
			return "", "", false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
