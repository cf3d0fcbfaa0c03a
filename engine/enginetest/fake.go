package enginetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/podrun/podrun/engine"
)

// FakeScript is the first word of a command line the fake acts out (see
// Fake). Any other command "runs" until it is stopped, removed, or made to
// exit with Fake.Exit.
const FakeScript = "fake"

// Fake is an in-memory engine.Runtime (also a ResourceUpdater, a LogReader,
// an ImageService and a PodObjectLister) for the sync core's unit tests. It passes the conformance suite,
// so it behaves as engine/docker does where the sync core can tell: images
// must be present to create from, names are unique per (pod UID, container,
// attempt) across nodes, a started container whose sandbox is not running
// fails to start, a sandbox whose host port another running sandbox
// publishes fails to start (and is reported exited), and so on.
//
// It has no processes. A started container runs until Exit, StopContainer or
// RemoveContainer ends it, unless its command line (Command then Args) is a
// script, "fake" followed by:
//
//	exit N        exits at once with N (N may be $VAR, from the env)
//	echo WORDS    writes WORDS and a newline to stdout, exits 0
//	oom           is killed at once for memory: exit 137, OOMKilled
//	start-fails   fails to start: StartContainer errs, exit 127
//	ignore-term   ignores the stop signal: StopContainer kills it after
//	              grace (FinishedAt = time of the stop + grace), exit 137
//	exit-on-term  runs; exits 0 on the stop signal (a program that
//	              shuts down cleanly)
//	run           the default: runs; exits 143 on the stop signal
//
// Exec and ExecStream act out the same scripts' "exit N" and "echo WORDS"
// (ExecStream also "echo-stderr WORDS" and "cat"); any other command exits
// 0 with no output, unless SetExecHandler says otherwise.
// Events reports start, die, oom and destroy as Docker does.
//
// Test hooks: Exit and OOMKill end a running container; FailNext makes the
// next call of a method fail; Calls counts calls per method, CallOrder
// lists them; SetClock sets the time the fake stamps; AddImage, PutImage,
// SetImageFs and SetPullError set up images (the image filesystem frees an
// image's size when it is removed); SetExecHandler replaces Exec; CutEvents
// breaks the subscribers' event streams (a Lost event, then nothing) until
// Resync reconnects them with a Resync event.
//
// All methods are safe for concurrent use. Views of one fake for other nodes
// (ForNode) share its objects, images, clock, hooks and counters, as several
// podruns share one Docker.
type Fake struct {
	node string
	s    *fakeStore
}

var (
	_ engine.Runtime              = (*Fake)(nil)
	_ engine.ResourceUpdater      = (*Fake)(nil)
	_ engine.LogReader            = (*Fake)(nil)
	_ engine.Execer               = (*Fake)(nil)
	_ engine.ExecStreamer         = (*Fake)(nil)
	_ engine.EventSource          = (*Fake)(nil)
	_ engine.ImageService         = (*Fake)(nil)
	_ engine.PodObjectLister      = (*Fake)(nil)
	_ engine.PodSummaryLister     = (*Fake)(nil)
	_ engine.RuntimeHandlerLister = (*Fake)(nil)

	_ engine.ImageFilesystemExporter = (*Fake)(nil)
	_ engine.ImageMounter            = (*Fake)(nil)
)

type fakeStore struct {
	mu        sync.Mutex
	clock     func() time.Time
	seq       int
	ips       int
	sandboxes map[string]*fakeSandbox
	ctrs      map[string]*fakeContainer
	names     map[string]string        // identity key -> ID
	images    map[string]*engine.Image // by reference; refs of one image share it
	imageFs   engine.FsInfo
	runtimes  []string // as Docker's: "runc" unless SetRuntimeHandlers
	pullErrs  map[string]error
	failNext  map[string][]error
	calls     map[string]int
	order     []string // methods called, in order
	exec      func(id string, cmd []string) (int, []byte, error)
	subs      map[*fakeSub]bool
	stats     map[string]engine.ContainerStats
	disk      map[string]engine.DiskUsage
	// imageFiles are the tar streams SetImageFilesystem gave, by image ID.
	imageFiles map[string][]byte
	// imageMounts is MountsImages' answer (SetImageMounts).
	imageMounts bool
}

// fakeSub is one Events subscriber: a queue its goroutine delivers from.
type fakeSub struct {
	node string
	mu   sync.Mutex
	q    []engine.Event
	wake chan struct{}
	// cut: the stream is broken (CutEvents); events are dropped.
	cut bool
}

type fakeSandbox struct {
	node    string
	key     string
	cfg     engine.SandboxConfig
	sb      engine.Sandbox
	ip      string
	imageID string
}

type fakeContainer struct {
	node      string
	key       string
	sandboxID string
	cfg       engine.ContainerConfig
	c         engine.Container
	logs      []logLine
	done      chan struct{} // closed when a run ends; nil when not running
}

