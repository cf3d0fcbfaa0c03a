package runner

import (
	"context"
	"fmt"
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
//
// While the runtime's event stream is connected (the kubelet's evented
// PLEG), events drive the syncs and the periodic relist is a safety net:
// its period doubles after every relist that finds nothing the events did
// not announce, from minPeriod up to maxPeriod. It drops back to
// minPeriod when the stream breaks (and stays there until it is back),
// when it reconnects (and a relist runs at once), after a list error, and
// when a relist finds a pod changed that no event named since the relist
// before. The next relist, a minPeriod later, judges that change: if an
// event has named the pod by then, the event was late, not missed (Docker
// lists a start or a removal, and podrun's own create, which has no event,
// before its event reaches announce), and the period resumes where it
// was; if none has, events are being missed (logged).
type podCache struct {
	rt engine.Runtime
	// lister lists in one call; nil when the runtime cannot.
	lister engine.PodObjectLister
	log    *slog.Logger
	clock  clock.WithTicker
	// minPeriod is the relist period without events; maxPeriod its cap
	// while events flow.
	minPeriod, maxPeriod time.Duration
	// notify is called with the UIDs of pods whose state a relist found
	// changed; recovered (when set) after a relist that succeeded where
	// the one before failed: the runtime is back.
	notify    func(uids []string)
	recovered func()
	// listTimeout bounds a relist (Config.RuntimeRequestTimeout; tests
	// shorten it).
	listTimeout time.Duration

	mu        sync.Mutex
	requested uint64 // generation asked for by invalidate
	done      uint64 // generation of the last completed relist
	pods      map[string]*podState
	// seq numbers lists as they begin; stamp is, by pod, the seq of the
	// list its state (or its absence) comes from.
	seq   uint64
	stamp map[string]uint64
	err   error
	// listedAt is when the last relist that succeeded began.
	listedAt time.Time
	updated  chan struct{} // closed and replaced after every relist
	kick     chan struct{}
	// evented: an event stream is connected, so the relist is a safety
	// net; period is the wait before the next periodic relist.
	evented bool
	period  time.Duration
	// reconnected: the stream reconnected when the list seq reconnectAt
	// was the last begun. Until a relist begun after it has ended, the
	// period does not grow.
	reconnected bool
	reconnectAt uint64
	// announced is, by pod, the seq current when an event last named it;
	// lastRelist the seq of the last relist. A change a relist finds in a
	// pod not announced since the relist before was missed by the events.
	announced  map[string]uint64
	lastRelist uint64
	// suspects are the pods the last relist found changed with no event
	// naming them since suspectSince; resume is the period to go back to
	// if events name them all before the next relist (confirm).
	suspects     []string
	suspectSince uint64
	resume       time.Duration
	// rewait tells run that the period was cut.
	rewait chan struct{}
	// waited, when set, is told every wait run begins (a metric; tests).
	waited func(time.Duration)
	// startView is the node before the first relist, for the pods' name
	// checks (nameconflict.go).
	startView startView
}

func newPodCache(rt engine.Runtime, lister engine.PodObjectLister, log *slog.Logger, clk clock.WithTicker, minPeriod, maxPeriod time.Duration, notify func([]string)) *podCache {
	return &podCache{
		rt: rt, lister: lister, log: log, clock: clk, notify: notify, listTimeout: engine.DefaultRequestTimeout,
		minPeriod: minPeriod, maxPeriod: max(minPeriod, maxPeriod), period: minPeriod,
		pods:      map[string]*podState{},
		stamp:     map[string]uint64{},
		announced: map[string]uint64{},
		updated:   make(chan struct{}),
		kick:      make(chan struct{}, 1),
		rewait:    make(chan struct{}, 1),
	}
}

// announce records that an event named the pod uid, or that podrun made a
// change of it that no event will name (a create, a start that failed).
func (c *podCache) announce(uid string) {
	c.mu.Lock()
	c.announced[uid] = c.seq
	c.mu.Unlock()
}

// eventsConnected says that the runtime's event stream is (again)
// connected. After a reconnection (missed true) events may have been
// missed: the node is relisted at once, and the period starts again from
// minPeriod.
func (c *podCache) eventsConnected(missed bool) {
	c.mu.Lock()
	c.evented = true
	c.period = c.minPeriod
	if missed {
		c.reconnected, c.reconnectAt = true, c.seq
	}
	c.mu.Unlock()
	if missed {
		c.invalidate()
	}
}

// eventsLost says that the event stream broke: until it is back, the
// relist is all that notices a change, every minPeriod.
func (c *podCache) eventsLost() {
	c.mu.Lock()
	c.evented = false
	c.period = c.minPeriod
	c.mu.Unlock()
	select {
	case c.rewait <- struct{}{}:
	default:
	}
}

// currentPeriod is the wait before the next periodic relist.
func (c *podCache) currentPeriod() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.period
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

// countingIPReader counts SandboxIP calls with the runtime's other calls.
type countingIPReader struct {
	sandboxIPReader
	m *Metrics
}

func (c countingIPReader) SandboxIP(ctx context.Context, id string) (string, error) {
	c.m.runtimeCall("SandboxIP")
	return c.sandboxIPReader.SandboxIP(ctx, id)
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

// listAll lists every pod of the node, in one call where the runtime
// can.
func (c *podCache) listAll(ctx context.Context) (map[string]*podState, error) {
	if c.lister == nil {
		return listPods(ctx, c.rt)
	}
	sbs, cs, err := c.lister.ListPodObjects(ctx, "")
	if err != nil {
		return nil, err
	}
	return groupPods(sbs, cs), nil
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

// objects returns every sandbox and container the cache holds, when its
// last relist succeeded and began at most maxAge ago; ok false otherwise.
// What refreshes and events stored since is included.
func (c *podCache) objects(maxAge time.Duration) (sbs []*engine.Sandbox, cs []*engine.Container, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.listedAt.IsZero() || c.clock.Since(c.listedAt) > maxAge {
		return nil, nil, false
	}
	for _, st := range c.pods {
		sbs = append(sbs, st.Sandboxes...)
		cs = append(cs, st.Containers...)
	}
	return sbs, cs, true
}

// run relists every period (see podCache), and at once when asked, until
// ctx ends.
func (c *podCache) run(ctx context.Context) {
	var t clock.Timer
	wait := func() {
		if t != nil {
			t.Stop()
		}
		d := c.currentPeriod()
		t = c.clock.NewTimer(d)
		if c.waited != nil {
			c.waited(d)
		}
	}
	wait()
	defer func() { t.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rewait:
			wait() // the period was cut: wait the new one from now
			continue
		case <-t.C():
		case <-c.kick:
		}
		c.relist(ctx)
		wait()
	}
}

func (c *podCache) relist(ctx context.Context) {
	c.mu.Lock()
	gen := c.requested
	c.seq++
	seq := c.seq
	c.mu.Unlock()
	began := c.clock.Now()

	lctx, cancel := context.WithTimeout(ctx, c.listTimeout)
	pods, err := c.listAll(lctx)
	cancel()
	if err != nil && ctx.Err() == nil && lctx.Err() != nil {
		err = fmt.Errorf("the runtime did not answer a list of the node's pods within %s: %w", c.listTimeout, err)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("relist failed", "err", err)
	}

	c.mu.Lock()
	var changed []string
	if err == nil {
		c.listedAt = began
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
	missed, late := c.confirm()
	suspects := c.unannounced(changed, err)
	if len(suspects) > 0 {
		c.suspects, c.suspectSince = suspects, c.lastRelist
	}
	c.adapt(seq, err, suspects, late)
	c.lastRelist = seq
	back := c.err != nil && err == nil
	c.err = err
	if gen > c.done {
		c.done = gen
	}
	close(c.updated)
	c.updated = make(chan struct{})
	c.mu.Unlock()

	if len(missed) > 0 {
		c.log.Info("relist found changes no event announced, not even by the relist after; the relist period starts again from "+c.minPeriod.String(),
			"pods", len(missed), "pod", missed[0])
	}
	if back && c.recovered != nil {
		c.log.Info("runtime reachable again: syncing every pod")
		c.recovered()
		return
	}
	if len(changed) > 0 && c.notify != nil {
		c.notify(changed)
	}
}

// unannounced returns the pods of changed that no event named since the
// relist before this one began (c.mu held), and forgets what older events
// announced. A relist that failed, or the first one, misses nothing.
func (c *podCache) unannounced(changed []string, err error) []string {
	var missed []string
	if err == nil && c.lastRelist > 0 {
		for _, uid := range changed {
			if at, ok := c.announced[uid]; !ok || at < c.lastRelist {
				missed = append(missed, uid)
			}
		}
	}
	for uid, at := range c.announced {
		if at < c.lastRelist {
			delete(c.announced, uid)
		}
	}
	return missed
}

// confirm judges the pods the relist before found changed with no event
// naming them (c.mu held), whatever this relist found: those an event has
// named since were announced late; it returns the others, and whether
// there were suspects and all were late.
func (c *podCache) confirm() (missed []string, late bool) {
	for _, uid := range c.suspects {
		if at, ok := c.announced[uid]; !ok || at < c.suspectSince {
			missed = append(missed, uid)
		}
	}
	late = len(c.suspects) > 0 && len(missed) == 0
	c.suspects = nil
	return missed, late
}

// adapt sets the period after a relist (c.mu held): doubled, up to
// maxPeriod, while events flow and the relist found nothing unannounced,
// or back to what it was when the last relist's suspects turn out late
// (confirm); else (and until a relist begun after a reconnection ended)
// minPeriod. Suspects confirmed missed need no cut here: the relist that
// found them made it, and this one ran at minPeriod.
func (c *podCache) adapt(seq uint64, err error, suspects []string, late bool) {
	reconnected := c.reconnected
	if reconnected && seq > c.reconnectAt {
		c.reconnected = false
	}
	grown := min(2*c.period, c.maxPeriod)
	if late {
		grown = c.resume
	}
	switch {
	case !c.evented || err != nil || reconnected:
		c.period = c.minPeriod
	case len(suspects) > 0:
		c.period, c.resume = c.minPeriod, grown
	default:
		c.period = grown
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
