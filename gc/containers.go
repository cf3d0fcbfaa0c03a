// Package gc removes what podrun no longer needs, as the kubelet's garbage
// collectors do: dead containers and sandboxes (ContainerGC, every minute)
// and unused images when the disk that holds them fills up (ImageGC, every
// five minutes). What to remove is decided by pure functions
// (SelectContainers, SelectImages) over what the runtime reports, so that
// the policy is tested without an engine; the collectors only list, select
// and remove.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
)

// ContainerPolicy bounds the dead containers kept, as the kubelet's flags of
// the same names.
type ContainerPolicy struct {
	// MinAge: a dead container younger than this (since its creation) is
	// never removed (--minimum-container-ttl-duration, 0).
	MinAge time.Duration
	// MaxPerContainer is how many dead containers each container of a pod
	// keeps (--maximum-dead-containers-per-container, 1); below 0, no limit.
	// The newest dead one is always kept, whatever the number says.
	MaxPerContainer int
	// MaxContainers is how many dead containers are kept in all
	// (--maximum-dead-containers, -1); below 0, no limit.
	MaxContainers int
}

// DefaultContainerPolicy is the kubelet's default.
var DefaultContainerPolicy = ContainerPolicy{MinAge: 0, MaxPerContainer: 1, MaxContainers: -1}

// ContainerInput is what one container GC pass looks at.
type ContainerInput struct {
	// Containers and Sandboxes are the node's, as the runtime lists them.
	Containers []*engine.Container
	Sandboxes  []*engine.Sandbox
	// PodExists reports whether a pod (by UID) is still wanted. nil means
	// that is not known yet (the sources have not all delivered): then every
	// pod is taken to exist.
	PodExists func(uid string) bool
	// Evicted reports whether a pod (by UID) was evicted: its dead
	// containers and sandboxes all go, as the kubelet removes the content
	// of evicted pods. nil: none is.
	Evicted func(uid string) bool
	Now     time.Time
}

// ContainerPlan is what one pass removes: containers in that order (those
// of pods that no longer exist first, then the oldest first), then
// sandboxes.
type ContainerPlan struct {
	Containers []*engine.Container
	Sandboxes  []*engine.Sandbox
}

// unitKey is an "evict unit": one container of one pod, all its attempts.
type unitKey struct{ pod, name string }

