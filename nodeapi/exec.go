package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/podrun/podrun/engine"
)

// ContainerExecer runs a command in a running container, found by its
// engine ID, with its streams attached: engine.ExecStreamer (both engines
// have it).
type ContainerExecer interface {
	ExecStream(ctx context.Context, id string, cmd []string, streams engine.ExecStreams) (exitCode int, err error)
}

const (
	// defaultStreamIdleTimeout is the kubelet's
	// streamingConnectionIdleTimeout: a stream with no traffic for this
	// long is closed.
	defaultStreamIdleTimeout = 4 * time.Hour
	// writeStatusTimeout bounds the write of a websocket stream's status.
	writeStatusTimeout = 10 * time.Second
	// maxRunOutput bounds the output /run holds until its command ends:
	// 16 MiB, the kubelet CRI client's gRPC message limit, at which
	// dockershim, containerd and CRI-O cap an ExecSync's output.
	maxRunOutput = 16 << 20
)

// errRunOutputLimit fails the write that would take a /run's output past
// maxRunOutput.
var errRunOutputLimit = fmt.Errorf("output exceeds %d MiB", maxRunOutput>>20)

// exec serves /exec/{namespace}/{pod}[/{uid}]/{container}?command=...
// as the kubelet's getExec: SPDY (channel.k8s.io v1 to v4) and WebSocket
// (channel.k8s.io, base64.channel.k8s.io, their v4, and v5.channel.k8s.io,
// which the kubelet serves by translating to SPDY). The pod and its running
// container are found before the upgrade, so that an unknown one is a 404
// and one that is not running a 400 the client reads.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	streamOpts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, status, err := s.execTarget(r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	s.serveStream(w, r, id, r.URL.Query()[v1.ExecCommandParam], streamOpts)
}

// run serves /run/{namespace}/{pod}[/{uid}]/{container}?cmd=..., as the
// kubelet's getRun: the command (split at spaces, as the kubelet splits
// it) runs without stdin, and its stdout and stderr are the response. A
// non-zero exit code is a 500, as the kubelet answers.
//
// The output is held until the command ends, so a command that writes
// more than maxRunOutput is stopped and answered with a 500 saying so, as
// the kubelet over dockershim answers (exec streams any amount). Its
// client sees nothing until then either, so the command is stopped, as an
// idle stream is closed, after the stream idle timeout (4 h by default,
// as long as the kubelet's server lets a request take).
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id, status, err := s.execTarget(r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	// The guard's write deadline runs from the request's start, and the
	// command's run is no write (over HTTP/2 a deadline that passes resets
	// the stream, written to or not): none while the command runs, which
	// its own timeout bounds, and the answer's from when it is written.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.StreamIdleTimeout)
	defer cancel()
	out := &runOutput{max: maxRunOutput, stop: cancel}
	code, err := s.opts.Exec.ExecStream(ctx, id, cmd, engine.ExecStreams{Stdout: out, Stderr: out})
	output, overflowed := out.end()
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	switch {
	case overflowed:
		err = fmt.Errorf("command %q stopped: its %w, the most /run holds (exec streams any amount)", cmd, errRunOutputLimit)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("command %q did not end within %s: %w", cmd, s.opts.StreamIdleTimeout, err)
	case err == nil && code != 0:
		err = fmt.Errorf("command %q exited with code %d: %s", cmd, code, output)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(output)
}

// runOutput holds a /run's stdout and stderr, in the order written, up to
// max bytes. The write that would pass max fails and stops the command
// (a runtime's stream may not pass the error on), so one that writes
// without end is not read for ever. Safe for concurrent use.
type runOutput struct {
	max  int
	stop context.CancelFunc

	mu         sync.Mutex
	buf        bytes.Buffer
	overflowed bool
	done       bool // end was called: no more writes
}

func (o *runOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.done:
		return 0, io.ErrClosedPipe
	case o.overflowed || o.buf.Len()+len(p) > o.max:
		o.overflowed = true
		o.stop()
		return 0, errRunOutputLimit
	}
	return o.buf.Write(p)
}

// end is the output held and whether more was written, once the command
// has ended.
func (o *runOutput) end() ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
	return o.buf.Bytes(), o.overflowed
}

// execTarget is the engine ID of the running container a /exec or /run
// request names, or the status and error to answer with.
func (s *Server) execTarget(r *http.Request) (id string, status int, err error) {
	ns, name, uid, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	pod := findPod(s.opts.Pods.Pods(), ns, name)
	if pod == nil || (uid != "" && string(pod.UID) != uid) {
		return "", http.StatusNotFound, fmt.Errorf("pod %q does not exist in namespace %q", name, ns)
	}
	if !hasContainer(pod, container) {
		return "", http.StatusNotFound, fmt.Errorf("container %q not found in pod %q", container, name)
	}
	id, err = runningContainerID(pod, container)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	return id, 0, nil
}

// runningContainerID is the engine ID of container's current run, from
// the pod's status, if it is running.
func runningContainerID(pod *v1.Pod, container string) (string, error) {
	cs := findStatus(pod, container)
	if cs == nil || cs.State.Running == nil {
		return "", fmt.Errorf("container %q in pod %q is not running", container, pod.Name)
	}
	id := engineID(cs.ContainerID)
	if id == "" {
		return "", fmt.Errorf("container %q in pod %q has no container ID", container, pod.Name)
	}
	return id, nil
}