type logLine struct {
	at     time.Time
	stderr bool
	text   string // with its newline
}

// NewFake returns an empty fake for node nodeName, on the real clock.
func NewFake(nodeName string) *Fake {
	return &Fake{node: nodeName, s: &fakeStore{
		clock:     time.Now,
		sandboxes: map[string]*fakeSandbox{},
		ctrs:      map[string]*fakeContainer{},
		names:     map[string]string{},
		images:    map[string]*engine.Image{},
		imageFs:   engine.FsInfo{Path: "/fake/images", CapacityBytes: 100 << 30, AvailableBytes: 60 << 30},
		runtimes:  []string{"runc"},
		pullErrs:  map[string]error{},
		failNext:  map[string][]error{},
		calls:     map[string]int{},
		subs:      map[*fakeSub]bool{},

		imageFiles: map[string][]byte{},
	}}
}

// SetRuntimeHandlers sets the runtimes the engine has ("runc" alone by
// default, as Docker's): RunSandbox fails for any other.
func (f *Fake) SetRuntimeHandlers(names ...string) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.runtimes = slices.Sorted(slices.Values(names))
}

// RuntimeHandlers returns the runtimes the engine has.
func (f *Fake) RuntimeHandlers(ctx context.Context) ([]string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("RuntimeHandlers"); err != nil {
		return nil, err
	}
	return slices.Clone(f.s.runtimes), nil
}

// ForNode returns a view of the same fake engine for another node.
func (f *Fake) ForNode(nodeName string) *Fake { return &Fake{node: nodeName, s: f.s} }

// NodeName is the node this view works for.
func (f *Fake) NodeName() string { return f.node }

// SetClock sets the clock the fake stamps times with (time.Now by default).
func (f *Fake) SetClock(now func() time.Time) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.clock = now
}

// AddImage makes ref a local image (1 MiB, made now, its ID a hash of ref)
// and returns it.
func (f *Fake) AddImage(ref string) *engine.Image {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.addImage(ref)
}

func (s *fakeStore) addImage(ref string) *engine.Image {
	if img, ok := s.images[ref]; ok {
		return img
	}
	sum := sha256.Sum256([]byte(ref))
	img := &engine.Image{ID: "sha256:" + hex.EncodeToString(sum[:]), RepoTags: []string{ref}, Size: 1 << 20, CreatedAt: s.clock()}
	s.putImage(img)
	return img
}

// PutImage makes img a local image, under each of its RepoTags (under its ID
// alone when it has none), replacing what those references named. Its size
// is taken from the image filesystem's free space.
func (f *Fake) PutImage(img engine.Image) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	cp := img
	cp.RepoTags = append([]string(nil), img.RepoTags...)
	f.s.putImage(&cp)
}

func (s *fakeStore) putImage(img *engine.Image) {
	if s.imageByID(img.ID) == nil {
		s.imageFs.AvailableBytes -= min(uint64(max(img.Size, 0)), s.imageFs.AvailableBytes)
	}
	refs := img.RepoTags
	if len(refs) == 0 {
		refs = []string{img.ID}
	}
	for _, ref := range refs {
		s.images[ref] = img
	}
}

func (s *fakeStore) imageByID(id string) *engine.Image {
	for _, img := range s.images {
		if img.ID == id {
			return img
		}
	}
	return nil
}

// lookupImage finds an image by reference or ID.
func (s *fakeStore) lookupImage(ref string) *engine.Image {
	if img, ok := s.images[ref]; ok {
		return img
	}
	return s.imageByID(ref)
}

// SetImageFs sets the size and free space of the image filesystem
// (ImageFsInfo); removing an image frees its size, adding one takes it.
func (f *Fake) SetImageFs(capacity, available uint64) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.imageFs.CapacityBytes, f.s.imageFs.AvailableBytes = capacity, available
}

// ListImages returns every image of the fake engine, once each.
func (f *Fake) ListImages(ctx context.Context) ([]*engine.Image, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ListImages"); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*engine.Image
	for _, img := range f.s.images {
		if seen[img.ID] {
			continue
		}
		seen[img.ID] = true
		cp := *img
		cp.RepoTags = nil
		for ref, other := range f.s.images {
			if other.ID == img.ID && ref != img.ID {
				cp.RepoTags = append(cp.RepoTags, ref)
			}
		}
		sort.Strings(cp.RepoTags)
		out = append(out, &cp)
	}
	return out, nil
}

// RemoveImage removes an image (by ID or reference) with all its
// references, unless a container of any node uses it.
func (f *Fake) RemoveImage(ctx context.Context, id string) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("RemoveImage"); err != nil {
		return err
	}
	img := f.s.lookupImage(id)
	if img == nil {
		return nil
	}
	if f.s.imagesInUse()[img.ID] {
		return fmt.Errorf("remove image %s: %w", id, engine.ErrImageInUse)
	}
	for ref, other := range f.s.images {
		if other.ID == img.ID {
			delete(f.s.images, ref)
		}
	}
	f.s.imageFs.AvailableBytes = min(f.s.imageFs.AvailableBytes+uint64(max(img.Size, 0)), f.s.imageFs.CapacityBytes)
	return nil
}

