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

// InfraImageLabel marks infra images (podrun's own pause images carry it);
// image GC never removes them.
const InfraImageLabel = "io.podrun.infra"

// ImagePolicy says when and how far image GC frees space, as the kubelet's
// flags of the same names.
type ImagePolicy struct {
	// HighThresholdPercent: at or above this disk usage, GC runs
	// (--image-gc-high-threshold, 85). 100 disables it.
	HighThresholdPercent int
	// LowThresholdPercent: GC frees until usage would be below this
	// (--image-gc-low-threshold, 80).
	LowThresholdPercent int
	// MinAge: an image podrun first saw less than this ago is never
	// removed (--image-minimum-gc-age, 2 min).
	MinAge time.Duration
}

// DefaultImagePolicy is the kubelet's default.
var DefaultImagePolicy = ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// Validate checks the thresholds as the kubelet does.
func (p ImagePolicy) Validate() error {
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return fmt.Errorf("image GC high threshold %d: must be within 0-100", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return fmt.Errorf("image GC low threshold %d: must be within 0-100", p.LowThresholdPercent)
	case p.LowThresholdPercent > p.HighThresholdPercent:
		return fmt.Errorf("image GC low threshold %d is above the high threshold %d", p.LowThresholdPercent, p.HighThresholdPercent)
	case p.MinAge < 0:
		return fmt.Errorf("image minimum GC age %s: must not be negative", p.MinAge)
	}
	return nil
}

// ImageInput is what one image GC pass looks at.
type ImageInput struct {
	Images []*engine.Image
	// InUse are the IDs of images any container of the engine uses.
	InUse map[string]bool
	// Pinned are the IDs of images never to remove (the infra image).
	Pinned map[string]bool
	Fs     engine.FsInfo
	// LastUsed is when podrun last saw each image (by ID) used; an image
	// not in it counts as last used when it was made.
	LastUsed map[string]time.Time
	// FirstSeen is when podrun first saw each image (by ID); one not in it
	// is seen now.
	FirstSeen map[string]time.Time
	Now       time.Time
}

// ImagePlan is what one pass removes, and why.
type ImagePlan struct {
	// UsedPercent is the filesystem's usage before the pass.
	UsedPercent int
	// BytesToFree is what must go to get below the low threshold (0 when
	// usage is below the high one).
	BytesToFree int64
	// Remove are the images to remove, least recently used first; their
	// sizes add up to at least BytesToFree unless Short.
	Remove []*engine.Image
	// BytesFreed is the sum of their sizes (layers shared with other
	// images free less).
	BytesFreed int64
	// Short says that removing every image that may go does not free
	// BytesToFree.
	Short bool
}

// SelectImages decides what an image GC pass removes, as the kubelet's image
// GC does: nothing while the filesystem's usage is below the high
// threshold; otherwise, unused images least recently used first (an image
// never seen used counts from when it was made) until their sizes free
// enough to get below the low threshold. Never an image in use by any
// container, a pinned one, one labelled io.podrun.infra=true, or one
// first seen less than MinAge ago.
func SelectImages(in ImageInput, p ImagePolicy) ImagePlan {
	plan := ImagePlan{UsedPercent: in.Fs.UsedPercent()}
	if in.Fs.CapacityBytes == 0 || p.HighThresholdPercent >= 100 || plan.UsedPercent < p.HighThresholdPercent {
		return plan
	}
	target := int64(in.Fs.CapacityBytes) * int64(100-p.LowThresholdPercent) / 100
	plan.BytesToFree = target - int64(in.Fs.AvailableBytes)
	if plan.BytesToFree <= 0 {
		plan.BytesToFree = 0
		return plan
	}
	lastUsed := func(img *engine.Image) time.Time {
		if t, ok := in.LastUsed[img.ID]; ok {
			return t
		}
		return img.CreatedAt
	}
	var candidates []*engine.Image
	for _, img := range in.Images {
		if in.InUse[img.ID] || in.Pinned[img.ID] || img.Labels[InfraImageLabel] == "true" {
			continue
		}
		if seen, ok := in.FirstSeen[img.ID]; !ok || in.Now.Sub(seen) < p.MinAge {
			continue
		}
		candidates = append(candidates, img)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := lastUsed(candidates[i]), lastUsed(candidates[j])
		if !a.Equal(b) {
			return a.Before(b)
		}
		return candidates[i].ID < candidates[j].ID
	})
	for _, img := range candidates {
		if plan.BytesFreed >= plan.BytesToFree {
			break
		}
		plan.Remove = append(plan.Remove, img)
		plan.BytesFreed += img.Size
	}
	plan.Short = plan.BytesFreed < plan.BytesToFree
	return plan
}

// ImageUsage is podrun's memory of when images were first seen and last
// used, by image ID. Safe for concurrent use.
type ImageUsage struct {
	mu        sync.Mutex
	lastUsed  map[string]time.Time
	firstSeen map[string]time.Time
}

// NewImageUsage returns an empty record.
func NewImageUsage() *ImageUsage {
	return &ImageUsage{lastUsed: map[string]time.Time{}, firstSeen: map[string]time.Time{}}
}

