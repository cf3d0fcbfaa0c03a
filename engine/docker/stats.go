package docker

import (
	"context"
	"encoding/json"
	"fmt"

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
	resp, err := r.cli.ContainerStatsOneShot(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), wrap(err))
	}
	defer resp.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), err)
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