// ImagesInUse returns the images of every container and sandbox of the fake
// engine, of any node.
func (f *Fake) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ImagesInUse"); err != nil {
		return nil, err
	}
	return f.s.imagesInUse(), nil
}

func (s *fakeStore) imagesInUse() map[string]bool {
	out := map[string]bool{}
	for _, c := range s.ctrs {
		out[c.c.ImageID] = true
	}
	for _, sb := range s.sandboxes {
		out[sb.imageID] = true
	}
	return out
}

// ImageFsInfo returns the image filesystem SetImageFs set up (100 GiB, 60
// GiB free, less the images added, by default).
func (f *Fake) ImageFsInfo(ctx context.Context) (*engine.FsInfo, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ImageFsInfo"); err != nil {
		return nil, err
	}
	fs := f.s.imageFs
	return &fs, nil
}

// SetPullError makes every pull of ref fail with err (nil: pulls succeed
// again).
func (f *Fake) SetPullError(ref string, err error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err == nil {
		delete(f.s.pullErrs, ref)
	} else {
		f.s.pullErrs[ref] = err
	}
}

// FailNext makes the next call of method (a method name of engine.Runtime,
// ResourceUpdater or LogReader, e.g. "StartContainer") return err without
// doing anything. Several calls queue up.
func (f *Fake) FailNext(method string, err error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.failNext[method] = append(f.s.failNext[method], err)
}

// CallOrder returns the methods called since the last ResetCalls, in
// order (failed calls included).
func (f *Fake) CallOrder() []string {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return slices.Clone(f.s.order)
}

// Calls returns how many times method was called (failed calls included).
func (f *Fake) Calls(method string) int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.calls[method]
}

// ResetCalls sets every call counter back to zero.
func (f *Fake) ResetCalls() {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.calls = map[string]int{}
	f.s.order = nil
}

// Exit makes a running container exit with code, now.
func (f *Fake) Exit(id string, code int) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	c, err := f.ctr(id)
	if err != nil {
		return err
	}
	if c.c.State != engine.StateRunning {
		return fmt.Errorf("exit %s: container is %s, not running", id, c.c.State)
	}
	f.s.exit(c, code, false, f.s.clock())
	return nil
}

// OOMKill makes a running container die for memory, now (exit 137).
func (f *Fake) OOMKill(id string) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	c, err := f.ctr(id)
	if err != nil {
		return err
	}
	if c.c.State != engine.StateRunning {
		return fmt.Errorf("oom-kill %s: container is %s, not running", id, c.c.State)
	}
	f.s.exit(c, 137, true, f.s.clock())
	return nil
}

// ContainerConfig returns (a copy of) the config a container was created
// with, or nil when this node has no such container.
func (f *Fake) ContainerConfig(id string) *engine.ContainerConfig {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	c, err := f.ctr(id)
	if err != nil {
		return nil
	}
	cfg := c.cfg
	return &cfg
}

// SandboxConfig returns (a copy of) the config a sandbox was made with, or
// nil when this node has no such sandbox.
func (f *Fake) SandboxConfig(id string) *engine.SandboxConfig {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	sb, err := f.sandbox(id)
	if err != nil {
		return nil
	}
	cfg := sb.cfg
	return &cfg
}

// CreateSandboxOnly makes, without starting it, the sandbox RunSandbox would
// make for cfg: what a podrun killed between the two steps leaves behind.
func (f *Fake) CreateSandboxOnly(cfg *engine.SandboxConfig) (string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	sb, err := f.createSandbox(cfg)
	if err != nil {
		return "", err
	}
	return sb.sb.ID, nil
}

// call counts a call of method and returns the error FailNext queued for it.
func (f *Fake) call(method string) error {
	f.s.calls[method]++
	f.s.order = append(f.s.order, method)
	if q := f.s.failNext[method]; len(q) > 0 {
		f.s.failNext[method] = q[1:]
		return q[0]
	}
	return nil
}

func (s *fakeStore) newID() string {
	s.seq++
	sum := sha256.Sum256([]byte("fake-" + strconv.Itoa(s.seq)))
	return hex.EncodeToString(sum[:])
}

func (f *Fake) sandbox(id string) (*fakeSandbox, error) {
	sb, ok := f.s.sandboxes[id]
	if !ok || sb.node != f.node {
		return nil, fmt.Errorf("sandbox %.12s: %w on node %s", id, engine.ErrNotFound, f.node)
	}
	return sb, nil
}

func (f *Fake) ctr(id string) (*fakeContainer, error) {
	c, ok := f.s.ctrs[id]
	if !ok || c.node != f.node {
		return nil, fmt.Errorf("container %.12s: %w on node %s", id, engine.ErrNotFound, f.node)
	}
	return c, nil
}

