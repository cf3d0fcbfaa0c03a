// Package labels holds the labels podrun's engines put on every object
// they make, the same on Docker and on a CRI runtime, so that a restarted
// podrun adopts what it made from the engine alone: identities and
// hashes, nothing large (the specs the hashes were taken of are the
// caller's to keep). It imports nothing of podrun but the contract.
package labels

import (
	"strconv"
	"time"

	"github.com/podrun/podrun/engine"
)

const (
	Node          = "io.podrun.node"
	PodUID        = "io.podrun.pod.uid"
	PodName       = "io.podrun.pod.name"
	PodNamespace  = "io.podrun.pod.namespace"
	ContainerName = "io.podrun.container.name"
	ContainerType = "io.podrun.container.type"
	ContainerHash = "io.podrun.container.hash"
	ResourcesHash = "io.podrun.container.resources-hash"
	// Image is the image as the container's config named it (an engine
	// may report the image's ID instead once the tag has moved).
	Image       = "io.podrun.container.image"
	SandboxHash = "io.podrun.sandbox.hash"
	// PodSource and GracePeriod keep, on the sandbox, where the pod was
	// defined and its termination grace period (a Go duration).
	PodSource   = "io.podrun.pod.source"
	GracePeriod = "io.podrun.pod.grace-period"
	// QOSClass keeps the pod's QoS class on the sandbox.
	QOSClass  = "io.podrun.pod.qos-class"
	SandboxID = "io.podrun.sandbox.id"
	Attempt   = "io.podrun.attempt"
	// PodLabelPrefix prefixes the pod's own labels, copied onto the
	// sandbox for people reading the engine's lists; podrun never reads
	// them.
	PodLabelPrefix = "io.podrun.pod.label."

	// TypeSandbox is the ContainerType of sandboxes; containers carry
	// engine.ContainerTypeInit, engine.ContainerTypeApp or
	// engine.ContainerTypeEphemeral.
	TypeSandbox = "sandbox"
)

// Identity are the labels of every object of pod on node.
func Identity(node string, pod engine.PodRef, attempt int) map[string]string {
	return map[string]string{
		Node:         node,
		PodUID:       pod.UID,
		PodName:      pod.Name,
		PodNamespace: pod.Namespace,
		Attempt:      strconv.Itoa(attempt),
	}
}

// AddSandbox adds to l what a sandbox keeps of cfg for a podrun without
// the manifest: its hash, source, grace period, QoS class and the pod's own
// labels.
func AddSandbox(l map[string]string, cfg *engine.SandboxConfig) {
	l[SandboxHash] = cfg.Hash
	if cfg.Source != "" {
		l[PodSource] = cfg.Source
	}
	// Zero is recorded too: it is a grace period, not its absence.
	l[GracePeriod] = max(cfg.GracePeriod, 0).String()
	if cfg.QOSClass != "" {
		l[QOSClass] = cfg.QOSClass
	}
	for k, v := range cfg.Labels {
		l[PodLabelPrefix+k] = v
	}
}

// Pod is the pod an object's labels name.
func Pod(l map[string]string) engine.PodRef {
	return engine.PodRef{UID: l[PodUID], Name: l[PodName], Namespace: l[PodNamespace]}
}

// AttemptOf is the attempt an object's labels name (0 when none).
func AttemptOf(l map[string]string) int {
	n, _ := strconv.Atoi(l[Attempt])
	return n
}

// GracePeriodOf is the grace period a sandbox's labels keep; nil when they
// keep none (a sandbox made by an older podrun).
func GracePeriodOf(l map[string]string) *time.Duration {
	d, err := time.ParseDuration(l[GracePeriod])
	if err != nil {
		return nil
	}
	return &d
}
