package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"net/http"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	utilexec "k8s.io/utils/exec"

	"github.com/podrun/podrun/engine"
)

// MaxExecOutput bounds what Exec returns of a command's output, as a
// probe's output is bounded.
const MaxExecOutput = 10 << 10

func errorsIsNotFound(err error) bool { return errors.Is(err, engine.ErrNotFound) }

func sortStrings(s []string) { slices.Sort(s) }

// ContainerLogs copies the container's CRI log file to stdout and stderr;
// with Follow, until the container exits or ctx ends.
func (r *Runtime) ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) error {
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("logs of %s: %w", shortID(id), err)
	}
	if st.LogPath == "" {
		return fmt.Errorf("logs of %s: the runtime keeps no log file", shortID(id))
	}
	lo := &logs.LogOptions{}
	if opts.Tail >= 0 {
		tail := int64(opts.Tail)
		lo.TailLines = &tail
	}
	lo.Follow = opts.Follow
	lo.Timestamp = opts.Timestamps
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if err := logs.ReadLogs(ctx, st.LogPath, id, lo, r.rs, stdout, stderr); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// Never started: nothing was written.
			return nil
		}
		return fmt.Errorf("logs of %s: %w", shortID(id), err)
	}
	return nil
}

// Exec runs cmd in the running container id (CRI ExecSync) and returns its
// exit code and its output (stdout then stderr), bounded by MaxExecOutput.
// The call is bounded by ctx's deadline, or a minute.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		return 0, nil, fmt.Errorf("exec in %s: %w", shortID(id), err)
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, nil, fmt.Errorf("exec in %s: container is not running", shortID(id))
	}
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Second)
	}
	stdout, stderr, err := r.rs.ExecSync(ctx, id, cmd, timeout)
	out := append(stdout, stderr...)
	if len(out) > MaxExecOutput {
		out = out[:MaxExecOutput]
	}
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return exit.Code, out, nil
	}
	if err != nil {
		return 0, out, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	return 0, out, nil
}

// ContainerStats measures a running container of this node.
func (r *Runtime) ContainerStats(ctx context.Context, id string) (*engine.ContainerStats, error) {
	if _, err := r.ownContainer(ctx, id); err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), err)
	}
	st, err := r.rs.ContainerStats(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("stats of %s: %w", shortID(id), wrap(err))
	}
	return &engine.ContainerStats{MemoryWorkingSetBytes: st.GetMemory().GetWorkingSetBytes().GetValue()}, nil
}

// ContainerDiskUsage measures a container's writable layer (as the
// runtime reports it) and its log file.
func (r *Runtime) ContainerDiskUsage(ctx context.Context, id string) (*engine.DiskUsage, error) {
	cst, err := r.ownContainer(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("disk usage of %s: %w", shortID(id), err)
	}
	du := &engine.DiskUsage{}
	if cst.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		st, err := r.rs.ContainerStats(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("disk usage of %s: %w", shortID(id), wrap(err))
		}
		du.WritableLayerBytes = st.GetWritableLayer().GetUsedBytes().GetValue()
	}
	if fi, err := os.Stat(cst.LogPath); err == nil {
		du.LogBytes = uint64(fi.Size())
	}
	return du, nil
}

// UpdateContainerResources changes a running container's resources in
// place. Removing a memory limit cannot be done in place (the runtime would
// keep the old one): that is an error, so that the caller replaces the
// container.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res *engine.Resources) error {
	if _, err := r.ownContainer(ctx, id); err != nil {
		return fmt.Errorf("update %s: %w", shortID(id), err)
	}
	if res.MemoryLimit == 0 {
		limit, err := r.memoryLimit(ctx, id)
		if err != nil {
			return fmt.Errorf("update %s: %w", shortID(id), err)
		}
		if limit > 0 {
			return fmt.Errorf("update %s: a memory limit cannot be removed in place", shortID(id))
		}
	}
	if err := r.rs.UpdateContainerResources(ctx, id, &runtimeapi.ContainerResources{Linux: linuxResources(res, 0)}); err != nil {
		return fmt.Errorf("update %s: %w", shortID(id), wrap(err))
	}
	return nil
}

