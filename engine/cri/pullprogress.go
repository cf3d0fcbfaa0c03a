package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
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

// pullWatch reports pulls' progress from containerd's content store.
type pullWatch struct {
	endpoint string
	report   func(ref string, p engine.PullProgress)
	interval time.Duration
	log      *slog.Logger

	dialOnce sync.Once
	conn     *grpc.ClientConn
	content  contentapi.ContentClient
	images   imagesapi.ImagesClient
	dialErr  error
}

// clients dials containerd's services on the runtime's socket, once.
func (w *pullWatch) clients() (contentapi.ContentClient, imagesapi.ImagesClient, error) {
	w.dialOnce.Do(func() {
		w.conn, w.dialErr = grpc.NewClient(w.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if w.dialErr == nil {
			w.content = contentapi.NewContentClient(w.conn)
			w.images = imagesapi.NewImagesClient(w.conn)
		}
	})
	return w.content, w.images, w.dialErr
}

func (w *pullWatch) close() error {
	if w.conn == nil {
		return nil
	}
	return w.conn.Close()
}

// pull runs do, the CRI pull of ref, and reports its progress: a first
// message when it starts, the layers' bytes while it runs, each layer and
// the image's status once it is done. existed is the image's ID before the
// pull ("" when there was none): the same ID after it means it was up to
// date.
func (w *pullWatch) pull(ctx context.Context, ref, existed string, do func() (*engine.Image, error)) (*engine.Image, error) {
	w.report(ref, engine.PullProgress{Status: "Pulling " + ref})
	nsCtx := metadata.AppendToOutgoingContext(ctx, "containerd-namespace", criNamespace)
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		w.poll(nsCtx, ref, stop)
	}()
	img, err := do()
	close(stop)
	<-polled
	if err != nil {
		return nil, err
	}
	for _, l := range w.layers(nsCtx, ref) {
		w.report(ref, engine.PullProgress{ID: layerID(string(l.Digest)), Status: "Pull complete", Current: l.Size, Total: l.Size})
	}
	st := "Status: Downloaded newer image for " + ref
	if existed != "" && existed == img.ID {
		st = "Status: Image is up to date for " + ref
	}
	w.report(ref, engine.PullProgress{Status: st})
	return img, nil
}

// poll reports the layer ingests that started since the pull did, every
// interval until stop is closed. A runtime without a content service, or
// one that refuses, ends the polling (logged once).
func (w *pullWatch) poll(ctx context.Context, ref string, stop <-chan struct{}) {
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
		case <-stop:
			return
		case <-tick.C:
		}
		resp, err := content.ListStatuses(ctx, &contentapi.ListStatusesRequest{})
		if err != nil {
			if c := status.Code(err); c == codes.Unimplemented || c == codes.PermissionDenied || c == codes.Unavailable {
				w.log.Debug("pull progress unavailable", "image", ref, "err", err)
				return
			}
			continue
		}
		for _, s := range resp.GetStatuses() {
			digest, isLayer := strings.CutPrefix(s.GetRef(), "layer-")
			if !isLayer || s.GetStartedAt().AsTime().Before(started) {
				continue
			}
			w.report(ref, engine.PullProgress{ID: layerID(digest), Status: "Downloading", Current: s.GetOffset(), Total: s.GetTotal()})
		}
	}
}

// layers are the layers of the image ref names in containerd, for this
// machine's platform; none when they cannot be read (the summary then
// holds the layers seen downloading).
func (w *pullWatch) layers(ctx context.Context, ref string) []ocispec.Descriptor {
	content, images, err := w.clients()
	if err != nil {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil
	}
	resp, err := images.Get(ctx, &imagesapi.GetImageRequest{Name: reference.TagNameOnly(named).String()})
	if err != nil || resp.GetImage().GetTarget() == nil {
		return nil
	}
	target := resp.GetImage().GetTarget()
	desc := ocispec.Descriptor{MediaType: target.GetMediaType(), Digest: digest.Digest(target.GetDigest()), Size: target.GetSize()}
	for range 2 { // an index, then its manifest
		var m struct {
			MediaType string               `json:"mediaType"`
			Manifests []ocispec.Descriptor `json:"manifests"`
			Layers    []ocispec.Descriptor `json:"layers"`
		}
		if err := readJSON(ctx, content, desc, &m); err != nil {
			w.log.Debug("pull summary: read manifest", "image", ref, "err", err)
			return nil
		}
		if len(m.Manifests) == 0 {
			return m.Layers
		}
		desc = platformManifest(m.Manifests)
	}
	return nil
}

// platformManifest is the manifest of an index for this machine (linux
// and its architecture), else the first.
func platformManifest(list []ocispec.Descriptor) ocispec.Descriptor {
	for _, d := range list {
		if p := d.Platform; p != nil && p.OS == "linux" && p.Architecture == runtime.GOARCH {
			return d
		}
	}
	return list[0]
}

// readJSON reads the blob desc names from the content store and decodes
// it, refusing one larger than maxManifestSize.
func readJSON(ctx context.Context, content contentapi.ContentClient, desc ocispec.Descriptor, into any) error {
	if desc.Size <= 0 || desc.Size > maxManifestSize {
		return fmt.Errorf("blob %s: size %d out of range", desc.Digest, desc.Size)
	}
	stream, err := content.Read(ctx, &contentapi.ReadContentRequest{Digest: string(desc.Digest)})
	if err != nil {
		return err
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		data = append(data, chunk.GetData()...)
		if int64(len(data)) > desc.Size {
			return fmt.Errorf("blob %s: longer than its %d bytes", desc.Digest, desc.Size)
		}
	}
	return json.Unmarshal(data, into)
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
