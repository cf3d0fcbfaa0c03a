package runner

import (
	"context"
	"os"
	"path/filepath"

	"github.com/podrun/podrun/engine"
)

// housekeeping removes what no source defines any more, once every source
// has spoken: pods found in the runtime without a worker (their manifest was
// deleted while podrun was down, or they come from a source that dropped
// them), and pod directories with no pod.
func (r *Runner) housekeeping(ctx context.Context) {
	states := r.cache.all()
	r.forgetApplied(states)
	if r.cfg.SourcesReady == nil || !r.cfg.SourcesReady() {
		return
	}
	r.mu.Lock()
	var orphans []string
	for uid, st := range states {
		if r.workers[uid] != nil || r.removing[uid] {
			continue
		}
		if sb := st.latestSandbox(); sb != nil && r.cfg.KeepSource != nil && r.cfg.KeepSource(sb.Source) {
			continue
		}
		r.removing[uid] = true
		orphans = append(orphans, uid)
	}
	known := make(map[string]bool, len(r.workers)+len(states))
	for uid := range r.workers {
		known[uid] = true
	}
	r.mu.Unlock()
	for uid := range states {
		known[uid] = true
	}

	for _, uid := range orphans {
		st := states[uid]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() {
				r.mu.Lock()
				delete(r.removing, uid)
				r.mu.Unlock()
			}()
			ref := podRefOf(st)
			r.log.Info("removing pod no source defines", "pod", ref.Namespace+"/"+ref.Name, "uid", uid)
			if err := r.teardown(ctx, nil, st, recordedGrace(nil, st)); err != nil {
				r.log.Warn("remove pod", "pod", ref.Namespace+"/"+ref.Name, "err", err)
			}
			r.cache.invalidate()
		}()
	}
	r.removeOrphanDirs(known)
	r.reclaimImageCopiesAsync(ctx)
}

// removeOrphanDirs removes pod directories of pods neither desired nor in
// the runtime.
func (r *Runner) removeOrphanDirs(known map[string]bool) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RootDir, "pods"))
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || known[e.Name()] {
			continue
		}
		r.mu.Lock()
		busy := r.removing[e.Name()]
		r.mu.Unlock()
		if busy {
			continue
		}
		dir := filepath.Join(r.cfg.RootDir, "pods", e.Name())
		if err := r.cfg.PodCgroups.Remove(e.Name()); err != nil {
			r.log.Warn("remove orphaned pod cgroup", "uid", e.Name(), "err", err)
			continue
		}
		if err := removePodDir(r.cfg.RootDir, e.Name()); err != nil {
			r.log.Warn("remove orphaned pod directory", "dir", dir, "err", err)
			continue
		}
		r.log.Info("removed orphaned pod directory", "dir", dir)
	}
}

func podRefOf(st *podState) engine.PodRef {
	switch {
	case len(st.Sandboxes) > 0:
		return st.Sandboxes[0].Pod
	case len(st.Containers) > 0:
		return st.Containers[0].Pod
	}
	return engine.PodRef{}
}

// forgetApplied drops the in-place resource updates of containers that are
// gone.
func (r *Runner) forgetApplied(states map[string]*podState) {
	live := map[string]bool{}
	for _, st := range states {
		for _, c := range st.Containers {
			live[c.ID] = true
		}
	}
	r.applied.Range(func(k, _ any) bool {
		if !live[k.(string)] {
			r.applied.Delete(k)
		}
		return true
	})
}