// SelectContainers decides what a container GC pass removes, as the
// kubelet's container GC does, with podrun's guarantees on top:
//
//   - only dead containers (not running: exited, created, unknown) at least
//     MinAge old are candidates; a running container is never chosen;
//   - every dead container of a pod that no longer exists goes (only when
//     PodExists is known), and of a pod evicted (Evicted): the status of
//     an evicted pod is its eviction, not its containers';
//   - of an existing pod, each container keeps its MaxPerContainer newest
//     dead ones, and never loses the newest dead one: it is the container's
//     lastState and what `logs --previous` shows, and, for an init
//     container, the record that it succeeded;
//   - then, over MaxContainers in all, every container is cut to an equal
//     share (at least one), and then the oldest go, the protected ones
//     excepted;
//   - a sandbox goes when it is not running, no container (left) is in it,
//     and its pod no longer exists, was evicted, or it is not the pod's
//     newest sandbox.
func SelectContainers(in ContainerInput, p ContainerPolicy) ContainerPlan {
	// The newest dead container of each unit, over all of them (young
	// ones included): it is never removed while its pod exists.
	newestDead := map[unitKey]*engine.Container{}
	for _, c := range in.Containers {
		if c.State == engine.StateRunning {
			continue
		}
		k := unitKey{c.Pod.UID, c.Name}
		if n := newestDead[k]; n == nil || newer(c, n) {
			newestDead[k] = c
		}
	}
	gone := func(uid string) bool {
		return (in.PodExists != nil && !in.PodExists(uid)) || (in.Evicted != nil && in.Evicted(uid))
	}

	units := map[unitKey][]*engine.Container{}
	var plan ContainerPlan
	removed := map[string]bool{}
	var goneDead []*engine.Container
	for _, c := range in.Containers {
		if c.State == engine.StateRunning || c.Pod.UID == "" || in.Now.Sub(c.CreatedAt) < p.MinAge {
			continue
		}
		if gone(c.Pod.UID) {
			goneDead = append(goneDead, c)
			continue
		}
		k := unitKey{c.Pod.UID, c.Name}
		units[k] = append(units[k], c)
	}
	sort.SliceStable(goneDead, func(i, j int) bool { return older(goneDead[i], goneDead[j]) })
	for _, c := range goneDead {
		plan.Containers = append(plan.Containers, c)
		removed[c.ID] = true
	}

	// Each unit newest first; the protected container is kept out of the
	// counts of what may go, but counts as kept.
	for k, cs := range units {
		sort.SliceStable(cs, func(i, j int) bool { return newer(cs[i], cs[j]) })
		units[k] = cs
	}
	var others []*engine.Container
	cut := func(keep int) {
		for k, cs := range units {
			n := max(keep, 1)
			if len(cs) <= n {
				continue
			}
			var kept []*engine.Container
			for i, c := range cs {
				if i < n || c == newestDead[k] {
					kept = append(kept, c)
					continue
				}
				others = append(others, c)
			}
			units[k] = kept
		}
	}
	if p.MaxPerContainer >= 0 {
		cut(p.MaxPerContainer)
	}
	if p.MaxContainers >= 0 {
		if total(units) > p.MaxContainers && len(units) > 0 {
			cut(p.MaxContainers / len(units))
		}
		if excess := total(units) - p.MaxContainers; excess > 0 {
			var flat []*engine.Container
			for k, cs := range units {
				for _, c := range cs {
					if c != newestDead[k] {
						flat = append(flat, c)
					}
				}
			}
			sort.SliceStable(flat, func(i, j int) bool { return older(flat[i], flat[j]) })
			others = append(others, flat[:min(excess, len(flat))]...)
		}
	}
	sort.SliceStable(others, func(i, j int) bool { return older(others[i], others[j]) })
	for _, c := range others {
		plan.Containers = append(plan.Containers, c)
		removed[c.ID] = true
	}

	// Sandboxes: what is left in each, and each pod's newest.
	occupied := map[string]bool{}
	for _, c := range in.Containers {
		if !removed[c.ID] {
			occupied[c.SandboxID] = true
		}
	}
	newestSandbox := map[string]*engine.Sandbox{}
	for _, sb := range in.Sandboxes {
		if n := newestSandbox[sb.Pod.UID]; n == nil || newerSandbox(sb, n) {
			newestSandbox[sb.Pod.UID] = sb
		}
	}
	for _, sb := range in.Sandboxes {
		if sb.State == engine.StateRunning || occupied[sb.ID] || sb.Pod.UID == "" {
			continue
		}
		if gone(sb.Pod.UID) || newestSandbox[sb.Pod.UID] != sb {
			plan.Sandboxes = append(plan.Sandboxes, sb)
		}
	}
	sort.SliceStable(plan.Sandboxes, func(i, j int) bool { return newerSandbox(plan.Sandboxes[j], plan.Sandboxes[i]) })
	return plan
}

func total(units map[unitKey][]*engine.Container) int {
	n := 0
	for _, cs := range units {
		n += len(cs)
	}
	return n
}