// claim returns the ID holding the identity key, if any: one of this node's
// (adopt) or an error (another node's: not ours to touch).
func (f *Fake) claim(key string, node func(id string) string) (string, error) {
	id, ok := f.s.names[key]
	if !ok {
		return "", nil
	}
	if n := node(id); n != f.node {
		return "", fmt.Errorf("name %s is taken by %.12s of node %q, not this pod's on node %s", key, id, n, f.node)
	}
	return id, nil
}

func sandboxKey(cfg *engine.SandboxConfig) string {
	return fmt.Sprintf("POD_%s_%s_%s_%d", cfg.Pod.Name, cfg.Pod.Namespace, cfg.Pod.UID, cfg.Attempt)
}

func (f *Fake) createSandbox(cfg *engine.SandboxConfig) (*fakeSandbox, error) {
	key := sandboxKey(cfg)
	id, err := f.claim(key, func(id string) string { return f.s.sandboxes[id].node })
	if err != nil {
		return nil, err
	}
	if id != "" {
		return f.s.sandboxes[id], nil
	}
	img := f.s.lookupImage(cfg.Image)
	if img == nil {
		return nil, fmt.Errorf("image %s: %w", cfg.Image, engine.ErrNotFound)
	}
	if cfg.Runtime != "" && !slices.Contains(f.s.runtimes, cfg.Runtime) {
		// Docker's words.
		return nil, fmt.Errorf("unknown or invalid runtime name: %s", cfg.Runtime)
	}
	sb := &fakeSandbox{node: f.node, key: key, cfg: *cfg, imageID: img.ID}
	grace := max(cfg.GracePeriod, 0)
	sb.sb = engine.Sandbox{
		ID:          f.s.newID(),
		Pod:         cfg.Pod,
		Attempt:     cfg.Attempt,
		Hash:        cfg.Hash,
		State:       engine.StateCreated,
		CreatedAt:   f.s.clock(),
		Source:      cfg.Source,
		GracePeriod: &grace,
		QOSClass:    cfg.QOSClass,
	}
	f.s.sandboxes[sb.sb.ID] = sb
	f.s.names[key] = sb.sb.ID
	return sb, nil
}

// RunSandbox creates and starts a sandbox, or adopts (and starts) the one of
// the same (pod UID, attempt).
func (f *Fake) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("RunSandbox"); err != nil {
		return "", err
	}
	sb, err := f.createSandbox(cfg)
	if err != nil {
		return "", fmt.Errorf("run sandbox: %w", err)
	}
	if sb.sb.State != engine.StateRunning {
		if taken := f.s.portTaken(sb); taken != "" {
			// As Docker: the start fails, and the sandbox is dead.
			sb.sb.State = engine.StateExited
			return "", fmt.Errorf("run sandbox: start: Bind for %s failed: port is already allocated", taken)
		}
		sb.sb.State = engine.StateRunning
		if !sb.cfg.HostNetwork {
			f.s.ips++
			sb.ip = fmt.Sprintf("10.88.%d.%d", f.s.ips/250, f.s.ips%250+2)
		}
		f.s.emit(f.node, sb.cfg.Pod.UID, sb.sb.ID, "start")
	}
	return sb.sb.ID, nil
}

// portTaken returns "ip:port" of a host port of sb that a running sandbox
// (of any node) publishes already, or "".
func (s *fakeStore) portTaken(sb *fakeSandbox) string {
	for _, p := range sb.cfg.Ports {
		if p.HostPort == 0 || sb.cfg.HostNetwork {
			continue
		}
		for _, o := range s.sandboxes {
			if o == sb || o.sb.State != engine.StateRunning {
				continue
			}
			for _, q := range o.cfg.Ports {
				if q.HostPort == p.HostPort && protocol(q.Protocol) == protocol(p.Protocol) &&
					(q.HostIP == p.HostIP || q.HostIP == "" || p.HostIP == "" || q.HostIP == "0.0.0.0" || p.HostIP == "0.0.0.0") {
					ip := p.HostIP
					if ip == "" {
						ip = "0.0.0.0"
					}
					return fmt.Sprintf("%s:%d", ip, p.HostPort)
				}
			}
		}
	}
	return ""
}

func protocol(p string) string {
	if p == "" {
		return "TCP"
	}
	return strings.ToUpper(p)
}

// StopSandbox stops a sandbox.
func (f *Fake) StopSandbox(ctx context.Context, id string, grace time.Duration) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("StopSandbox"); err != nil {
		return err
	}
	sb, err := f.sandbox(id)
	if err != nil {
		return fmt.Errorf("stop sandbox: %w", err)
	}
	if sb.sb.State == engine.StateRunning {
		sb.sb.State = engine.StateExited
		sb.ip = ""
		f.s.emit(f.node, sb.cfg.Pod.UID, id, "die")
	}
	return nil
}

