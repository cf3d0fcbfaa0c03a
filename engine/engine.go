// Package engine is the container-engine contract podrun's sync core, its
// garbage collection and its commands program against, and nothing else:
// it imports nothing of podrun. Its shape follows the CRI: a pod is one
// sandbox (holding the network, IPC and UTS namespaces) and containers
// that join it; images are a service of their own. engine/docker implements
// it on the Docker Engine API; engine/enginetest holds the conformance
// suite every implementation must pass, and the in-memory fake the unit
// tests use, held to the same suite.
//
// An implementation is bound to one node name: it lists, and touches, only
// the objects it labelled with that node name, so several podruns may share
// an engine without seeing each other's pods.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Runtime is everything the sync core needs from a container engine: its
// sandboxes, its containers and the images they run. Optional abilities
// (ResourceUpdater, LogReader, Execer, ExecStreamer, EventSource, PodObjectLister,
// PodSummaryLister, ImageService, ImageFilesystemExporter, RuntimeHandlerLister,
// StatsProvider) are separate interfaces, found by type assertion.
type Runtime interface {
	SandboxManager
	ContainerManager
	ImageManager
}

// SandboxManager makes and removes pod sandboxes (CRI's PodSandbox calls).
type SandboxManager interface {
	// RunSandbox creates and starts the sandbox described by cfg and returns
	// its ID. It is idempotent by (PodUID, Attempt): if that sandbox already
	// exists (say, a podrun killed mid-call left it), it is adopted: started
	// if it is not running, and its ID returned. It never makes a duplicate.
	RunSandbox(ctx context.Context, cfg *SandboxConfig) (string, error)
	// StopSandbox stops the sandbox's infra container within grace. Stopping a
	// stopped sandbox is not an error. ErrNotFound if it does not exist.
	StopSandbox(ctx context.Context, id string, grace time.Duration) error
	// RemoveSandbox removes a sandbox (stopping it first). It does not remove
	// the sandbox's containers. A missing sandbox is not an error.
	RemoveSandbox(ctx context.Context, id string) error
	// ListSandboxes returns this node's sandboxes, running or not.
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)
}

// ContainerManager makes, starts, stops and removes containers in sandboxes
// (CRI's container calls).
type ContainerManager interface {
	// CreateContainer creates (but does not start) a container in the sandbox
	// sandboxID. It is idempotent by (PodUID, Name, Attempt): an existing
	// container of that identity is returned, not duplicated. ErrNotFound if
	// the sandbox or the image does not exist.
	CreateContainer(ctx context.Context, sandboxID string, sandbox *SandboxConfig, cfg *ContainerConfig) (string, error)
	// StartContainer starts a created container. Starting a running container
	// is not an error. ErrNotFound if it does not exist.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends the container's stop signal (the image's STOPSIGNAL,
	// or SIGTERM) and SIGKILL after grace. Stopping a stopped container is not
	// an error. ErrNotFound if it does not exist.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer removes a container, killing it if it runs. A missing
	// container is not an error.
	RemoveContainer(ctx context.Context, id string) error
	// ListContainers returns this node's containers (not sandboxes), in any
	// state.
	ListContainers(ctx context.Context) ([]*Container, error)
}

// ImageManager is what starting containers needs of images: is one here,
// and pull it (CRI's ImageStatus and PullImage). Image garbage collection's
// calls are ImageService.
type ImageManager interface {
	// ImageStatus returns the local image ref resolves to, or ErrNotFound.
	ImageStatus(ctx context.Context, ref string) (*Image, error)
	// PullImage pulls ref and returns the local image; auth nil pulls
	// anonymously. Its error names ref ("pull REF: ..."): callers show it
	// as it is.
	PullImage(ctx context.Context, ref string, auth *AuthConfig) (*Image, error)
}

