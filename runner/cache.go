package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
)

// podCache holds the runtime's state of every pod of this node (the
// kubelet's pod cache). Two kinds of list fill it:
//
//   - the relist, every period and when asked (invalidate), lists every
//     pod of the node, and tells of the pods whose state it found changed.
//     A worker that asks for state of generation gen or later (get) waits
//     for a relist begun after the ask; however many ask at once, one
//     relist answers them all. It is what catches anything missed.
//   - a refresh lists one pod (with a runtime that is a PodObjectLister):
//     what a pod's worker asks for after it acted, and when a runtime event
//     names its pod. So a change to one pod costs a list of that pod, not
//     a list of the node, whatever the number of pods.
//
// Every list takes a sequence number when it begins, and a pod's state is
// only ever replaced by that of a list begun later than the one it came
// from: a slow relist never undoes what a refresh begun after it saw.
type podCache struct {
	rt engine.Runtime
	// lister lists in one call; nil when the runtime cannot.
	lister engine.PodObjectLister
	log    *slog.Logger
	clock  clock.WithTicker
	period time.Duration
	// notify is called with the UIDs of pods whose state a relist found
	// changed; recovered (when set) after a relist that succeeded where
	// the one before failed: the runtime is back.
	notify    func(uids []string)
	recovered func()

	mu        sync.Mutex
	requested uint64 // generation asked for by invalidate
	done      uint64 // generation of the last completed relist
	pods      map[string]*podState
	// seq numbers lists as they begin; stamp is, by pod, the seq of the
	// list its state (or its absence) comes from.
	seq     uint64
	stamp   map[string]uint64
	err     error
	updated chan struct{} // closed and replaced after every relist
	kick    chan struct{}
}

func newPodCache(rt engine.Runtime, lister engine.PodObjectLister, log *slog.Logger, clk clock.WithTicker, period time.Duration, notify func([]string)) *podCache {
	return &podCache{
		rt: rt, lister: lister, log: log, clock: clk, period: period, notify: notify,
		pods:    map[string]*podState{},
		stamp:   map[string]uint64{},
		updated: make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
}

// countingLister counts ListPodObjects calls with the runtime's other
// calls (podrun_runtime_calls_total).
type countingLister struct {
	engine.PodObjectLister
	m *Metrics
}

func (c countingLister) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	c.m.runtimeCall("ListPodObjects")
	return c.PodObjectLister.ListPodObjects(ctx, uid)
}

// invalidate marks everything known so far as stale and returns the
// generation a relist must reach to be fresh.
func (c *podCache) invalidate() uint64 {
	c.mu.Lock()
	c.requested++
	g := c.requested
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return g
}

// get returns the pod's state from a relist of generation gen or later.
func (c *podCache) get(ctx context.Context, uid string, gen uint64) (*podState, error) {
	for {
		c.mu.Lock()
		if c.done >= gen {
			st, err := c.pods[uid], c.err
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return st.clone(), nil
		}
		ch := c.updated
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// refresh returns the pod's state as it is now, from a list of that pod
// alone, and keeps it. Without a PodObjectLister it waits for a relist.
func (c *podCache) refresh(ctx context.Context, uid string) (*podState, error) {
	if c.lister == nil {
		return c.get(ctx, uid, c.invalidate())
	}
	c.mu.Lock()
	c.seq++
	seq := c.seq
	c.mu.Unlock()

	sbs, cs, err := c.lister.ListPodObjects(ctx, uid)
	if err != nil {
		return nil, err
	}
	st := groupPods(sbs, cs)[uid]

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp[uid] < seq {
		c.stamp[uid] = seq
		if st == nil {
			delete(c.pods, uid)
		} else {
			c.pods[uid] = st
		}
	}
	// A list begun later may have stored newer state meanwhile: that is
	// the one to act on.
	return c.pods[uid].clone(), nil
}

// all returns every pod's state from the last relist.
func (c *podCache) all() map[string]*podState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*podState, len(c.pods))
	for uid, st := range c.pods {
		out[uid] = st.clone()
	}
	return out
}

