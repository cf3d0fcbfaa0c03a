package docker

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/docker/docker/api/types/container"

	"github.com/podrun/podrun/engine"
)

var _ engine.InfoReader = (*Runtime)(nil)

// EngineInfo is what `docker info` says of the engine's runtimes, asked
// once: dockerd learns of a runtime (the NVIDIA Container Toolkit's
// "nvidia") only from its configuration, at its start (or a reload). A
// failed ask is not kept, nor the answer once Events had to reconnect
// (the engine may have restarted with another configuration).
func (r *Runtime) EngineInfo(ctx context.Context) (*engine.Info, error) {
	r.mu.Lock()
	cached := r.info
	r.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	info, err := r.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", wrap(err))
	}
	out := &engine.Info{}
	for name := range info.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
	}
	sort.Strings(out.Runtimes)
	r.mu.Lock()
	r.info = out
	r.mu.Unlock()
	return out, nil
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