// engineID is the engine's ID in a status's containerID
// ("docker://<id>").
func engineID(containerID string) string {
	if i := strings.Index(containerID, "://"); i >= 0 {
		return containerID[i+3:]
	}
	return containerID
}

// serveStream upgrades the request and runs cmd in container id over it.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, id string, cmd []string, opts *remotecommand.Options) {
	// The guard's write deadline is for plain responses; a stream lasts
	// as long as its command, bounded by the idle timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	executor := containerExecutor{engine: s.opts.Exec, id: id}
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		serveExecV5(w, r, executor, cmd, opts, s.opts.StreamIdleTimeout)
		return
	}
	remotecommand.ServeExec(w, r, executor, r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container"), cmd, opts,
		s.opts.StreamIdleTimeout, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// containerExecutor is a remotecommand.Executor over a ContainerExecer,
// for one container: a non-zero exit code is a utilexec.ExitError, which
// ServeExec reports as the kubelet does (a NonZeroExitCode status).
type containerExecutor struct {
	engine ContainerExecer
	id     string
}

func (e containerExecutor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	streams := engine.ExecStreams{TTY: tty}
	if in != nil {
		streams.Stdin = in
	}
	if out != nil {
		streams.Stdout = out
	}
	if errOut != nil {
		streams.Stderr = errOut
	}
	if resize != nil {
		ctx2, cancel := context.WithCancel(ctx)
		defer cancel()
		sizes := make(chan engine.TerminalSize)
		go forwardSizes(ctx2, resize, sizes)
		streams.Resize = sizes
	}
	code, err := e.engine.ExecStream(ctx, e.id, cmd, streams)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command %q exited with code %d", cmd, code), Code: code}
	}
	return nil
}

// forwardSizes passes the sizes of from on to until from closes or ctx
// ends, then closes to.
func forwardSizes(ctx context.Context, from <-chan remotecommand.TerminalSize, to chan<- engine.TerminalSize) {
	defer close(to)
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-from:
			if !ok {
				return
			}
			select {
			case to <- engine.TerminalSize{Width: s.Width, Height: s.Height}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// serveExecV5 serves a v5.channel.k8s.io WebSocket exec (the protocol of
// client-go's WebSocket executor, with the CLOSE signal that half-closes
// stdin), which ServeExec does not speak: the channels are v4's, and the
// status is written as v4 writes it.
func serveExecV5(w http.ResponseWriter, r *http.Request, executor containerExecutor, cmd []string, opts *remotecommand.Options, idle time.Duration) {
	channels := make([]wsstream.ChannelType, 5)
	channels[remotecommandconsts.StreamStdIn] = channelIf(opts.Stdin, wsstream.ReadChannel)
	channels[remotecommandconsts.StreamStdOut] = channelIf(opts.Stdout, wsstream.WriteChannel)
	channels[remotecommandconsts.StreamStdErr] = channelIf(opts.Stderr, wsstream.WriteChannel)
	channels[remotecommandconsts.StreamErr] = wsstream.WriteChannel
	channels[remotecommandconsts.StreamResize] = wsstream.ReadChannel
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommandconsts.StreamProtocolV5Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(idle)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		// Open has answered the client.
		return
	}
	defer conn.Close()
	// An empty message on the first writable channel tells the client the
	// streams are open.
	first := remotecommandconsts.StreamErr
	switch {
	case opts.Stdout:
		first = remotecommandconsts.StreamStdOut
	case opts.Stderr:
		first = remotecommandconsts.StreamStdErr
	}
	if _, err := streams[first].Write([]byte{}); err != nil {
		return
	}
	var resize chan remotecommand.TerminalSize
	if opts.TTY {
		resize = make(chan remotecommand.TerminalSize)
		go decodeSizes(r.Context(), streams[remotecommandconsts.StreamResize], resize)
	}
	var in io.Reader
	if opts.Stdin {
		in = streams[remotecommandconsts.StreamStdIn]
	}
	var out, errOut io.WriteCloser
	if opts.Stdout {
		out = streams[remotecommandconsts.StreamStdOut]
	}
	if opts.Stderr {
		errOut = streams[remotecommandconsts.StreamStdErr]
	}
	err = executor.ExecInContainer(r.Context(), "", "", "", cmd, in, out, errOut, opts.TTY, resize, 0)
	b, _ := json.Marshal(execStatus(err))
	conn.SetWriteDeadline(writeStatusTimeout)
	_, _ = streams[remotecommandconsts.StreamErr].Write(b)
}

func channelIf(open bool, t wsstream.ChannelType) wsstream.ChannelType {
	if open {
		return t
	}
	return wsstream.IgnoreChannel
}

// decodeSizes reads terminal sizes (JSON) from r until it ends or ctx
// does, then closes sizes.
func decodeSizes(ctx context.Context, r io.Reader, sizes chan<- remotecommand.TerminalSize) {
	defer close(sizes)
	dec := json.NewDecoder(r)
	for {
		var size remotecommand.TerminalSize
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case sizes <- size:
		case <-ctx.Done():
			return
		}
	}
}

// execStatus is the status an exec ends with, as ServeExec writes it: a
// non-zero exit code is a NonZeroExitCode failure carrying the code.
func execStatus(err error) metav1.Status {
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exit) && exit.Exited():
		return metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommandconsts.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exit),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type:    remotecommandconsts.ExitCodeCauseType,
				Message: fmt.Sprint(exit.ExitStatus()),
			}}},
		}
	}
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Reason:  metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("Internal error occurred: error executing command in container: %v", err),
		Code:    http.StatusInternalServerError,
	}
}