// RemoveSandbox removes a sandbox (not its containers).
func (f *Fake) RemoveSandbox(ctx context.Context, id string) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("RemoveSandbox"); err != nil {
		return err
	}
	sb, err := f.sandbox(id)
	if err != nil {
		return nil
	}
	if sb.sb.State == engine.StateRunning {
		f.s.emit(f.node, sb.cfg.Pod.UID, id, "die")
	}
	delete(f.s.sandboxes, id)
	delete(f.s.names, sb.key)
	f.s.emit(f.node, sb.cfg.Pod.UID, id, "destroy")
	return nil
}

// ListSandboxes returns this node's sandboxes.
func (f *Fake) ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ListSandboxes"); err != nil {
		return nil, err
	}
	var out []*engine.Sandbox
	for _, sb := range f.s.sandboxes {
		if sb.node != f.node {
			continue
		}
		s := sb.sb
		s.IP = sb.ip
		out = append(out, &s)
	}
	return out, nil
}

// SandboxIP returns a sandbox's IP ("" when stopped or on the host's
// network), as CRI's PodSandboxStatus tells it.
func (f *Fake) SandboxIP(ctx context.Context, id string) (string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("SandboxIP"); err != nil {
		return "", err
	}
	sb, err := f.sandbox(id)
	if err != nil {
		return "", err
	}
	if sb.sb.State != engine.StateRunning {
		return "", nil
	}
	return sb.ip, nil
}

// CreateContainer creates a container, or returns the one of the same (pod
// UID, name, attempt).
func (f *Fake) CreateContainer(ctx context.Context, sandboxID string, sandbox *engine.SandboxConfig, cfg *engine.ContainerConfig) (string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("CreateContainer"); err != nil {
		return "", err
	}
	if _, err := f.sandbox(sandboxID); err != nil {
		return "", fmt.Errorf("create %s: sandbox: %w", cfg.Name, err)
	}
	key := fmt.Sprintf("%s_%s_%s_%s_%d", cfg.Name, sandbox.Pod.Name, sandbox.Pod.Namespace, sandbox.Pod.UID, cfg.Attempt)
	id, err := f.claim(key, func(id string) string { return f.s.ctrs[id].node })
	if err != nil {
		return "", fmt.Errorf("create %s: %w", cfg.Name, err)
	}
	if id != "" {
		return id, nil
	}
	img := f.s.lookupImage(cfg.Image)
	if img == nil {
		return "", fmt.Errorf("create %s: image %s: %w", cfg.Name, cfg.Image, engine.ErrNotFound)
	}
	if err := f.s.checkImageMounts(cfg.Mounts); err != nil {
		return "", fmt.Errorf("create %s: %w", cfg.Name, err)
	}
	typ := cfg.Type
	if typ == "" {
		typ = engine.ContainerTypeApp
	}
	c := &fakeContainer{node: f.node, key: key, sandboxID: sandboxID, cfg: *cfg}
	c.c = engine.Container{
		ID:            f.s.newID(),
		SandboxID:     sandboxID,
		Pod:           sandbox.Pod,
		Name:          cfg.Name,
		Type:          typ,
		Attempt:       cfg.Attempt,
		Hash:          cfg.Hash,
		ResourcesHash: cfg.ResourcesHash,
		Image:         cfg.Image,
		ImageID:       img.ID,
		State:         engine.StateCreated,
		CreatedAt:     f.s.clock(),
	}
	f.s.ctrs[c.c.ID] = c
	f.s.names[key] = c.c.ID
	return c.c.ID, nil
}

// argv is the container's command line, with $VAR expanded from its env.
func (c *fakeContainer) argv() []string {
	env := map[string]string{}
	for _, e := range c.cfg.Env {
		env[e.Name] = e.Value
	}
	var out []string
	for _, a := range append(append([]string(nil), c.cfg.Command...), c.cfg.Args...) {
		out = append(out, os.Expand(a, func(k string) string { return env[k] }))
	}
	return out
}

// script is the fake command the container runs ("run" when none).
func (c *fakeContainer) script() []string {
	argv := c.argv()
	if len(argv) < 2 || argv[0] != FakeScript {
		return []string{"run"}
	}
	return argv[1:]
}