// PullProgress is one progress message of an image pull, in the terms of
// Docker's pull stream (which the CRI engine speaks too, from containerd's
// content store): a status per layer, then one for the image. A runtime
// reports them to the callback its options name, for a progress display.
type PullProgress struct {
	ID      string // the layer, or "" for the image as a whole
	Status  string // "Downloading", "Pull complete", "Status: Downloaded newer image for ...", ...
	Current int64  // bytes done, when known
	Total   int64  // bytes in all, when known
}

// ResourceUpdater is implemented by runtimes that can change a running
// container's resources in place (Docker's update).
type ResourceUpdater interface {
	UpdateContainerResources(ctx context.Context, id string, res *Resources) error
}

// LogReader is implemented by runtimes that can stream a container's output.
type LogReader interface {
	ContainerLogs(ctx context.Context, id string, opts LogOptions, stdout, stderr io.Writer) error
}

// Execer is implemented by runtimes that can run a command in a running
// container (for exec hooks and probes). Output is bounded by the runtime.
type Execer interface {
	Exec(ctx context.Context, id string, cmd []string) (exitCode int, output []byte, err error)
}

// ExecStreamer is implemented by runtimes that can run a command in a
// running container with its streams attached, as `kubectl exec` does.
type ExecStreamer interface {
	// ExecStream runs cmd in the running container id (as its user, in
	// its working directory, with its environment) and copies
	// streams.Stdin to it and its output to streams.Stdout and
	// streams.Stderr until it exits; it returns the command's exit code.
	// A command that cannot be run (not found, say) is a non-zero exit
	// code (126, 127), as with `docker exec`. ErrNotFound (wrapped) when
	// the container does not exist; an error when it is not running.
	// When ctx ends first, ExecStream returns ctx's error. It does not
	// wait for a Stdin read that is still blocked: the caller ends that
	// read by closing Stdin's source.
	ExecStream(ctx context.Context, id string, cmd []string, streams ExecStreams) (exitCode int, err error)
}

// ExecStreams are the streams of ExecStream. A nil stream is not
// attached.
type ExecStreams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal: its stdout and stderr are one
	// stream, written to Stdout.
	TTY bool
	// Resize, with TTY, carries the terminal's sizes; may be nil.
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint16
}

// StatsProvider is implemented by runtimes that can measure what a running
// container uses, for node-pressure eviction's ranking.
type StatsProvider interface {
	// ContainerStats measures a running container of this node now.
	// ErrNotFound if it does not exist.
	ContainerStats(ctx context.Context, id string) (*ContainerStats, error)
	// ContainerDiskUsage measures what a container of this node (running
	// or not) has written to disk. ErrNotFound if it does not exist.
	ContainerDiskUsage(ctx context.Context, id string) (*DiskUsage, error)
}

// DiskUsage is what a container has written to the node's disk: its
// ephemeral storage, as the kubelet counts it against the container's
// ephemeral-storage limit.
type DiskUsage struct {
	// WritableLayerBytes is the size of the container's writable layer.
	WritableLayerBytes uint64
	// LogBytes is the size of its log file(s) on the node.
	LogBytes uint64
}

// ContainerStats are one measurement of a container.
type ContainerStats struct {
	// MemoryWorkingSetBytes is the memory the container uses less the page
	// cache it could give back (inactive files): the kubelet's working set,
	// what it ranks pods by under memory pressure.
	MemoryWorkingSetBytes uint64
}

// EventSource is implemented by runtimes that report container state
// changes as they happen, so a pod is synced at once rather than at the next
// relist.
type EventSource interface {
	// Events sends an event for every start, exit, OOM kill and removal of
	// this node's containers and sandboxes until ctx ends, then closes the
	// channel. When the stream breaks it sends an Event with Lost set
	// (until the next Resync, changes may go unreported: whoever relies on
	// events must poll); it reconnects by itself when the engine restarts,
	// and sends an Event with Resync set after reconnecting: events may
	// have been missed, so everything should be looked at again.
	Events(ctx context.Context) <-chan Event
}

