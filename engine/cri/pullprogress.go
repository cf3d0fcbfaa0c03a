package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podrun/podrun/engine"
)

// CRI's PullImage is one unary call that says nothing until the image is
// there. containerd, the runtime CRI users run, serves its own content and
// image services on the same socket; a pull's downloads are ingests in the
// content store of the CRI plugin's namespace, each with its offset and
// total. podrun polls them while a pull runs and reports each layer's bytes
// as Docker's pull stream does; once the pull is done it reports every
// layer of the image from its manifest, so the summary holds even when a
// pull was too fast to see. A runtime without those services (CRI-O)
// gets the start and the end of each pull, no bytes.
//
// An ingest does not say which pull it serves. podrun pulls one image at a
// time unless --serialize-image-pulls=false; with several pulls at once,
// the layers being downloaded are reported to each of them.

// criNamespace is the containerd namespace of the CRI plugin's images.
const criNamespace = "k8s.io"

// DefaultPullProgressInterval is how often a pull's downloads are asked.
const DefaultPullProgressInterval = 500 * time.Millisecond

// maxManifestSize bounds the manifest and index read for a pull's summary.
const maxManifestSize = 4 << 20

// contentStore is what pull progress asks of containerd's content service.
type contentStore interface {
	ListStatuses(ctx context.Context, in *contentapi.ListStatusesRequest, opts ...grpc.CallOption) (*contentapi.ListStatusesResponse, error)
	Read(ctx context.Context, in *contentapi.ReadContentRequest, opts ...grpc.CallOption) (contentapi.Content_ReadClient, error)
}

// imageStore is what pull progress asks of containerd's image service.
type imageStore interface {
	Get(ctx context.Context, in *imagesapi.GetImageRequest, opts ...grpc.CallOption) (*imagesapi.GetImageResponse, error)
}

// pullCallTimeout bounds each call of the progress and the summary: they
// must never hold up a pull that is done.
const pullCallTimeout = 10 * time.Second

// pullWatch reports pulls' progress from containerd's content store.
type pullWatch struct {
	containerd *containerdConn
	report     func(ref string, p engine.PullProgress)
	interval   time.Duration
	log        *slog.Logger
	// unavailable is set once the runtime has refused the services (not
	// containerd): later pulls report their start and end only.
	unavailable atomic.Bool

	mu      sync.Mutex
	content contentStore
	images  imageStore
}

// clients returns containerd's content and image services, on the
// runtime's connection to containerd (dialed on first use).
func (w *pullWatch) clients() (contentStore, imageStore, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.content != nil {
		return w.content, w.images, nil
	}
	conn, err := w.containerd.get()
	if err != nil {
		return nil, nil, err
	}
	w.content, w.images = contentapi.NewContentClient(conn), imagesapi.NewImagesClient(conn)
	return w.content, w.images, nil
}

// pull runs do, the CRI pull of ref, and reports its progress: a first
// message when it starts, the layers' bytes while it runs, each layer and
// the image's status once it is done. existed is the image's ID before the
// pull ("" when there was none): the same ID after it means it was up to
// date, and no layer is reported.
func (w *pullWatch) pull(ctx context.Context, ref, existed string, do func() (*engine.Image, error)) (*engine.Image, error) {
	w.report(ref, engine.PullProgress{Status: "Pulling " + ref})
	nsCtx := inCRINamespace(ctx)
	pollCtx, stopPolling := context.WithCancel(nsCtx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		w.poll(pollCtx, ref)
	}()
	img, err := do()
	stopPolling()
	<-polled
	if err != nil {
		return nil, err
	}
	if existed == img.ID {
		w.report(ref, engine.PullProgress{Status: "Status: Image is up to date for " + ref})
		return img, nil
	}
	for _, l := range w.layers(nsCtx, ref, img.ID) {
		w.report(ref, engine.PullProgress{ID: layerID(string(l.Digest)), Status: "Pull complete", Current: l.Size, Total: l.Size})
	}
	w.report(ref, engine.PullProgress{Status: "Status: Downloaded newer image for " + ref})
	return img, nil
}