// StartContainer starts a container, acting out its script.
func (f *Fake) StartContainer(ctx context.Context, id string) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("StartContainer"); err != nil {
		return err
	}
	c, err := f.ctr(id)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if c.c.State == engine.StateRunning {
		return nil
	}
	now := f.s.clock()
	fail := func(code int, msg string) error {
		c.c.State = engine.StateExited
		c.c.StartedAt, c.c.FinishedAt = c.c.CreatedAt, c.c.CreatedAt
		c.c.ExitCode, c.c.OOMKilled, c.c.Message = code, false, msg
		return fmt.Errorf("start %s: %s", c.cfg.Name, msg)
	}
	if sb, ok := f.s.sandboxes[c.sandboxID]; !ok || sb.sb.State != engine.StateRunning {
		return fail(128, "cannot join the namespaces of sandbox "+c.sandboxID[:12]+": it is not running")
	}
	script := c.script()
	if script[0] == "start-fails" {
		return fail(127, "exec: "+strings.Join(c.argv(), " ")+": not found")
	}
	c.c.State = engine.StateRunning
	c.c.StartedAt, c.c.FinishedAt = now, time.Time{}
	c.c.ExitCode, c.c.OOMKilled, c.c.Message = 0, false, ""
	c.done = make(chan struct{})
	f.s.emit(c.node, c.c.Pod.UID, c.c.ID, "start")
	switch script[0] {
	case "exit":
		code := 0
		if len(script) > 1 {
			n, err := strconv.Atoi(script[1])
			if err != nil {
				n = 2 // as sh says of "exit abc"
			}
			code = n
		}
		f.s.exit(c, code, false, now)
	case "echo":
		c.logs = append(c.logs, logLine{at: now, text: strings.Join(script[1:], " ") + "\n"})
		f.s.exit(c, 0, false, now)
	case "oom":
		f.s.exit(c, 137, true, now)
	}
	return nil
}

// exit ends a running container's run.
func (s *fakeStore) exit(c *fakeContainer, code int, oom bool, at time.Time) {
	c.c.State = engine.StateExited
	c.c.ExitCode, c.c.OOMKilled, c.c.FinishedAt = code, oom, at
	if c.done != nil {
		close(c.done)
		c.done = nil
	}
	if oom {
		s.emit(c.node, c.c.Pod.UID, c.c.ID, "oom")
	}
	s.emit(c.node, c.c.Pod.UID, c.c.ID, "die")
}

// emit queues an event for node's subscribers.
func (s *fakeStore) emit(node, podUID, id, action string) {
	for sub := range s.subs {
		if sub.node != node {
			continue
		}
		sub.push(engine.Event{PodUID: podUID, ContainerID: id, Action: action})
	}
}

func (sub *fakeSub) push(ev engine.Event) {
	sub.mu.Lock()
	switch {
	case ev.Lost:
		sub.cut = true
	case ev.Resync:
		sub.cut = false
	case sub.cut:
		sub.mu.Unlock()
		return
	}
	sub.q = append(sub.q, ev)
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// Events reports this node's start, die, oom and destroy events from the
// call on, until ctx ends.
func (f *Fake) Events(ctx context.Context) <-chan engine.Event {
	sub := &fakeSub{node: f.node, wake: make(chan struct{}, 1)}
	f.s.mu.Lock()
	f.s.calls["Events"]++
	f.s.subs[sub] = true
	f.s.mu.Unlock()
	out := make(chan engine.Event)
	go func() {
		defer close(out)
		defer func() {
			f.s.mu.Lock()
			delete(f.s.subs, sub)
			f.s.mu.Unlock()
		}()
		for {
			sub.mu.Lock()
			if len(sub.q) == 0 {
				sub.mu.Unlock()
				select {
				case <-sub.wake:
					continue
				case <-ctx.Done():
					return
				}
			}
			ev := sub.q[0]
			sub.q = sub.q[1:]
			sub.mu.Unlock()
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Resync sends every subscriber of this node a Resync event, as a runtime
// does after reconnecting to its engine; a stream CutEvents broke reports
// events again from then on.
func (f *Fake) Resync() { f.pushAll(engine.Event{Resync: true}) }

// CutEvents breaks every event stream of this node, as the engine going
// away does: a Lost event, then no event until Resync.
func (f *Fake) CutEvents() { f.pushAll(engine.Event{Lost: true}) }

func (f *Fake) pushAll(ev engine.Event) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	for sub := range f.s.subs {
		if sub.node == f.node {
			sub.push(ev)
		}
	}
}

// SetExecHandler makes Exec call h (nil: the default, which acts out
// "fake exit N" and "fake echo WORDS" and otherwise exits 0 silently).
// Exec still fails, before calling h, for a container that is not running.
func (f *Fake) SetExecHandler(h func(id string, cmd []string) (int, []byte, error)) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.exec = h
}

// Exec runs cmd in a running container, in the fake's way (SetExecHandler).
func (f *Fake) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	h, argv, err := f.prepareExec("Exec", id, cmd)
	if err != nil {
		return -1, nil, err
	}
	if h != nil {
		return h(id, cmd)
	}
	code, stdout, stderr := actOutExec(argv, nil)
	return code, append(stdout, stderr...), nil
}

// ExecStream runs cmd in a running container with streams, in the fake's
// way: the scripts of Exec, and "fake echo-stderr WORDS" (to stderr) and
// "fake cat" (stdin to stdout). SetExecHandler's output goes to stdout.
func (f *Fake) ExecStream(ctx context.Context, id string, cmd []string, streams engine.ExecStreams) (int, error) {
	h, argv, err := f.prepareExec("ExecStream", id, cmd)
	if err != nil {
		return -1, err
	}
	var code int
	var stdout, stderr []byte
	if h != nil {
		code, stdout, err = h(id, cmd)
		if err != nil {
			return -1, err
		}
	} else {
		code, stdout, stderr = actOutExec(argv, streams.Stdin)
	}
	if streams.TTY {
		// One stream, and the terminal turns \n into \r\n.
		stdout, stderr = bytes.ReplaceAll(append(stdout, stderr...), []byte("\n"), []byte("\r\n")), nil
	}
	for _, o := range []struct {
		w io.Writer
		b []byte
	}{{streams.Stdout, stdout}, {streams.Stderr, stderr}} {
		if o.w != nil && len(o.b) > 0 {
			if _, err := o.w.Write(o.b); err != nil {
				return -1, fmt.Errorf("exec %q: %w", cmd, err)
			}
		}
	}
	return code, nil
}

// prepareExec checks that id is a running container and returns the exec
// handler (nil: the default) and cmd with the container's env expanded.
func (f *Fake) prepareExec(method, id string, cmd []string) (func(id string, cmd []string) (int, []byte, error), []string, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call(method); err != nil {
		return nil, nil, err
	}
	c, err := f.ctr(id)
	if err != nil {
		return nil, nil, fmt.Errorf("exec: %w", err)
	}
	if c.c.State != engine.StateRunning {
		return nil, nil, fmt.Errorf("exec in %s: container is not running", c.cfg.Name)
	}
	env := map[string]string{}
	for _, e := range c.cfg.Env {
		env[e.Name] = e.Value
	}
	var argv []string
	for _, a := range cmd {
		argv = append(argv, os.Expand(a, func(k string) string { return env[k] }))
	}
	return f.s.exec, argv, nil
}

// actOutExec acts out an exec's script: "exit N", "echo WORDS",
// "echo-stderr WORDS" and "cat" (stdin, when not nil, to stdout); any
// other command exits 0 with no output.
func actOutExec(argv []string, stdin io.Reader) (code int, stdout, stderr []byte) {
	if len(argv) < 2 || argv[0] != FakeScript {
		return 0, nil, nil
	}
	switch argv[1] {
	case "exit":
		if len(argv) > 2 {
			if n, err := strconv.Atoi(argv[2]); err == nil {
				return n, nil, nil
			}
			return 2, nil, nil
		}
	case "echo":
		return 0, []byte(strings.Join(argv[2:], " ") + "\n"), nil
	case "echo-stderr":
		return 0, nil, []byte(strings.Join(argv[2:], " ") + "\n")
	case "cat":
		if stdin != nil {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return 1, nil, []byte(err.Error())
			}
			return 0, b, nil
		}
	}
	return 0, nil, nil
}

