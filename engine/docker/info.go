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
// `docker info`: what HostConfig.Runtime may name), sorted. dockerd learns
// of a runtime (the NVIDIA Container Toolkit's "nvidia", gVisor's "runsc")
// only from its configuration, at its start (or a reload): see info.
func (r *Runtime) RuntimeHandlers(ctx context.Context) ([]string, error) {
	info, err := r.info(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(info.runtimes), nil
}

// engineInfo is what podrun reads of `docker info`: all of it fixed by
// dockerd's configuration.
type engineInfo struct {
	runtimes     []string // sorted
	cgroupDriver string
	dataRoot     string
}

// info returns `docker info`, asked once for all its readers (the cgroup
// driver, the data root, the runtimes): dockerd answers it slowly (tens
// of milliseconds on a busy engine), and a `once` that asked it once per
// reader waited on each before its first pod. Concurrent first askers
// share one request. A failed ask is not kept, nor the answer once Events
// had to reconnect (the engine may have restarted with another
// configuration).
func (r *Runtime) info(ctx context.Context) (engineInfo, error) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	r.mu.Lock()
	cached, ok := r.engineInfo, r.engineInfoKnown
	r.mu.Unlock()
	if ok {
		return cached, nil
	}
	info, err := answer(r, ctx, "info", r.cli.Info)
	if err != nil {
		return engineInfo{}, fmt.Errorf("docker info: %w", wrap(err))
	}
	names := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		names = append(names, name)
	}
	slices.Sort(names)
	got := engineInfo{runtimes: names, cgroupDriver: info.CgroupDriver, dataRoot: info.DockerRootDir}
	r.mu.Lock()
	r.engineInfo, r.engineInfoKnown = got, true
	r.mu.Unlock()
	return got, nil
}

// forgetInfo makes the next info ask dockerd again.
func (r *Runtime) forgetInfo() {
	r.mu.Lock()
	r.engineInfo, r.engineInfoKnown = engineInfo{}, false
	r.mu.Unlock()
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
