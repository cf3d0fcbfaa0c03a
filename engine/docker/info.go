package docker

import (
	"context"
	"fmt"
	"slices"

	"github.com/docker/docker/api/types/container"

	"github.com/podrun/podrun/engine"
)

var _ engine.RuntimeHandlerLister = (*Runtime)(nil)

// RuntimeHandlers returns the names of Docker's runtimes (Runtimes of
// `docker info`: what HostConfig.Runtime may name), sorted, asked once:
// dockerd learns of a runtime (the NVIDIA Container Toolkit's "nvidia",
// gVisor's "runsc") only from its configuration, at its start (or a
// reload). A failed ask is not kept, nor the answer once Events had to
// reconnect (the engine may have restarted with another configuration).
func (r *Runtime) RuntimeHandlers(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	cached := r.runtimes
	r.mu.Unlock()
	if cached != nil {
		return slices.Clone(cached), nil
	}
	info, err := r.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", wrap(err))
	}
	names := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		names = append(names, name)
	}
	slices.Sort(names)
	r.mu.Lock()
	r.runtimes = names
	r.mu.Unlock()
	return slices.Clone(names), nil
}

// deviceRequests are the engine's device requests as Docker's.
func deviceRequests(reqs []engine.DeviceRequest) []container.DeviceRequest {
	var out []container.DeviceRequest
	for _, d := range reqs {
		caps := make([][]string, len(d.Capabilities))
		for i, c := range d.Capabilities {
			caps[i] = slices.Clone(c)
		}
		out = append(out, container.DeviceRequest{Driver: d.Driver, Count: d.Count, Capabilities: caps})
	}
	return out
}