// StopContainer stops a running container: at once with exit 143 (0 for
// the "exit-on-term" script), or, for the "ignore-term" script, after
// grace with exit 137.
func (f *Fake) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("StopContainer"); err != nil {
		return err
	}
	c, err := f.ctr(id)
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if c.c.State != engine.StateRunning {
		return nil
	}
	now := f.s.clock()
	switch c.script()[0] {
	case "ignore-term":
		if grace < 0 {
			grace = 0
		}
		f.s.exit(c, 137, false, now.Add(grace))
	case "exit-on-term":
		f.s.exit(c, 0, false, now)
	default:
		f.s.exit(c, 143, false, now)
	}
	return nil
}

// RemoveContainer removes a container, killing it if it runs.
func (f *Fake) RemoveContainer(ctx context.Context, id string) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("RemoveContainer"); err != nil {
		return err
	}
	c, err := f.ctr(id)
	if err != nil {
		return nil
	}
	if c.c.State == engine.StateRunning {
		f.s.exit(c, 137, false, f.s.clock())
	}
	delete(f.s.ctrs, id)
	delete(f.s.names, c.key)
	f.s.emit(c.node, c.c.Pod.UID, id, "destroy")
	return nil
}

// ListContainers returns this node's containers.
func (f *Fake) ListContainers(ctx context.Context) ([]*engine.Container, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ListContainers"); err != nil {
		return nil, err
	}
	var out []*engine.Container
	for _, c := range f.s.ctrs {
		if c.node != f.node {
			continue
		}
		cc := c.c
		out = append(out, &cc)
	}
	return out, nil
}

// ListPodObjects returns the sandboxes and containers of the pod uid, or
// of every pod of this node when uid is "", in one call.
func (f *Fake) ListPodObjects(ctx context.Context, uid string) ([]*engine.Sandbox, []*engine.Container, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ListPodObjects"); err != nil {
		return nil, nil, err
	}
	sbs, cs := f.podObjects(uid)
	return sbs, cs, nil
}

