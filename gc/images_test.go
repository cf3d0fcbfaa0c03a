package gc

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
)

func imageIDs(imgs []*engine.Image) []string {
	var out []string
	for _, img := range imgs {
		out = append(out, img.ID)
	}
	return out
}

func TestSelectImages(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	img := func(id string, size int64, created time.Time, labels ...string) *engine.Image {
		i := &engine.Image{ID: id, Size: size, CreatedAt: created, RepoTags: []string{id + ":1"}}
		if len(labels) == 2 {
			i.Labels = map[string]string{labels[0]: labels[1]}
		}
		return i
	}
	images := []*engine.Image{
		img("old-unused", 10, ago(100*time.Hour)),
		img("used-long-ago", 10, ago(time.Minute)), // made lately, used long ago
		img("used-lately", 10, ago(200*time.Hour)),
		img("never-used", 10, ago(50*time.Hour)),
		img("in-use", 100, ago(300*time.Hour)),
		img("pinned", 100, ago(300*time.Hour)),
		img("infra", 100, ago(300*time.Hour), InfraImageLabel, "true"),
		img("young", 100, ago(300*time.Hour)),
	}
	seen := map[string]time.Time{}
	for _, i := range images {
		seen[i.ID] = ago(time.Hour)
	}
	seen["young"] = ago(time.Minute)
	in := ImageInput{
		Images: images,
		InUse:  map[string]bool{"in-use": true},
		Pinned: map[string]bool{"pinned": true},
		// 1000 bytes, 100 free: 90 % used.
		Fs:        engine.FsInfo{CapacityBytes: 1000, AvailableBytes: 100},
		LastUsed:  map[string]time.Time{"used-long-ago": ago(150 * time.Hour), "used-lately": ago(time.Hour)},
		FirstSeen: seen,
		Now:       now,
	}
	p := ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

	// Under the high threshold: nothing.
	below := in
	below.Fs.AvailableBytes = 160 // 84 %
	if plan := SelectImages(below, p); len(plan.Remove) != 0 || plan.BytesToFree != 0 || plan.UsedPercent != 84 {
		t.Errorf("below the high threshold: %+v", plan)
	}

	// 90 % used, to get under 78 %: 120 bytes to free, more than there is.
	// Least recently used first, an image never used counting from when it
	// was made; never one in use, pinned, labelled infra or young.
	p.LowThresholdPercent = 78
	plan := SelectImages(in, p)
	sameIDs(t, "removed", imageIDs(plan.Remove), []string{"used-long-ago", "old-unused", "never-used", "used-lately"})
	if plan.BytesToFree != 120 || plan.BytesFreed != 40 || !plan.Short || plan.UsedPercent != 90 {
		t.Errorf("plan: to free %d, freed %d, short %v, used %d%%; want 120, 40, true, 90",
			plan.BytesToFree, plan.BytesFreed, plan.Short, plan.UsedPercent)
	}

	// Only as many as it takes: 82 % used, to 80 %: 20 bytes.
	in.Fs.AvailableBytes = 180
	plan = SelectImages(in, ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 80, MinAge: 2 * time.Minute})
	sameIDs(t, "removed for 20 bytes", imageIDs(plan.Remove), []string{"used-long-ago", "old-unused"})
	if plan.Short || plan.BytesToFree != 20 {
		t.Errorf("plan for 20 bytes: %+v", plan)
	}

	// 100 disables image GC.
	in.Fs.AvailableBytes = 0
	if plan := SelectImages(in, ImagePolicy{HighThresholdPercent: 100, LowThresholdPercent: 0}); len(plan.Remove) != 0 {
		t.Errorf("with a high threshold of 100: %v", imageIDs(plan.Remove))
	}
}

func TestImagePolicyValidate(t *testing.T) {
	for _, p := range []ImagePolicy{
		{HighThresholdPercent: 101, LowThresholdPercent: 80},
		{HighThresholdPercent: 85, LowThresholdPercent: -1},
		{HighThresholdPercent: 70, LowThresholdPercent: 80},
		{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: valid", p)
		}
	}
	if err := DefaultImagePolicy.Validate(); err != nil {
		t.Error(err)
	}
}