// PodObjectLister is implemented by runtimes that can list the sandboxes
// and containers of one pod, or of every pod of the node, in one call. The
// sync core then refreshes only the pod an event or an action concerns: a
// change to one pod costs a list of that pod, not of the whole node, and
// the periodic relist costs one call, not two.
type PodObjectLister interface {
	// ListPodObjects returns the sandboxes and containers (as ListSandboxes
	// and ListContainers report them) of the pod whose UID is uid, or of
	// every pod of this node when uid is "". A pod with no object is not
	// an error: both lists are empty.
	ListPodObjects(ctx context.Context, uid string) ([]*Sandbox, []*Container, error)
}

// PodSummaryLister is implemented by runtimes that can list every pod's
// sandboxes and containers of the node in one call, with less than
// ListPodObjects gives where the rest costs more calls: what removing them
// needs (a teardown of every pod, by a process that has not listed
// before).
type PodSummaryLister interface {
	// ListPodSummaries returns the sandboxes and containers of every pod
	// of this node, as ListPodObjects(ctx, "") does, except that a
	// container's StartedAt, FinishedAt, ExitCode, OOMKilled and Message
	// may be zero, and a sandbox or container whose start failed may be
	// reported created rather than exited.
	ListPodSummaries(ctx context.Context) ([]*Sandbox, []*Container, error)
}

// RuntimeHandlerLister is implemented by runtimes that can say which
// runtimes (SandboxConfig.Runtime) they have: a RuntimeClass is checked
// against them before a pod's sandbox is made, and a GPU needs the NVIDIA
// runtime.
type RuntimeHandlerLister interface {
	// RuntimeHandlers returns the names of the engine's runtimes, sorted.
	// It may be asked before every admission: an implementation asks the
	// engine once and keeps the answer (an engine gains a runtime only by
	// a restart with a new configuration). An error is not kept.
	RuntimeHandlers(ctx context.Context) ([]string, error)
}

// ImageMounter is implemented by runtimes that may mount an image's
// filesystem into a container themselves (Mount.Image): Docker's image
// mount, from Engine API 1.48. Where it answers false, an image volume is
// a copy the runner makes (ImageFilesystemExporter).
type ImageMounter interface {
	// MountsImages reports whether a container's mounts may name an image.
	// It may be asked before every pod's volumes are prepared: an
	// implementation asks the engine once and keeps the answer. An error
	// is not kept.
	MountsImages(ctx context.Context) (bool, error)
}

// ImageFilesystemExporter is implemented by runtimes that can hand out an
// image's filesystem as a tar stream: what the runner needs to make the
// read-only copy an image volume mounts, on engines without a native image
// mount. Like ImageService it concerns the engine's images, not a node's
// pods.
type ImageFilesystemExporter interface {
	// ExportImageFilesystem returns the filesystem of the local image ref
	// (a reference or an image ID) as an uncompressed tar stream, each
	// path once, its layers already applied. ErrNotFound if the image is
	// not present: it never pulls. Whatever the runtime makes to export
	// (a container that is never started) is gone once the stream is
	// closed, or when the call fails; the caller must close the stream.
	// The stream is the image's content: callers must treat its names,
	// links and sizes as hostile.
	ExportImageFilesystem(ctx context.Context, ref string) (io.ReadCloser, error)
}

// ImageService is implemented by runtimes that can list and remove images
// and measure the filesystem that holds them: what image garbage collection
// needs. Unlike the rest of Runtime it is not bound to a node: images belong
// to the engine, shared by every node's podrun and by whatever else uses the
// engine, so every call sees all of them.
type ImageService interface {
	// ListImages returns every image of the engine (not the intermediate
	// layers of builds), once each, with all its tags.
	ListImages(ctx context.Context) ([]*Image, error)
	// RemoveImage removes an image, given by ID (as ListImages reports it)
	// or by reference, with all its tags. It never removes an image a
	// container uses, running or not, of any node or none: that is
	// ErrImageInUse (wrapped). A missing image is not an error.
	RemoveImage(ctx context.Context, id string) error
	// ImagesInUse returns the IDs of the images that containers use: every
	// container of the engine (sandboxes included), running or not, whoever
	// made it.
	ImagesInUse(ctx context.Context) (map[string]bool, error)
	// ImageFsInfo measures the filesystem that holds the engine's images
	// (for Docker, the one of its data root).
	ImageFsInfo(ctx context.Context) (*FsInfo, error)
}