// ListPodSummaries is ListPodObjects of every pod without what only
// Docker's inspect tells (engine/docker's ListPodSummaries): the
// containers' StartedAt, FinishedAt, ExitCode, OOMKilled and Message are
// zero.
func (f *Fake) ListPodSummaries(ctx context.Context) ([]*engine.Sandbox, []*engine.Container, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ListPodSummaries"); err != nil {
		return nil, nil, err
	}
	sbs, cs := f.podObjects("")
	for _, c := range cs {
		c.StartedAt, c.FinishedAt, c.ExitCode, c.OOMKilled, c.Message = time.Time{}, time.Time{}, 0, false, ""
	}
	return sbs, cs, nil
}

// podObjects are the sandboxes and containers of pod uid ("": of every
// pod) of this node, as copies. f.s.mu is held.
func (f *Fake) podObjects(uid string) ([]*engine.Sandbox, []*engine.Container) {
	var sbs []*engine.Sandbox
	for _, sb := range f.s.sandboxes {
		if sb.node != f.node || (uid != "" && sb.sb.Pod.UID != uid) {
			continue
		}
		s := sb.sb
		s.IP = sb.ip
		sbs = append(sbs, &s)
	}
	var cs []*engine.Container
	for _, c := range f.s.ctrs {
		if c.node != f.node || (uid != "" && c.c.Pod.UID != uid) {
			continue
		}
		cc := c.c
		cs = append(cs, &cc)
	}
	return sbs, cs
}

// ImageStatus returns a local image, or ErrNotFound.
func (f *Fake) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ImageStatus"); err != nil {
		return nil, err
	}
	img := f.s.lookupImage(ref)
	if img == nil {
		return nil, fmt.Errorf("image %s: %w", ref, engine.ErrNotFound)
	}
	cp := *img
	return &cp, nil
}

// PullImage makes ref local, unless SetPullError set an error for it.
func (f *Fake) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("PullImage"); err != nil {
		return nil, err
	}
	if err := f.s.pullErrs[ref]; err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	cp := *f.s.addImage(ref)
	return &cp, nil
}

// UpdateContainerResources changes a container's recorded resources. As on
// Docker, a memory limit cannot be removed in place.
func (f *Fake) UpdateContainerResources(ctx context.Context, id string, res *engine.Resources) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("UpdateContainerResources"); err != nil {
		return err
	}
	c, err := f.ctr(id)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if res.MemoryLimit == 0 && c.cfg.Resources.MemoryLimit > 0 {
		return fmt.Errorf("update %s: removing the memory limit: cannot be changed in place", c.cfg.Name)
	}
	c.cfg.Resources = *res
	return nil
}

// ContainerLogs writes what the container wrote; with Follow, it then waits
// for the run to end (or ctx).
func (f *Fake) ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) error {
	f.s.mu.Lock()
	if err := f.call("ContainerLogs"); err != nil {
		f.s.mu.Unlock()
		return err
	}
	c, err := f.ctr(id)
	if err != nil {
		f.s.mu.Unlock()
		return fmt.Errorf("logs: %w", err)
	}
	lines := append([]logLine(nil), c.logs...)
	done := c.done
	f.s.mu.Unlock()

	if opts.Tail >= 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	var out, errOut bytes.Buffer
	for _, l := range lines {
		w := &out
		if l.stderr {
			w = &errOut
		}
		if opts.Timestamps {
			w.WriteString(l.at.UTC().Format(time.RFC3339Nano) + " ")
		}
		w.WriteString(l.text)
	}
	if stdout != nil {
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return err
		}
	}
	if stderr != nil {
		if _, err := stderr.Write(errOut.Bytes()); err != nil {
			return err
		}
	}
	if opts.Follow && done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return nil
}

// ErrInjected is a ready-made error for FailNext.
var ErrInjected = errors.New("injected failure")

var _ engine.StatsProvider = (*Fake)(nil)

// SetStats sets what ContainerStats reports of a container.
func (f *Fake) SetStats(id string, st engine.ContainerStats) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.s.stats == nil {
		f.s.stats = map[string]engine.ContainerStats{}
	}
	f.s.stats[id] = st
}

// ContainerStats reports what SetStats set (zero usage otherwise) of a
// container of this node.
func (f *Fake) ContainerStats(ctx context.Context, id string) (*engine.ContainerStats, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ContainerStats"); err != nil {
		return nil, err
	}
	if _, err := f.ctr(id); err != nil {
		return nil, err
	}
	st := f.s.stats[id]
	return &st, nil
}

// SetDiskUsage sets what ContainerDiskUsage reports of a container.
func (f *Fake) SetDiskUsage(id string, u engine.DiskUsage) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.s.disk == nil {
		f.s.disk = map[string]engine.DiskUsage{}
	}
	f.s.disk[id] = u
}

// ContainerDiskUsage reports what SetDiskUsage set (nothing written
// otherwise) of a container of this node.
func (f *Fake) ContainerDiskUsage(ctx context.Context, id string) (*engine.DiskUsage, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if err := f.call("ContainerDiskUsage"); err != nil {
		return nil, err
	}
	if _, err := f.ctr(id); err != nil {
		return nil, err
	}
	u := f.s.disk[id]
	return &u, nil
}
