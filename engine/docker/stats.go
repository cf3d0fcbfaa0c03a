package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/docker/docker/api/types/container"

	"github.com/podrun/podrun/engine"
)

var _ engine.StatsProvider = (*Runtime)(nil)

// ContainerStats takes one sample of a container's stats (one-shot: the
// engine does not wait for a second sample, which only CPU rates need).
func (r *Runtime) ContainerStats(ctx context.Context, id string) (*engine.ContainerStats, error) {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), err)
	}
	// The answer is the sample: read within the call's bound.
	s, err := answer(r, ctx, "stats of container "+shortID(full), func(ctx context.Context) (container.StatsResponse, error) {
		var s container.StatsResponse
		resp, err := r.cli.ContainerStatsOneShot(ctx, full)
		if err != nil {
			return s, err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return s, fmt.Errorf("reading the sample: %w", err)
		}
		return s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), wrap(err))
	}
	return &engine.ContainerStats{MemoryWorkingSetBytes: workingSet(s.MemoryStats)}, nil
}

// workingSet is usage less inactive file pages, as cAdvisor (and so the
// kubelet) computes it: inactive_file on cgroup v2, total_inactive_file on
// v1.
func workingSet(m container.MemoryStats) uint64 {
	inactive, ok := m.Stats["inactive_file"]
	if !ok {
		inactive = m.Stats["total_inactive_file"]
	}
	if inactive > m.Usage {
		return 0
	}
	return m.Usage - inactive
}

// ContainerDiskUsage inspects the container with its size (Docker walks
// the writable layer: not cheap, asked only of containers with an
// ephemeral-storage limit) and measures its log file on this host (0 when
// the engine is remote and the file is not here).
func (r *Runtime) ContainerDiskUsage(ctx context.Context, id string) (*engine.DiskUsage, error) {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("disk usage of %s: %w", shortID(id), err)
	}
	ins, err := answer(r, ctx, "inspect container "+shortID(full)+" with its size", func(ctx context.Context) (container.InspectResponse, error) {
		ins, _, err := r.cli.ContainerInspectWithRaw(ctx, full, true)
		return ins, err
	})
	if err != nil {
		return nil, fmt.Errorf("disk usage of %s: %w", shortID(id), wrap(err))
	}
	var u engine.DiskUsage
	if ins.SizeRw != nil && *ins.SizeRw > 0 {
		u.WritableLayerBytes = uint64(*ins.SizeRw)
	}
	if ins.ContainerJSONBase != nil && ins.LogPath != "" {
		if fi, err := os.Stat(ins.LogPath); err == nil {
			u.LogBytes = uint64(fi.Size())
		}
	}
	return &u, nil
}
