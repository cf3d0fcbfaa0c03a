package runner

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"time"

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
				// A pod waiting for its name need not wait for its back-off.
				r.wakeNamesakeWaitersLocked(uid)
				r.mu.Unlock()
			}()
			ref := podRefOf(st)
			r.log.Info("removing pod no source defines", "pod", ref.Namespace+"/"+ref.Name, "uid", uid)
			if err := r.removeUnsourced(ctx, st); err != nil {
				r.log.Warn("remove pod", "pod", ref.Namespace+"/"+ref.Name, "err", err)
			}
			r.cache.invalidate()
		}()
	}
	if now := r.clock.Now(); r.dirScan.due(known, now) {
		r.dirScan = orphanDirScan{known: known, at: now, clean: r.removeOrphanDirs(known)}
	}
	r.reclaimImageCopiesAsync(ctx)
}

// removeUnsourced removes st, the objects of a pod no source defines
// (housekeeping's orphans, and those of a UID or a name a new pod takes):
// gracefully, with the grace period its sandbox recorded, and with its
// pod directory and cgroup.
func (r *Runner) removeUnsourced(ctx context.Context, st *podState) error {
	return r.teardown(ctx, nil, st, recordedGrace(nil, st))
}

// orphanDirPeriod is how often the pods directory is read although the
// pods known did not change: a pod directory is orphaned by a pod going
// (the known set changes) or by a removal that failed (the scan was not
// clean), and this catches anything else, such as a directory made by
// hand, on an idle node that would otherwise read the directory every
// housekeeping round for nothing.
const orphanDirPeriod = time.Minute

// orphanDirScan is the last time removeOrphanDirs read the pods directory
// (housekeeping's goroutine only).
type orphanDirScan struct {
	known map[string]bool // the pods known then
	at    time.Time
	clean bool // it left no orphaned directory behind
}

// due reports whether the pods directory should be read now, with known
// the pods known now.
func (s orphanDirScan) due(known map[string]bool, now time.Time) bool {
	return !s.clean || now.Sub(s.at) >= orphanDirPeriod || !maps.Equal(known, s.known)
}

// removeOrphanDirs removes pod directories of pods neither desired nor in
// the runtime.
func (r *Runner) removeOrphanDirs(known map[string]bool) (clean bool) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RootDir, "pods"))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	clean = true
	for _, e := range entries {
		if !e.IsDir() || known[e.Name()] {
			continue
		}
		r.mu.Lock()
		busy := r.removing[e.Name()]
		r.mu.Unlock()
		if busy {
			clean = false
			continue
		}
		dir := filepath.Join(r.cfg.RootDir, "pods", e.Name())
		if err := r.cfg.PodCgroups.Remove(e.Name()); err != nil {
			r.log.Warn("remove orphaned pod cgroup", "uid", e.Name(), "err", err)
			clean = false
			continue
		}
		if err := removePodDir(r.cfg.RootDir, e.Name()); err != nil {
			r.log.Warn("remove orphaned pod directory", "dir", dir, "err", err)
			clean = false
			continue
		}
		r.log.Info("removed orphaned pod directory", "dir", dir)
	}
	return clean
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
