package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// podCache holds the runtime's state of every pod of this node, refreshed by
// one relist that all pod workers share (the kubelet's PLEG and pod cache):
// a worker that has just acted asks for state newer than its action, and
// however many workers ask at once, one relist answers them all. So the
// number of runtime list calls does not grow with the number of pods.
type podCache struct {
	rt     Runtime
	log    *slog.Logger
	period time.Duration
	// notify is called with the UIDs of pods whose state a relist found
	// changed.
	notify func(uids []string)

	mu        sync.Mutex
	requested uint64 // generation asked for by invalidate
	done      uint64 // generation of the last completed relist
	pods      map[string]*podState
	err       error
	updated   chan struct{} // closed and replaced after every relist
	kick      chan struct{}
}

func newPodCache(rt Runtime, log *slog.Logger, period time.Duration, notify func([]string)) *podCache {
	return &podCache{
		rt: rt, log: log, period: period, notify: notify,
		pods:    map[string]*podState{},
		updated: make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
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
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		c.relist(ctx)
	}
}

func (c *podCache) relist(ctx context.Context) {
	c.mu.Lock()
	gen := c.requested
	c.mu.Unlock()

	pods, err := listPods(ctx, c.rt)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("relist failed", "err", err)
	}

	c.mu.Lock()
	var changed []string
	if err == nil {
		for uid, st := range pods {
			if !st.equal(c.pods[uid]) {
				changed = append(changed, uid)
			}
		}
		for uid := range c.pods {
			if _, ok := pods[uid]; !ok {
				changed = append(changed, uid)
			}
		}
		c.pods = pods
	}
	c.err = err
	if gen > c.done {
		c.done = gen
	}
	close(c.updated)
	c.updated = make(chan struct{})
	c.mu.Unlock()

	if len(changed) > 0 && c.notify != nil {
		c.notify(changed)
	}
}

// listPods groups the runtime's sandboxes and containers by pod.
func listPods(ctx context.Context, rt Runtime) (map[string]*podState, error) {
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := rt.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
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
	return pods, nil
}

// clone copies the state so callers may keep it while the cache moves on.
// The sandboxes and containers themselves are never modified in place.
func (s *podState) clone() *podState {
	if s == nil {
		return &podState{}
	}
	return &podState{
		Sandboxes:  append([]*Sandbox(nil), s.Sandboxes...),
		Containers: append([]*Container(nil), s.Containers...),
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