// ErrImageInUse is returned (wrapped) by RemoveImage for an image that a
// container uses.
var ErrImageInUse = errors.New("image is in use")

// FsInfo is the size of a filesystem and how much of it is free.
type FsInfo struct {
	// Path is where it was measured (Docker's data root, say).
	Path string
	// CapacityBytes is the filesystem's size, AvailableBytes what an
	// unprivileged writer may still use of it (statfs' f_bavail).
	CapacityBytes  uint64
	AvailableBytes uint64
}

// UsedPercent is the share of the filesystem not available, in percent
// (capacity - available, as the kubelet counts it), rounded down.
func (f *FsInfo) UsedPercent() int {
	if f.CapacityBytes == 0 {
		return 0
	}
	used := f.CapacityBytes - min(f.AvailableBytes, f.CapacityBytes)
	return int(used * 100 / f.CapacityBytes)
}

// Event says that something happened to one of a pod's containers.
type Event struct {
	PodUID      string
	ContainerID string
	Action      string // start, die, oom, destroy, ...
	// Resync: the stream is (again) connected and events may have been
	// missed. Lost: the stream broke; nothing is reported until a Resync.
	Resync bool
	Lost   bool
}

// LogOptions selects which part of a container's output to read.
type LogOptions struct {
	Follow     bool
	Tail       int // <0: all lines
	Timestamps bool
}

// ErrNotFound is returned (wrapped) when a sandbox, container or image does
// not exist.
var ErrNotFound = errors.New("not found")

// ErrUnavailable is returned (wrapped) when the runtime cannot be reached.
var ErrUnavailable = errors.New("runtime unavailable")

// DefaultRequestTimeout is how long a runtime waits for the answer to one
// of its engine's calls, pulls and streams aside: the kubelet's
// --runtime-request-timeout default. An engine that took a request and
// never answers (a deadlocked daemon) then fails the call rather than
// hold its caller for good.
const DefaultRequestTimeout = 2 * time.Minute

// ContainerType says what role a container plays in its pod.
type ContainerType string

const (
	ContainerTypeInit ContainerType = "init"
	ContainerTypeApp  ContainerType = "app"
	// ContainerTypeEphemeral is an ephemeral (debug) container, added to
	// a running pod through the API and run once.
	ContainerTypeEphemeral ContainerType = "ephemeral"
)

// State is the lifecycle state of a container or sandbox, as the runtime
// reports it.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// PodRef identifies the pod an object belongs to.
type PodRef struct {
	UID       string
	Name      string
	Namespace string
}

