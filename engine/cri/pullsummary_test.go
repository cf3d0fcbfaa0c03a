package cri

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podrun/podrun/engine"
)

// fakeStores are containerd's content and image services over blobs in
// memory; listErr is what ListStatuses answers.
type fakeStores struct {
	blobs   map[digest.Digest][]byte
	images  map[string]*types.Descriptor
	listErr error
	lists   int
}

func (f *fakeStores) add(v any) ocispec.Descriptor {
	b, _ := json.Marshal(v)
	d := digest.FromBytes(b)
	f.blobs[d] = b
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

func (f *fakeStores) ListStatuses(context.Context, *contentapi.ListStatusesRequest, ...grpc.CallOption) (*contentapi.ListStatusesResponse, error) {
	f.lists++
	return &contentapi.ListStatusesResponse{}, f.listErr
}

func (f *fakeStores) Read(_ context.Context, in *contentapi.ReadContentRequest, _ ...grpc.CallOption) (contentapi.Content_ReadClient, error) {
	b, ok := f.blobs[digest.Digest(in.Digest)]
	if !ok {
		return nil, status.Error(codes.NotFound, "content digest "+in.Digest+": not found")
	}
	return &fakeReadStream{data: b}, nil
}

func (f *fakeStores) Get(_ context.Context, in *imagesapi.GetImageRequest, _ ...grpc.CallOption) (*imagesapi.GetImageResponse, error) {
	target, ok := f.images[in.Name]
	if !ok {
		return nil, status.Error(codes.NotFound, "image "+in.Name+": not found")
	}
	return &imagesapi.GetImageResponse{Image: &imagesapi.Image{Name: in.Name, Target: target}}, nil
}

type fakeReadStream struct {
	grpc.ClientStream
	data []byte
	sent bool
}

func (s *fakeReadStream) Recv() (*contentapi.ReadContentResponse, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return &contentapi.ReadContentResponse{Data: s.data}, nil
}

func newFakeWatch(f *fakeStores, report func(string, engine.PullProgress)) *pullWatch {
	return &pullWatch{report: report, interval: time.Millisecond, log: slog.New(slog.DiscardHandler), content: f, images: f}
}

// TestPullSummaryOfAnIndex: of a multi-platform index, the layers reported
// are those of the manifest containerd unpacked (its config is the image's
// ID), not of another variant of the same OS and architecture, whose blobs
// were never fetched; a platform-less entry is read too.
func TestPullSummaryOfAnIndex(t *testing.T) {
	f := &fakeStores{blobs: map[digest.Digest][]byte{}, images: map[string]*types.Descriptor{}}
	layerA := ocispec.Descriptor{Digest: "sha256:aaaaaaaaaaaaaaaaaaaa", Size: 1000}
	layerB := ocispec.Descriptor{Digest: "sha256:bbbbbbbbbbbbbbbbbbbb", Size: 2000}
	config := f.add(map[string]any{"os": "linux"})
	fetched := f.add(map[string]any{"schemaVersion": 2, "config": config, "layers": []ocispec.Descriptor{layerA, layerB}})
	notFetched := ocispec.Descriptor{Digest: "sha256:cccc", Size: 300} // absent from the store
	index := f.add(map[string]any{"schemaVersion": 2, "manifests": []ocispec.Descriptor{
		{Digest: "sha256:dddd", Size: 300, Platform: &ocispec.Platform{OS: "windows", Architecture: "amd64"}},
		withPlatform(notFetched, &ocispec.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}),
		withPlatform(fetched, &ocispec.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}),
	}})
	id := string(config.Digest)
	f.images[id] = &types.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: string(index.Digest), Size: index.Size}

	var got []engine.PullProgress
	w := newFakeWatch(f, func(_ string, p engine.PullProgress) { got = append(got, p) })
	img, err := w.pull(context.Background(), "x:1", "", func() (*engine.Image, error) { return &engine.Image{ID: id}, nil })
	if err != nil || img.ID != id {
		t.Fatalf("pull: %v, %v", img, err)
	}
	want := []engine.PullProgress{
		{Status: "Pulling x:1"},
		{ID: "aaaaaaaaaaaa", Status: "Pull complete", Current: 1000, Total: 1000},
		{ID: "bbbbbbbbbbbb", Status: "Pull complete", Current: 2000, Total: 2000},
		{Status: "Status: Downloaded newer image for x:1"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages:\n%+v\nwant:\n%+v", got, want)
	}

	// The same ID before and after: up to date, no layer pulled.
	got = nil
	if _, err := w.pull(context.Background(), "x:1", id, func() (*engine.Image, error) { return &engine.Image{ID: id}, nil }); err != nil {
		t.Fatal(err)
	}
	want = []engine.PullProgress{{Status: "Pulling x:1"}, {Status: "Status: Image is up to date for x:1"}}
	if !slices.Equal(got, want) {
		t.Errorf("up to date:\n%+v\nwant:\n%+v", got, want)
	}
}

// TestPullProgressWithoutContentService: a runtime that refuses the
// content service (not containerd) is asked once; its pulls report their
// start and end, and a failed pull no end.
func TestPullProgressWithoutContentService(t *testing.T) {
	f := &fakeStores{blobs: map[digest.Digest][]byte{}, images: map[string]*types.Descriptor{},
		listErr: status.Error(codes.Unimplemented, "unknown service containerd.services.content.v1.Content")}
	var got []engine.PullProgress
	w := newFakeWatch(f, func(_ string, p engine.PullProgress) { got = append(got, p) })
	pull := func() (*engine.Image, error) {
		// Long enough for the poller to ask, and learn, before it ends.
		deadline := time.Now().Add(time.Minute)
		for !w.unavailable.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return &engine.Image{ID: "sha256:1"}, nil
	}
	if _, err := w.pull(context.Background(), "y:1", "", pull); err != nil {
		t.Fatal(err)
	}
	if !w.unavailable.Load() || f.lists != 1 {
		t.Fatalf("unavailable %v after %d lists, want it learnt from one", w.unavailable.Load(), f.lists)
	}
	if _, err := w.pull(context.Background(), "y:1", "", func() (*engine.Image, error) { return &engine.Image{ID: "sha256:1"}, nil }); err != nil {
		t.Fatal(err)
	}
	if f.lists != 1 {
		t.Errorf("%d lists: the content service was asked again", f.lists)
	}
	want := []engine.PullProgress{{Status: "Pulling y:1"}, {Status: "Status: Downloaded newer image for y:1"}}
	if !slices.Equal(got, append(want, want...)) {
		t.Errorf("messages:\n%+v", got)
	}
	got = nil
	if _, err := w.pull(context.Background(), "y:1", "", func() (*engine.Image, error) { return nil, io.ErrUnexpectedEOF }); err == nil {
		t.Fatal("a failed pull returned no error")
	}
	if !slices.Equal(got, want[:1]) {
		t.Errorf("failed pull: %+v, want its start only", got)
	}
}

func withPlatform(d ocispec.Descriptor, p *ocispec.Platform) ocispec.Descriptor {
	d.Platform = p
	return d
}