// Used records that a container was started from image id at t (later
// times win).
func (u *ImageUsage) Used(id string, t time.Time) {
	if id == "" {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if t.After(u.lastUsed[id]) {
		u.lastUsed[id] = t
	}
}

// ObserveContainers records the images of containers: a running one uses its
// image now, a dead one last did when it finished (or started).
func (u *ImageUsage) ObserveContainers(cs []*engine.Container, now time.Time) {
	for _, c := range cs {
		t := c.FinishedAt
		switch {
		case c.State == engine.StateRunning:
			t = now
		case t.IsZero():
			t = c.StartedAt
		}
		if t.IsZero() {
			t = c.CreatedAt
		}
		u.Used(c.ImageID, t)
	}
}

// seen records the images listed at now, forgets the ones gone, and returns
// copies of both maps.
func (u *ImageUsage) seen(imgs []*engine.Image, inUse map[string]bool, now time.Time) (lastUsed, firstSeen map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	present := map[string]bool{}
	for _, img := range imgs {
		present[img.ID] = true
		if _, ok := u.firstSeen[img.ID]; !ok {
			u.firstSeen[img.ID] = now
		}
		if inUse[img.ID] {
			u.lastUsed[img.ID] = now
		}
	}
	for id := range u.firstSeen {
		if !present[id] {
			delete(u.firstSeen, id)
			delete(u.lastUsed, id)
		}
	}
	lastUsed = make(map[string]time.Time, len(u.lastUsed))
	for k, v := range u.lastUsed {
		lastUsed[k] = v
	}
	firstSeen = make(map[string]time.Time, len(u.firstSeen))
	for k, v := range u.firstSeen {
		firstSeen[k] = v
	}
	return lastUsed, firstSeen
}

// ImageGC removes unused images when the disk that holds them fills up. Run
// it with Run (every five minutes, as the kubelet) or call Collect.
type ImageGC struct {
	Runtime engine.Runtime
	Images  engine.ImageService
	Policy  ImagePolicy
	// InfraImage is the configured infra image reference: whatever image it
	// names is never removed (nor is any labelled io.podrun.infra=true).
	InfraImage string
	// Usage is shared with ContainerGC (and the runner, when it records
	// the images it starts containers from). nil: a record of its own.
	Usage *ImageUsage
	// InUse, when set, returns the IDs of more images in use: those whose
	// filesystems pods' image volumes mount (a copy the runner made, which
	// no container of the engine names). They are never removed.
	InUse func() map[string]bool
	Log   *slog.Logger
	Clock clock.WithTicker
}

// Collect runs one pass and returns its plan. It logs a warning when it
// cannot free enough to get below the low threshold.
func (g *ImageGC) Collect(ctx context.Context) (ImagePlan, error) {
	if g.Usage == nil {
		g.Usage = NewImageUsage()
	}
	clk, log := g.clock(), g.log()
	fs, err := g.Images.ImageFsInfo(ctx)
	if err != nil {
		return ImagePlan{}, fmt.Errorf("image gc: %w", err)
	}
	imgs, err := g.Images.ListImages(ctx)
	if err != nil {
		return ImagePlan{}, fmt.Errorf("image gc: %w", err)
	}
	inUse, err := g.Images.ImagesInUse(ctx)
	if err != nil {
		return ImagePlan{}, fmt.Errorf("image gc: %w", err)
	}
	if g.InUse != nil {
		if inUse == nil {
			inUse = map[string]bool{}
		}
		for id := range g.InUse() {
			inUse[id] = true
		}
	}
	now := clk.Now()
	// This node's containers say when their images were last used.
	if cs, err := g.Runtime.ListContainers(ctx); err == nil {
		g.Usage.ObserveContainers(cs, now)
	}
	lastUsed, firstSeen := g.Usage.seen(imgs, inUse, now)
	pinned := map[string]bool{}
	if g.InfraImage != "" {
		if img, err := g.Runtime.ImageStatus(ctx, g.InfraImage); err == nil {
			pinned[img.ID] = true
		} else if !errors.Is(err, engine.ErrNotFound) {
			return ImagePlan{}, fmt.Errorf("image gc: infra image: %w", err)
		}
	}
	plan := SelectImages(ImageInput{
		Images: imgs, InUse: inUse, Pinned: pinned, Fs: *fs, LastUsed: lastUsed, FirstSeen: firstSeen, Now: now,
	}, g.Policy)
	if plan.BytesToFree == 0 {
		log.Debug("image gc: nothing to do", "used_percent", plan.UsedPercent, "path", fs.Path)
		return plan, nil
	}
	log.Info("image gc: disk usage above the high threshold", "path", fs.Path, "used_percent", plan.UsedPercent,
		"high_threshold", g.Policy.HighThresholdPercent, "bytes_to_free", plan.BytesToFree, "images", len(plan.Remove))
	var errs []error
	var freed int64
	for _, img := range plan.Remove {
		err := g.Images.RemoveImage(ctx, img.ID)
		switch {
		case errors.Is(err, engine.ErrImageInUse):
			log.Info("image gc: image came into use; kept", "image", shortImageID(img.ID), "tags", img.RepoTags)
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		freed += img.Size
		log.Info("image gc: removed image", "image", shortImageID(img.ID), "tags", img.RepoTags, "size", img.Size)
	}
	if freed < plan.BytesToFree {
		log.Warn("image gc: cannot free enough disk space: the other images are in use, too young, or the infra image",
			"path", fs.Path, "used_percent", plan.UsedPercent, "low_threshold", g.Policy.LowThresholdPercent,
			"bytes_to_free", plan.BytesToFree, "bytes_freed", freed)
	}
	return plan, errors.Join(errs...)
}

// Run collects at once and then every period until ctx ends.
func (g *ImageGC) Run(ctx context.Context, period time.Duration) {
	every(ctx, g.clock(), period, func() {
		if _, err := g.Collect(ctx); err != nil && ctx.Err() == nil {
			g.log().Warn("image gc failed", "err", err)
		}
	})
}

func (g *ImageGC) clock() clock.WithTicker {
	if g.Clock == nil {
		return clock.RealClock{}
	}
	return g.Clock
}

func (g *ImageGC) log() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

func shortImageID(id string) string {
	if len(id) > 7 && id[:7] == "sha256:" {
		id = id[7:]
	}
	return shortID(id)
}