// SandboxConfig describes a pod's sandbox: the namespaces its containers share.
type SandboxConfig struct {
	Pod     PodRef
	Attempt int
	// Hash identifies the sandbox-level part of the pod spec (network mode,
	// ports, DNS, hostname, volumes); a change means a new sandbox.
	Hash  string
	Image string // infra image
	// Runtime is the engine's runtime (OCI runtime handler) the sandbox
	// and every container of the pod run with; "" is the engine's default.
	// A runtime the engine does not have fails RunSandbox.
	Runtime string

	// Hostname is the pod's. Its /etc/hosts is not the engine's: the
	// caller mounts the pod's own into each container (as the kubelet).
	Hostname    string
	HostNetwork bool
	HostPID     bool
	HostIPC     bool
	Ports       []PortMapping
	DNS         *DNSConfig        // nil: the runtime's default
	Sysctls     map[string]string // namespaced sysctls for the pod
	Labels      map[string]string // the pod's own labels, for people reading `docker ps`
	// Privileged says a container of the pod is privileged: a CRI runtime
	// refuses a privileged container in a sandbox not made privileged
	// (containerd: "no privileged container allowed in sandbox"), so the
	// kubelet marks the sandbox so when any container of the pod asks.
	Privileged bool
	// ShareProcessNamespace puts the pod's containers in the sandbox's PID
	// namespace (spec.shareProcessNamespace); otherwise each container has
	// its own PID namespace (unless HostPID).
	ShareProcessNamespace bool
	// Source is where the pod was defined (file path or URL), and
	// GracePeriod its terminationGracePeriodSeconds: kept with the sandbox so
	// that a podrun without the manifest (restarted, or `down --all`) knows
	// them.
	Source      string
	GracePeriod time.Duration
	// QOSClass is the pod's QoS class (Guaranteed, Burstable, BestEffort),
	// kept with the sandbox, like Source, for a podrun without the manifest.
	QOSClass string
	// CgroupParent is the cgroup the engine puts the sandbox and every
	// container of the pod under (the pod's own, made by the caller); ""
	// is the engine's default.
	CgroupParent string
	// OOMScoreAdj is the infra container's oom_score_adj; 0 leaves the
	// runtime's default. A score below what the runtime may set makes the
	// sandbox fail to start: the caller clamps it.
	OOMScoreAdj int
}

// PortMapping publishes a container port on the host.
type PortMapping struct {
	Protocol      string // TCP, UDP or SCTP
	ContainerPort int32
	HostPort      int32
	HostIP        string
}

// DNSConfig is the resolv.conf a pod gets.
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// Sandbox is a sandbox as the runtime reports it.
type Sandbox struct {
	ID        string
	Pod       PodRef
	Attempt   int
	Hash      string
	State     State
	IP        string
	CreatedAt time.Time
	// Source and QOSClass as given in SandboxConfig (empty when unknown).
	Source string
	// GracePeriod as given in SandboxConfig, zero included; nil when the
	// sandbox recorded none (one made by an older podrun), so that a pod
	// of grace 0 is not stopped with the 30 s default.
	GracePeriod *time.Duration
	QOSClass    string
}

// ContainerConfig is a container fully resolved for the runtime: env
// expanded, volumes turned into host paths, resources into numbers.
type ContainerConfig struct {
	Name    string
	Type    ContainerType
	Attempt int
	// Hash is the hash of the container's spec (resources excluded); a change
	// means the container is replaced.
	Hash string
	// ResourcesHash is the hash of the container's resources; a change alone
	// is applied in place where the runtime can.
	ResourcesHash string

	Image      string
	Command    []string // replaces the image's entrypoint when set
	Args       []string // replaces the image's cmd when set (or Command is)
	Env        []EnvVar
	WorkingDir string
	Mounts     []Mount
	Devices    []string
	// DeviceRequests ask the engine's device drivers for devices (GPUs)
	// by count and capabilities, as Docker's --gpus does.
	DeviceRequests []DeviceRequest
	Resources      Resources
	// OOMScoreAdj is the container's oom_score_adj (-1000..1000); 0 leaves
	// the runtime's default. A score below what the runtime may set (a
	// negative one without CAP_SYS_RESOURCE) makes the container fail to
	// start: the caller clamps it.
	OOMScoreAdj int
	Security    SecurityConfig
	TTY         bool
	Stdin       bool
	StdinOnce   bool
	// StopSignal overrides the image's STOPSIGNAL when set.
	StopSignal string
	// PIDTarget, when set, is the ID of a container of the same sandbox
	// whose PID namespace this one joins (an ephemeral container's
	// targetContainerName), unless the pod's containers share the host's
	// or the sandbox's PID namespace anyway. An engine that cannot join
	// one ignores it: the container gets its own.
	PIDTarget string
	// Labels are extra labels; the runtime adds its own identity labels.
	Labels map[string]string
}