// run relists every period, and at once when asked, until ctx ends.
func (c *podCache) run(ctx context.Context) {
	t := c.clock.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-c.kick:
		}
		c.relist(ctx)
	}
}

func (c *podCache) relist(ctx context.Context) {
	c.mu.Lock()
	gen := c.requested
	c.seq++
	seq := c.seq
	c.mu.Unlock()

	var pods map[string]*podState
	var err error
	if c.lister != nil {
		var sbs []*engine.Sandbox
		var cs []*engine.Container
		if sbs, cs, err = c.lister.ListPodObjects(ctx, ""); err == nil {
			pods = groupPods(sbs, cs)
		}
	} else {
		pods, err = listPods(ctx, c.rt)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("relist failed", "err", err)
	}

	c.mu.Lock()
	var changed []string
	if err == nil {
		for uid, st := range pods {
			if c.stamp[uid] > seq {
				continue // refreshed since this list began: that is newer
			}
			if !st.equal(c.pods[uid]) {
				changed = append(changed, uid)
			}
			c.pods[uid] = st
			c.stamp[uid] = seq
		}
		for uid := range c.pods {
			if _, ok := pods[uid]; !ok && c.stamp[uid] <= seq {
				changed = append(changed, uid)
				delete(c.pods, uid)
			}
		}
		for uid, s := range c.stamp {
			if _, ok := c.pods[uid]; !ok && s <= seq {
				delete(c.stamp, uid) // what this list saw gone is gone
			}
		}
	}
	back := c.err != nil && err == nil
	c.err = err
	if gen > c.done {
		c.done = gen
	}
	close(c.updated)
	c.updated = make(chan struct{})
	c.mu.Unlock()

	if back && c.recovered != nil {
		c.log.Info("runtime reachable again: syncing every pod")
		c.recovered()
		return
	}
	if len(changed) > 0 && c.notify != nil {
		c.notify(changed)
	}
}

// listPods groups the runtime's sandboxes and containers by pod.
func listPods(ctx context.Context, rt engine.Runtime) (map[string]*podState, error) {
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	return groupPods(sbs, cs), nil
}

// groupPods sorts sandboxes and containers into pod states by pod UID.
func groupPods(sbs []*engine.Sandbox, cs []*engine.Container) map[string]*podState {
	pods := map[string]*podState{}
	get := func(uid string) *podState {
		st := pods[uid]
		if st == nil {
			st = &podState{}
			pods[uid] = st
		}
		return st
	}
	for _, sb := range sbs {
		st := get(sb.Pod.UID)
		st.Sandboxes = append(st.Sandboxes, sb)
	}
	for _, c := range cs {
		st := get(c.Pod.UID)
		st.Containers = append(st.Containers, c)
	}
	for _, st := range pods {
		st.sort()
	}
	return pods
}

// clone copies the state so callers may keep it while the cache moves on.
// The sandboxes and containers themselves are never modified in place.
func (s *podState) clone() *podState {
	if s == nil {
		return &podState{}
	}
	return &podState{
		Sandboxes:  append([]*engine.Sandbox(nil), s.Sandboxes...),
		Containers: append([]*engine.Container(nil), s.Containers...),
	}
}

// equal reports whether two states show the same objects in the same states.
func (s *podState) equal(o *podState) bool {
	if o == nil || len(s.Sandboxes) != len(o.Sandboxes) || len(s.Containers) != len(o.Containers) {
		return false
	}
	for i, sb := range s.Sandboxes {
		p := o.Sandboxes[i]
		if sb.ID != p.ID || sb.State != p.State || sb.IP != p.IP {
			return false
		}
	}
	for i, c := range s.Containers {
		p := o.Containers[i]
		if c.ID != p.ID || c.State != p.State || c.ExitCode != p.ExitCode {
			return false
		}
	}
	return true
}