// newer orders a pod's containers as the runner does: by attempt, then by
// creation.
func newer(a, b *engine.Container) bool {
	if a.Attempt != b.Attempt {
		return a.Attempt > b.Attempt
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// older orders containers of any pods by creation, oldest first.
func older(a, b *engine.Container) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	if a.Attempt != b.Attempt {
		return a.Attempt < b.Attempt
	}
	return a.ID < b.ID
}

func newerSandbox(a, b *engine.Sandbox) bool {
	if a.Attempt != b.Attempt {
		return a.Attempt > b.Attempt
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// ContainerGC removes dead containers and sandboxes of one node under a
// policy. Run it with Run (every minute, as the kubelet) or call Collect.
type ContainerGC struct {
	Runtime engine.Runtime
	Policy  ContainerPolicy
	// SourcesReady reports whether every source has delivered once; until
	// then no pod is taken to be gone. nil: never (only the per-container
	// and global limits apply).
	SourcesReady func() bool
	// Desired returns the UIDs of the pods the sources define now.
	Desired func() map[string]bool
	// KeepSource reports whether the pods of a source (as their sandbox
	// records it) are kept although no source defines them now (their
	// source has been failing since podrun started). nil: keep none.
	KeepSource func(source string) bool
	// Evicted returns the UIDs of the pods evicted, whose dead
	// containers and sandboxes all go (ContainerInput.Evicted). nil: none.
	Evicted func() map[string]bool
	// Usage, when set, records the images the containers seen use, before
	// any is removed, for image GC's least-recently-used order.
	Usage *ImageUsage
	// Recent, when set, returns the node's sandboxes and containers as a
	// list of the node begun at most maxAge ago saw them, kept current
	// since (the runner's pod cache: its relist and the runtime's
	// events); ok false when there is none that recent. The periodic pass
	// (Run) takes them rather than listing the node itself: on an idle
	// node that list is most of what the collector costs. It does so only
	// while every object in them is running or exited: podrun never
	// starts an exited container or sandbox again, so what had exited
	// then has exited now or is gone (removing it again is not an error),
	// and what was made since is not listed, so it stays. An object only
	// created, or of unknown state, may have been started since (podrun
	// adopts and starts what it made before it died), and then the newest
	// dead container of its unit would be another: with one in the list
	// the pass lists the node anew. Collect, what eviction calls under
	// disk pressure, always lists anew.
	Recent func(maxAge time.Duration) (sbs []*engine.Sandbox, cs []*engine.Container, ok bool)
	Log    *slog.Logger
	Clock  clock.WithTicker

	mu sync.Mutex
	// failures counts, per ID, the passes in a row that failed to remove
	// it (for the log); removeFailures all failed removals.
	failures       map[string]int
	removeFailures int
}

// Collect runs one pass and returns how many containers and sandboxes it
// removed. A removal that fails is logged (one line each, with the
// container's Docker state when the runtime tells it) and counted in the
// error; the others go on, except the removal of a sandbox whose container
// could not be removed (it is not empty). What could not be removed is
// still dead, so the next pass selects it again: that is its retry.
func (g *ContainerGC) Collect(ctx context.Context) (int, error) {
	cs, sbs, err := g.list(ctx)
	if err != nil {
		return 0, fmt.Errorf("container gc: %w", err)
	}
	return g.collect(ctx, cs, sbs)
}

// collect is one pass over the node's containers cs and sandboxes sbs.
func (g *ContainerGC) collect(ctx context.Context, cs []*engine.Container, sbs []*engine.Sandbox) (int, error) {
	clk, log := g.clock(), g.log()
	now := clk.Now()
	if g.Usage != nil {
		g.Usage.ObserveContainers(cs, now)
	}
	in := ContainerInput{Containers: cs, Sandboxes: sbs, Now: now}
	// Taken after the lists: a pod added meanwhile has nothing listed.
	if g.SourcesReady != nil && g.SourcesReady() && g.Desired != nil {
		desired := g.Desired()
		kept := map[string]bool{}
		if g.KeepSource != nil {
			for _, sb := range sbs {
				if g.KeepSource(sb.Source) {
					kept[sb.Pod.UID] = true
				}
			}
		}
		in.PodExists = func(uid string) bool { return desired[uid] || kept[uid] }
	}
	if g.Evicted != nil {
		// Only dead containers are candidates: those of a pod evicted
		// while it was listed are still running, and go next pass.
		evicted := g.Evicted()
		in.Evicted = func(uid string) bool { return evicted[uid] }
	}
	plan := SelectContainers(in, g.Policy)
	g.forgetFailures(cs, sbs)
	var errs removalErrors
	removedCtrs, removedSbs := 0, 0
	stillIn := map[string]bool{} // sandboxes holding a container that could not be removed
	for _, c := range plan.Containers {
		if err := g.Runtime.RemoveContainer(ctx, c.ID); err != nil {
			if ctx.Err() != nil {
				return removedCtrs + removedSbs, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
			g.failed(log, "container", c.ID, c.Pod, c.Name, c.Attempt, c.State, err)
			stillIn[c.SandboxID] = true
			continue
		}
		g.succeeded(c.ID)
		removedCtrs++
		log.Debug("removed dead container", "pod", c.Pod.Namespace+"/"+c.Pod.Name, "container", c.Name,
			"attempt", c.Attempt, "id", shortID(c.ID))
	}
	for _, sb := range plan.Sandboxes {
		if stillIn[sb.ID] {
			// A container of it could not be removed: it is not empty
			// yet. Both are tried again next period.
			continue
		}
		if err := g.Runtime.RemoveSandbox(ctx, sb.ID); err != nil {
			if ctx.Err() != nil {
				return removedCtrs + removedSbs, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.ID, err))
			g.failed(log, "sandbox", sb.ID, sb.Pod, "", sb.Attempt, sb.State, err)
			continue
		}
		g.succeeded(sb.ID)
		removedSbs++
		log.Debug("removed dead sandbox", "pod", sb.Pod.Namespace+"/"+sb.Pod.Name, "attempt", sb.Attempt, "id", shortID(sb.ID))
	}
	if removedCtrs+removedSbs > 0 || len(errs) > 0 {
		log.Info("container gc", "removed_containers", removedCtrs, "removed_sandboxes", removedSbs, "failed", len(errs))
	}
	if len(errs) == 0 {
		return removedCtrs + removedSbs, nil
	}
	return removedCtrs + removedSbs, errs
}

// RemoveFailures is how many removals have failed since the collector was
// made (each retry that fails counts again).
func (g *ContainerGC) RemoveFailures() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.removeFailures
}

// failed logs, as one line, that the object id (a "container" or a
// "sandbox") could not be removed, and counts it. The line carries Docker's
// state of it and whether a retry may succeed when the runtime's error tells
// them (engine/docker's RemovalError: a container Docker left "dead" after a
// dockerd restart, its overlay still mounted), and how many passes in a row
// have failed to remove it.
func (g *ContainerGC) failed(log *slog.Logger, what, id string, pod engine.PodRef, name string, attempt int, state engine.State, err error) {
	g.mu.Lock()
	if g.failures == nil {
		g.failures = map[string]int{}
	}
	g.failures[id]++
	g.removeFailures++
	inRow := g.failures[id]
	g.mu.Unlock()
	attrs := []any{"what", what, "pod", pod.Namespace + "/" + pod.Name}
	if name != "" {
		attrs = append(attrs, "container", name)
	}
	attrs = append(attrs, "attempt", attempt, "id", shortID(id), "state", string(state))
	var rt interface{ DockerState() string }
	if errors.As(err, &rt) && rt.DockerState() != "" {
		attrs = append(attrs, "runtime_state", rt.DockerState())
	}
	var re interface{ Retryable() bool }
	if errors.As(err, &re) {
		attrs = append(attrs, "retryable", re.Retryable())
	}
	attrs = append(attrs, "failures", inRow, "err", err)
	log.Warn("container gc: could not remove; trying again next period", attrs...)
}

// succeeded drops id's failure count.
func (g *ContainerGC) succeeded(id string) {
	g.mu.Lock()
	delete(g.failures, id)
	g.mu.Unlock()
}

// forgetFailures drops the failure counts of objects no longer listed.
func (g *ContainerGC) forgetFailures(cs []*engine.Container, sbs []*engine.Sandbox) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.failures) == 0 {
		return
	}
	listed := make(map[string]bool, len(cs)+len(sbs))
	for _, c := range cs {
		listed[c.ID] = true
	}
	for _, sb := range sbs {
		listed[sb.ID] = true
	}
	for id := range g.failures {
		if !listed[id] {
			delete(g.failures, id)
		}
	}
}

