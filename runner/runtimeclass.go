package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"

	"github.com/podrun/podrun/engine"
)

// RuntimeClasses maps RuntimeClass names to engine runtimes (Docker's
// HostConfig.Runtime), as a cluster's RuntimeClass objects map them to
// CRI runtime handlers: those of the node's configuration (--runtime-class,
// fixed), those of the cluster's API (SetCluster, in cluster mode) and
// those of the manifest sources (Set). Safe for concurrent use.
type RuntimeClasses struct {
	fixed map[string]string

	mu      sync.RWMutex
	cluster map[string]string
	objects map[string]string
}

// NewRuntimeClasses returns the classes of the node's configuration,
// name -> runtime; the cluster's and the sources' are added with
// SetCluster and Set.
func NewRuntimeClasses(fixed map[string]string) *RuntimeClasses {
	return &RuntimeClasses{fixed: fixed, cluster: map[string]string{}, objects: map[string]string{}}
}

// handlers maps RuntimeClass objects by name to their handlers.
func handlers(objects []*nodev1.RuntimeClass) map[string]string {
	m := make(map[string]string, len(objects))
	for _, o := range objects {
		m[o.Name] = o.Handler
	}
	return m
}

// Set replaces the RuntimeClass objects of the manifest sources.
func (rc *RuntimeClasses) Set(objects []*nodev1.RuntimeClass) {
	m := handlers(objects)
	rc.mu.Lock()
	rc.objects = m
	rc.mu.Unlock()
}

// SetCluster replaces the RuntimeClass objects of the cluster's API.
func (rc *RuntimeClasses) SetCluster(objects []*nodev1.RuntimeClass) {
	m := handlers(objects)
	rc.mu.Lock()
	rc.cluster = m
	rc.mu.Unlock()
}

// Resolve returns the runtime of the RuntimeClass name: "" (the engine's
// default) for no name, as the kubelet's default class. The node's
// configuration wins over the cluster's object of the same name, and that
// over a manifest's: a manifest does not choose the runtime a class
// stands for on this node, and the cluster's classes are the ones its
// other nodes run pods with, as the kubelet knows no other. An unknown
// class is a configError that says how to declare it.
func (rc *RuntimeClasses) Resolve(name *string) (string, error) {
	if name == nil || *name == "" {
		return "", nil
	}
	if rt, ok := rc.fixed[*name]; ok {
		return rt, nil
	}
	rc.mu.RLock()
	rt, ok := rc.cluster[*name]
	if !ok {
		rt, ok = rc.objects[*name]
	}
	rc.mu.RUnlock()
	if ok {
		return rt, nil
	}
	return "", configErrorf("RuntimeClass %q not found: declare it with --runtime-class %s=RUNTIME (a Docker runtime, "+
		"as `docker info` lists them), or with a RuntimeClass object (apiVersion: node.k8s.io/v1, handler: RUNTIME) "+
		"in the manifest sources or, in cluster mode, the cluster", *name, *name)
}

// podRuntime resolves the pod's runtimeClassName to the engine runtime
// its sandbox and containers run with. With check (a sandbox is about to
// be made) it also makes sure the engine has that runtime, where the
// engine can say: a missing one is a configError naming those it has.
func (r *Runner) podRuntime(ctx context.Context, pod *v1.Pod, check bool) (string, error) {
	rt, err := r.cfg.RuntimeClasses.Resolve(pod.Spec.RuntimeClassName)
	if err != nil || rt == "" || !check {
		return rt, err
	}
	lister, ok := r.raw.(engine.RuntimeHandlerLister)
	if !ok {
		return rt, nil
	}
	have, err := lister.RuntimeHandlers(ctx)
	if err != nil {
		return "", fmt.Errorf("list the engine's runtimes: %w", err)
	}
	if !slices.Contains(have, rt) {
		return "", configErrorf("RuntimeClass %q names runtime %q, which the container engine does not have "+
			"(it has: %s): add it to Docker's daemon.json \"runtimes\", or map the class to another",
			*pod.Spec.RuntimeClassName, rt, strings.Join(have, ", "))
	}
	return rt, nil
}
