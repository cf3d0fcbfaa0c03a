package cmd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/gc"
)

// gcOptions are the garbage collection flags of `watch`, as the kubelet's.
type gcOptions struct {
	MinContainerTTL      time.Duration
	MaxDeadPerContainer  int
	MaxDeadContainers    int
	ImageGCHighThreshold int
	ImageGCLowThreshold  int
	ImageMinimumGCAge    time.Duration
	ContainerGCPeriod    time.Duration
	ImageGCPeriod        time.Duration
}

// addGCFlags adds the garbage collection flags to fs.
func addGCFlags(fs *pflag.FlagSet, o *gcOptions) {
	fs.DurationVar(&o.MinContainerTTL, "minimum-container-ttl-duration", 0,
		"minimum age of a dead container before it is garbage collected")
	fs.IntVar(&o.MaxDeadPerContainer, "maximum-dead-containers-per-container", 1,
		"dead containers kept per container of a pod (the newest is always kept: lastState, logs --previous); <0: no limit")
	fs.IntVar(&o.MaxDeadContainers, "maximum-dead-containers", -1, "dead containers kept in all; <0: no limit")
	fs.IntVar(&o.ImageGCHighThreshold, "image-gc-high-threshold", 85,
		"disk usage (percent) of Docker's filesystem at which unused images are removed; 100 disables image GC")
	fs.IntVar(&o.ImageGCLowThreshold, "image-gc-low-threshold", 80, "disk usage (percent) image GC frees down to")
	fs.DurationVar(&o.ImageMinimumGCAge, "image-minimum-gc-age", 2*time.Minute,
		"minimum time since podrun first saw an unused image before it may be removed")
	fs.DurationVar(&o.ContainerGCPeriod, "container-gc-period", time.Minute, "how often dead containers are collected")
	fs.DurationVar(&o.ImageGCPeriod, "image-gc-period", 5*time.Minute, "how often image disk usage is checked")
}

func (o *gcOptions) containerPolicy() gc.ContainerPolicy {
	return gc.ContainerPolicy{MinAge: o.MinContainerTTL, MaxPerContainer: o.MaxDeadPerContainer, MaxContainers: o.MaxDeadContainers}
}

func (o *gcOptions) imagePolicy() gc.ImagePolicy {
	return gc.ImagePolicy{HighThresholdPercent: o.ImageGCHighThreshold, LowThresholdPercent: o.ImageGCLowThreshold,
		MinAge: o.ImageMinimumGCAge}
}

// validate checks the flags; a bad one is exit code 2.
func (o *gcOptions) validate() error {
	if err := o.imagePolicy().Validate(); err != nil {
		return badInput(err)
	}
	switch {
	case o.MinContainerTTL < 0:
		return badInputf("--minimum-container-ttl-duration must not be negative")
	case o.ContainerGCPeriod <= 0:
		return badInputf("--container-gc-period must be positive")
	case o.ImageGCPeriod <= 0:
		return badInputf("--image-gc-period must be positive")
	}
	return nil
}

// gcSources is what garbage collection needs to know of the sources: when
// they have all delivered, the pods they define now (by UID), and whether a
// source's pods are kept although it defines none now (it has been failing
// since podrun started).
type gcSources struct {
	Ready   func() bool
	Desired func() map[string]bool
	Keep    func(source string) bool
	// ImagesInUse are the images pods use other than through containers
	// (the runner's image volumes); nil: none.
	ImagesInUse func() map[string]bool
	// Evicted are the pods evicted, whose dead containers all go; nil:
	// none.
	Evicted func() map[string]bool
	// Recent is the node's objects as the runner last listed them
	// (gc.ContainerGC.Recent); nil: the collector lists them itself.
	Recent func(maxAge time.Duration) ([]*engine.Sandbox, []*engine.Container, bool)
}

// gcEngine is what garbage collection needs of the engine: its
// containers and its images.
type gcEngine interface {
	engine.Runtime
	engine.ImageService
}

// startGC runs the container collector (every ContainerGCPeriod) and the
// image collector (every ImageGCPeriod) on rt until ctx ends, and returns a
// function that waits for them to stop. infraImage is the infra image in
// use (never removed); usage is the record of image use shared with the
// runner (runner.ImageOptions.Used; nil: one of its own).
//
// reclaim runs both collectors once, now: what eviction tries under disk
// pressure before it evicts a pod, as the kubelet reclaims node-level
// resources first.
func startGC(ctx context.Context, o *gcOptions, rt gcEngine, infraImage string, usage *gc.ImageUsage,
	src gcSources, log *slog.Logger) (wait func(), reclaim func(context.Context)) {
	if usage == nil {
		usage = gc.NewImageUsage()
	}
	cgc := &gc.ContainerGC{
		Runtime: rt, Policy: o.containerPolicy(), SourcesReady: src.Ready, Desired: src.Desired,
		KeepSource: src.Keep, Evicted: src.Evicted, Recent: src.Recent, Usage: usage, Log: log,
	}
	igc := &gc.ImageGC{Runtime: rt, Images: rt, Policy: o.imagePolicy(), InfraImage: infraImage, Usage: usage,
		InUse: src.ImagesInUse, Log: log}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		cgc.Run(ctx, o.ContainerGCPeriod)
	}()
	go func() {
		defer wg.Done()
		if o.ImageGCHighThreshold >= 100 {
			return
		}
		igc.Run(ctx, o.ImageGCPeriod)
	}()
	reclaim = func(ctx context.Context) {
		if _, err := cgc.Collect(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reclaim: container gc", "err", err)
		}
		if o.ImageGCHighThreshold < 100 {
			if _, err := igc.Collect(ctx); err != nil && ctx.Err() == nil {
				log.Warn("reclaim: image gc", "err", err)
			}
		}
	}
	return wg.Wait, reclaim
}