// list returns the node's containers and sandboxes: from one call where
// the runtime can list both at once (on Docker one list of the node's
// objects rather than two; an idle node pays it every period), else from
// two, the containers first.
func (g *ContainerGC) list(ctx context.Context) ([]*engine.Container, []*engine.Sandbox, error) {
	if l, ok := g.Runtime.(engine.PodObjectLister); ok {
		sbs, cs, err := l.ListPodObjects(ctx, "")
		return cs, sbs, err
	}
	cs, err := g.Runtime.ListContainers(ctx)
	if err != nil {
		return nil, nil, err
	}
	sbs, err := g.Runtime.ListSandboxes(ctx)
	return cs, sbs, err
}

// removalErrors are the removals of one pass that failed, each already
// logged by Collect.
type removalErrors []error

func (e removalErrors) Error() string   { return errors.Join(e...).Error() }
func (e removalErrors) Unwrap() []error { return e }

// Run collects at once and then every period until ctx ends (see
// periodicCollect).
func (g *ContainerGC) Run(ctx context.Context, period time.Duration) {
	every(ctx, g.clock(), period, func() {
		_, err := g.periodicCollect(ctx, period)
		var logged removalErrors
		if err != nil && ctx.Err() == nil && !errors.As(err, &logged) {
			g.log().Warn("container gc failed", "err", err)
		}
	})
}

// periodicCollect is one pass of Run: on what Recent returns when it has a
// list begun at most two periods ago (the runner's relist, at its longest
// a minute apart, stays under that at the default period), else on a list
// of its own.
func (g *ContainerGC) periodicCollect(ctx context.Context, period time.Duration) (int, error) {
	if g.Recent != nil {
		if sbs, cs, ok := g.Recent(2 * period); ok && settled(sbs, cs) {
			return g.collect(ctx, cs, sbs)
		}
	}
	return g.Collect(ctx)
}

// settled reports whether every object listed is running or exited, the
// states a list that is not fresh may be acted on in (see Recent).
func settled(sbs []*engine.Sandbox, cs []*engine.Container) bool {
	ok := func(s engine.State) bool { return s == engine.StateRunning || s == engine.StateExited }
	for _, sb := range sbs {
		if !ok(sb.State) {
			return false
		}
	}
	for _, c := range cs {
		if !ok(c.State) {
			return false
		}
	}
	return true
}

func (g *ContainerGC) clock() clock.WithTicker {
	if g.Clock == nil {
		return clock.RealClock{}
	}
	return g.Clock
}

func (g *ContainerGC) log() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

// every calls f now and then every period until ctx ends.
func every(ctx context.Context, clk clock.WithTicker, period time.Duration, f func()) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