// poll reports the layer ingests written to since the pull started (a
// retried pull resumes an older ingest), every interval until ctx ends. A
// runtime without a content service ends the polling, for every later
// pull too.
func (w *pullWatch) poll(ctx context.Context, ref string) {
	if w.unavailable.Load() {
		return
	}
	content, _, err := w.clients()
	if err != nil {
		w.log.Debug("pull progress unavailable", "image", ref, "err", err)
		return
	}
	started := time.Now().Add(-time.Second) // containerd's clock and ours may differ a little
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, pullCallTimeout)
		resp, err := content.ListStatuses(callCtx, &contentapi.ListStatusesRequest{})
		cancel()
		if err != nil {
			if c := status.Code(err); c == codes.Unimplemented || c == codes.PermissionDenied {
				w.unavailable.Store(true)
				w.log.Info("the runtime has no containerd content service: pulls show no progress", "err", err)
				return
			}
			if ctx.Err() == nil {
				w.log.Debug("pull progress", "image", ref, "err", err)
			}
			continue
		}
		for _, s := range resp.GetStatuses() {
			digest, isLayer := strings.CutPrefix(s.GetRef(), "layer-")
			if !isLayer || s.GetUpdatedAt().AsTime().Before(started) {
				continue
			}
			w.report(ref, engine.PullProgress{ID: layerID(digest), Status: "Downloading", Current: s.GetOffset(), Total: s.GetTotal()})
		}
	}
}

// layers are the layers of the image id (as containerd's CRI plugin names
// every image it pulls by its ID too, besides ref) that containerd
// unpacked: those of the manifest whose config is id. None when they
// cannot be read: the summary then holds the layers seen downloading.
func (w *pullWatch) layers(ctx context.Context, ref, id string) []ocispec.Descriptor {
	if w.unavailable.Load() {
		return nil
	}
	content, images, err := w.clients()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pullCallTimeout)
	defer cancel()
	resp, err := images.Get(ctx, &imagesapi.GetImageRequest{Name: id})
	if err != nil || resp.GetImage().GetTarget() == nil {
		w.log.Debug("pull summary: image", "image", ref, "id", id, "err", err)
		return nil
	}
	target := resp.GetImage().GetTarget()
	desc := ocispec.Descriptor{MediaType: target.GetMediaType(), Digest: digest.Digest(target.GetDigest()), Size: target.GetSize()}
	for range 2 { // an index, then its manifest
		var m manifestOrIndex
		if err := readJSON(ctx, content, desc, &m); err != nil {
			w.log.Debug("pull summary: manifest", "image", ref, "err", err)
			return nil
		}
		if len(m.Manifests) == 0 {
			return m.Layers
		}
		var found bool
		if desc, found = w.manifestOf(ctx, content, m.Manifests, id); !found {
			return nil
		}
	}
	return nil
}

// manifestOrIndex is an OCI image manifest or index, or Docker's manifest
// or manifest list: the fields the summary reads of each.
type manifestOrIndex struct {
	Config    ocispec.Descriptor   `json:"config"`
	Manifests []ocispec.Descriptor `json:"manifests"`
	Layers    []ocispec.Descriptor `json:"layers"`
}

// manifestOf is the manifest of an index whose config is the image id:
// the one containerd unpacked (the platform alone does not say which,
// with variants). Only manifests of Linux, or of no platform, are read.
func (w *pullWatch) manifestOf(ctx context.Context, content contentStore, list []ocispec.Descriptor, id string) (ocispec.Descriptor, bool) {
	for _, d := range list {
		if d.Platform != nil && d.Platform.OS != "linux" {
			continue
		}
		var m manifestOrIndex
		if err := readJSON(ctx, content, d, &m); err != nil {
			continue // another platform's, not fetched
		}
		if string(m.Config.Digest) == id {
			return d, true
		}
	}
	return ocispec.Descriptor{}, false
}

// readJSON reads the blob desc names from the content store and decodes
// it, refusing one larger than maxManifestSize.
func readJSON(ctx context.Context, content contentStore, desc ocispec.Descriptor, into any) error {
	if desc.Size <= 0 || desc.Size > maxManifestSize {
		return fmt.Errorf("blob %s: size %d out of range", desc.Digest, desc.Size)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on every return
	stream, err := content.Read(ctx, &contentapi.ReadContentRequest{Digest: string(desc.Digest)})
	if err != nil {
		return fmt.Errorf("read %s: %w", desc.Digest, err)
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", desc.Digest, err)
		}
		data = append(data, chunk.GetData()...)
		if int64(len(data)) > desc.Size {
			return fmt.Errorf("blob %s: longer than its %d bytes", desc.Digest, desc.Size)
		}
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("blob %s: %w", desc.Digest, err)
	}
	return nil
}

// layerID is a layer as Docker's pull stream names it: the first 12 hex
// digits of its digest.
func layerID(digest string) string {
	_, hex, found := strings.Cut(digest, ":")
	if !found {
		hex = digest
	}
	return hex[:min(12, len(hex))]
}