// ParseDevice splits a ContainerConfig.Devices entry,
// "host[:container[:permissions]]": the container path defaults to the
// host's, the permissions to "rwm".
func ParseDevice(s string) (host, container, perms string, err error) {
	parts := strings.Split(s, ":")
	host, container, perms = parts[0], parts[0], "rwm"
	switch len(parts) {
	case 1:
	case 2:
		container = parts[1]
	case 3:
		container, perms = parts[1], parts[2]
	default:
		return "", "", "", fmt.Errorf("device %q: want host[:container[:permissions]]", s)
	}
	if host == "" || container == "" {
		return "", "", "", fmt.Errorf("device %q: want host[:container[:permissions]]", s)
	}
	return host, container, perms, nil
}

// EnvVar is one resolved environment variable.
type EnvVar struct {
	Name, Value string
}

// Mount binds a host path (or a tmpfs the runner mounted) into a container,
// or, with Image set, mounts an image's filesystem read-only.
type Mount struct {
	HostPath string
	// Image, when set in place of HostPath, is a local image (by ID) the
	// engine mounts read-only itself: only where ImageMounter says it can.
	Image string
	// ImageSubPath is the clean relative path within Image to mount; ""
	// mounts all of it.
	ImageSubPath  string
	ContainerPath string
	ReadOnly      bool
	// Propagation is "", "rprivate", "rslave" or "rshared".
	Propagation string
}

// Resources are a container's cgroup settings. Zero means "no limit".
type Resources struct {
	CPUShares   int64
	CPUQuota    int64 // microseconds per CPUPeriod
	CPUPeriod   int64
	MemoryLimit int64 // bytes
}

// DeviceRequest asks a device driver for Count devices that have all the
// capabilities of one of Capabilities' sets (Docker's DeviceRequest):
// {Driver: "nvidia", Count: 2, Capabilities: [["gpu"]]} is two GPUs.
type DeviceRequest struct {
	Driver       string
	Count        int
	Capabilities [][]string
}

// SecurityConfig is a container's resolved security context.
type SecurityConfig struct {
	RunAsUser          *int64
	RunAsGroup         *int64
	SupplementalGroups []int64
	ReadOnlyRootfs     bool
	Privileged         bool
	CapAdd             []string
	CapDrop            []string
	NoNewPrivileges    bool
	// Seccomp is "" (the runtime's default profile), "unconfined", or a path
	// to a local profile.
	Seccomp string
	// AppArmor is "" (runtime default), "unconfined" or a profile name.
	AppArmor string
}

// Container is a container as the runtime reports it.
type Container struct {
	ID            string
	SandboxID     string
	Pod           PodRef
	Name          string
	Type          ContainerType
	Attempt       int
	Hash          string
	ResourcesHash string
	Image         string // as the config named it
	ImageID       string // the image the container runs
	State         State
	CreatedAt     time.Time
	StartedAt     time.Time
	FinishedAt    time.Time
	ExitCode      int
	OOMKilled     bool
	// Message is the runtime's error for a container that failed to start.
	Message string
}

// Image is a local image.
type Image struct {
	ID       string
	RepoTags []string
	Size     int64
	// CreatedAt is when the image was made (built, imported), as the
	// engine reports it; ListImages sets it, ImageStatus may not.
	CreatedAt time.Time
	// Labels are the image's own labels (ListImages sets them).
	Labels map[string]string
	// User is the user the image runs as when nothing else is said, as
	// the image configures it: "", a name or uid, optionally ":group"
	// (ImageStatus sets it).
	User string
}

// AuthConfig are registry credentials for one pull.
type AuthConfig struct {
	Username      string
	Password      string
	Auth          string // base64 user:password
	ServerAddress string
	IdentityToken string
	RegistryToken string
}