// memoryLimit is the container's memory limit now, from its OCI spec as
// the runtime's verbose status reports it (0: none).
func (r *Runtime) memoryLimit(ctx context.Context, id string) (int64, error) {
	if st, err := r.rs.ContainerStatus(ctx, id, false); err == nil {
		if l := st.GetStatus().GetResources().GetLinux(); l != nil {
			return l.MemoryLimitInBytes, nil
		}
	}
	st, err := r.rs.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, wrap(err)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Resources struct {
					Memory struct {
						Limit *int64 `json:"limit"`
					} `json:"memory"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return 0, fmt.Errorf("container info: %w", err)
	}
	if l := info.RuntimeSpec.Linux.Resources.Memory.Limit; l != nil {
		return *l, nil
	}
	return 0, nil
}

// RuntimeHandlers returns the runtime's handlers, sorted, asked once.
func (r *Runtime) RuntimeHandlers(ctx context.Context) ([]string, error) {
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(info.Handlers), nil
}

// EnsureInfraImage returns the image the runtime runs sandboxes with (its
// own configuration's: CRI takes no image in RunPodSandbox), which must be
// present: a CRI engine cannot build one. ref and exe are not used.
func (r *Runtime) EnsureInfraImage(ctx context.Context, ref, exe string) (string, error) {
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("infra image: %w", err)
	}
	img := info.SandboxImage
	if img == "" {
		img = ref
	}
	if _, err := r.ImageStatus(ctx, img); err != nil {
		return "", fmt.Errorf("infra image %s (the runtime's sandbox image) is not present: import it: %w", img, err)
	}
	if ref != "" && ref != img {
		r.log.Debug("the runtime runs sandboxes with its own image", "image", img, "asked", ref)
	}
	return img, nil
}

// DataRoot is the directory the runtime keeps its images in (the image
// filesystem's mount point).
func (r *Runtime) DataRoot(ctx context.Context) (string, error) {
	fs, err := r.is.ImageFsInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("image filesystem: %w", wrap(err))
	}
	for _, u := range fs.GetImageFilesystems() {
		if p := u.GetFsId().GetMountpoint(); p != "" {
			return p, nil
		}
	}
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		return "", err
	}
	return info.ImageRoot, nil
}

// CgroupDriver is the runtime's cgroup driver, from its configuration.
func (r *Runtime) CgroupDriver(ctx context.Context) (string, error) {
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		return "", err
	}
	return info.CgroupDriver, nil
}

// ExecStream runs cmd in the running container id with its streams
// attached (engine.ExecStreamer), as the kubelet does over CRI: Exec gives
// the URL of the runtime's streaming server, which is then spoken to over
// SPDY. When ctx ends, the stream is closed.
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, streams engine.ExecStreams) (int, error) {
	st, err := r.ownContainer(ctx, id)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), err)
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return -1, fmt.Errorf("exec in %s: container is not running", shortID(id))
	}
	resp, err := r.rs.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: id,
		Cmd:         cmd,
		Tty:         streams.TTY,
		Stdin:       streams.Stdin != nil,
		Stdout:      streams.Stdout != nil,
		Stderr:      streams.Stderr != nil && !streams.TTY,
	})
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	u, err := url.Parse(resp.GetUrl())
	if err != nil {
		return -1, fmt.Errorf("exec in %s: the runtime's streaming URL: %w", shortID(id), err)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, u)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := remotecommand.StreamOptions{Stdin: streams.Stdin, Stdout: streams.Stdout, Tty: streams.TTY}
	if !streams.TTY {
		opts.Stderr = streams.Stderr
	}
	if streams.TTY && streams.Resize != nil {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: streams.Resize}
	}
	err = ex.StreamWithContext(ctx, opts)
	// client-go's own exit error, not k8s.io/utils/exec's.
	var exit clientexec.ExitError
	switch {
	case errors.As(err, &exit) && exit.Exited():
		return exit.ExitStatus(), nil
	case ctx.Err() != nil:
		return -1, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), ctx.Err())
	case err != nil:
		return -1, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), err)
	}
	return 0, nil
}

// sizeQueue is a remotecommand.TerminalSizeQueue over a channel of sizes;
// it stops (Next returns nil) when the channel closes or ctx ends.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan engine.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case <-q.ctx.Done():
		return nil
	case s, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	}
}