func TestImageGCCollect(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	f := w.f
	mb := int64(1 << 20)
	made := w.now.Add(-100 * time.Hour)
	f.PutImage(engine.Image{ID: "sha256:old", RepoTags: []string{"old:1", "old:2"}, Size: 10 * mb, CreatedAt: made})
	f.PutImage(engine.Image{ID: "sha256:older", RepoTags: []string{"older:1"}, Size: 10 * mb, CreatedAt: made.Add(-time.Hour)})
	f.PutImage(engine.Image{ID: "sha256:built-infra", RepoTags: []string{"podrun/pause:abc"}, Size: 10 * mb, CreatedAt: made,
		Labels: map[string]string{InfraImageLabel: "true"}})
	f.PutImage(engine.Image{ID: "sha256:other-node", RepoTags: []string{"other:1"}, Size: 10 * mb, CreatedAt: made})
	// testImage is used by this node's pod, testInfra by its sandbox and
	// named as the infra image, other:1 by another node's container.
	p := w.pod("a")
	p.run("app", 0, true)
	o := (&world{t: t, f: f.ForNode("other"), now: w.now}).pod("x")
	if _, err := o.w.f.CreateContainer(ctx, o.sb, o.cfg, &engine.ContainerConfig{Name: "c", Image: "other:1"}); err != nil {
		t.Fatal(err)
	}
	// 100 MiB, 5 free: 95 % used.
	f.SetImageFs(100*uint64(mb), 5*uint64(mb))

	var logs bytes.Buffer
	clk := testingclock.NewFakeClock(w.now)
	g := &ImageGC{
		Runtime: f, Images: f, InfraImage: testInfra,
		Policy: ImagePolicy{HighThresholdPercent: 90, LowThresholdPercent: 80, MinAge: time.Minute},
		Log:    slog.New(slog.NewTextHandler(&logs, nil)),
		Clock:  clk,
	}

	// First sight: every image is too young.
	plan, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 0 {
		t.Fatalf("first pass removes %v: images first seen now are too young", imageIDs(plan.Remove))
	}
	if !strings.Contains(logs.String(), "cannot free enough") {
		t.Errorf("no warning that it cannot free enough:\n%s", logs.String())
	}

	clk.Step(2 * time.Minute)
	logs.Reset()
	plan, err = g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// To 80 %: 15 MiB to free; the least recently used (older, then old).
	sameIDs(t, "removed", imageIDs(plan.Remove), []string{"sha256:older", "sha256:old"})
	for _, ref := range []string{"older:1", "old:1", "old:2"} {
		if _, err := f.ImageStatus(ctx, ref); err == nil {
			t.Errorf("%s is still there", ref)
		}
	}
	for _, ref := range []string{testImage, testInfra, "podrun/pause:abc", "other:1"} {
		if _, err := f.ImageStatus(ctx, ref); err != nil {
			t.Errorf("%s (in use or infra) is gone: %v", ref, err)
		}
	}
	if fs, _ := f.ImageFsInfo(ctx); fs.UsedPercent() >= 90 {
		t.Errorf("after the pass: %d%% used", fs.UsedPercent())
	}
	if strings.Contains(logs.String(), "cannot free enough") {
		t.Errorf("a warning although enough was freed:\n%s", logs.String())
	}
}

func TestImageUsageObserve(t *testing.T) {
	now := time.Now()
	u := NewImageUsage()
	u.ObserveContainers([]*engine.Container{
		{ImageID: "a", State: engine.StateRunning, StartedAt: now.Add(-time.Hour)},
		{ImageID: "b", State: engine.StateExited, StartedAt: now.Add(-3 * time.Hour), FinishedAt: now.Add(-2 * time.Hour)},
		{ImageID: "b", State: engine.StateExited, FinishedAt: now.Add(-4 * time.Hour)},
		{ImageID: "c", State: engine.StateCreated, CreatedAt: now.Add(-5 * time.Hour)},
	}, now)
	u.Used("d", now.Add(-time.Minute))
	imgs := []*engine.Image{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	last, first := u.seen(imgs, nil, now)
	want := map[string]time.Time{"a": now, "b": now.Add(-2 * time.Hour), "c": now.Add(-5 * time.Hour), "d": now.Add(-time.Minute)}
	for id, w := range want {
		if !last[id].Equal(w) {
			t.Errorf("last used of %s = %v, want %v", id, last[id], w)
		}
		if !first[id].Equal(now) {
			t.Errorf("first seen of %s = %v, want now", id, first[id])
		}
	}
	// An image gone is forgotten.
	last, _ = u.seen(imgs[:1], nil, now)
	if _, ok := last["b"]; ok {
		t.Errorf("a removed image is still remembered")
	}
}

var _ engine.ImageService = (*enginetest.Fake)(nil)

// TestImageGCKeepsImageVolumeImages: an image that only a pod's image
// volume uses (no container names it) is kept, as one in use.
func TestImageGCKeepsImageVolumeImages(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	f := w.f
	mb := int64(1 << 20)
	made := w.now.Add(-100 * time.Hour)
	f.PutImage(engine.Image{ID: "sha256:old", RepoTags: []string{"old:1"}, Size: 10 * mb, CreatedAt: made})
	f.PutImage(engine.Image{ID: "sha256:volume", RepoTags: []string{"volume:1"}, Size: 10 * mb, CreatedAt: made.Add(-time.Hour)})
	f.SetImageFs(100*uint64(mb), 5*uint64(mb))
	clk := testingclock.NewFakeClock(w.now)
	g := &ImageGC{
		Runtime: f, Images: f,
		Policy: ImagePolicy{HighThresholdPercent: 90, LowThresholdPercent: 80, MinAge: time.Minute},
		InUse:  func() map[string]bool { return map[string]bool{"sha256:volume": true} },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:  clk,
	}
	if _, err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)
	plan, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := imageIDs(plan.Remove); len(ids) == 0 || slices.Contains(ids, "sha256:volume") {
		t.Errorf("removed %v: want the least recently used but the image volume's", ids)
	}
	if _, err := f.ImageStatus(ctx, "volume:1"); err != nil {
		t.Errorf("the image volume's image was removed: %v", err)
	}
}
