package docker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/podrun/podrun/engine"
)

var (
	_ engine.Execer       = (*Runtime)(nil)
	_ engine.ExecStreamer = (*Runtime)(nil)
)

// MaxExecOutput bounds what Exec returns of a command's output; the rest is
// read and dropped.
const MaxExecOutput = 16 << 10

// Exec runs cmd in a running container (as its user, in its working
// directory, with its environment) and returns its exit code and its
// stdout and stderr together, at most MaxExecOutput bytes of them. A command
// that cannot be run (not found, say) is a non-zero exit code (126, 127) and
// the runtime's message as output, as with `docker exec`. When ctx ends
// first, Exec returns ctx's error; Docker cannot kill an exec, so the
// command may run on.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string) (int, []byte, error) {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return -1, nil, fmt.Errorf("exec in %s: %w", shortID(id), err)
	}
	ex, err := r.execCreate(ctx, full, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, nil, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	resp, end, err := r.execAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, nil, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	defer end()
	defer resp.Close()
	// The stream does not watch ctx: closing the connection ends the read.
	stop := context.AfterFunc(ctx, resp.Close)
	defer stop()

	out := &boundedBuffer{max: MaxExecOutput}
	_, err = stdcopy.StdCopy(out, out, resp.Reader)
	if ctx.Err() != nil {
		return -1, out.b, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), ctx.Err())
	}
	if err != nil {
		return -1, out.b, fmt.Errorf("exec %q in %s: reading output: %w", cmd, shortID(id), err)
	}
	code, err := r.execExitCode(ctx, ex.ID)
	if err != nil {
		return -1, out.b, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), err)
	}
	return code, out.b, nil
}

// execExitCode is the exit code of the exec execID, whose output has
// ended: the output ends when the process does; its exit code follows
// shortly.
func (r *Runtime) execExitCode(ctx context.Context, execID string) (int, error) {
	for {
		ins, err := answer(r, ctx, "inspect exec "+shortID(execID), func(ctx context.Context) (container.ExecInspect, error) {
			return r.cli.ContainerExecInspect(ctx, execID)
		})
		if err != nil {
			return -1, wrap(err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ExecStream runs cmd in a running container with its streams attached
// (engine.ExecStreamer). Docker cannot kill an exec, so when ctx ends
// first the command may run on (with its streams closed).
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, streams engine.ExecStreams) (int, error) {
	full, err := r.own(ctx, id, false)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), err)
	}
	ex, err := r.execCreate(ctx, full, container.ExecOptions{
		Cmd:          cmd,
		Tty:          streams.TTY,
		AttachStdin:  streams.Stdin != nil,
		AttachStdout: streams.Stdout != nil,
		AttachStderr: streams.Stderr != nil && !streams.TTY,
	})
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	resp, end, err := r.execAttach(ctx, ex.ID, container.ExecAttachOptions{Tty: streams.TTY})
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	defer end()
	defer resp.Close()
	stop := context.AfterFunc(ctx, resp.Close)
	defer stop()

	done := make(chan struct{})
	defer close(done)
	if streams.Stdin != nil {
		// Ends when Stdin does (the caller closes it) or, once the exec
		// has ended, at its next write to the closed connection.
		go func() {
			_, err := io.Copy(resp.Conn, streams.Stdin)
			if err == nil {
				err = resp.CloseWrite()
			}
			if err != nil {
				r.log.Debug("exec stdin ended", "container", shortID(id), "exec", shortID(ex.ID), "err", err)
			}
		}()
	}
	if streams.TTY && streams.Resize != nil {
		go r.resizeExec(ctx, ex.ID, streams.Resize, done)
	}

	stdout, stderr := orDiscard(streams.Stdout), orDiscard(streams.Stderr)
	if streams.TTY {
		_, err = io.Copy(stdout, resp.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, resp.Reader)
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), ctx.Err())
	}
	if err != nil {
		return -1, fmt.Errorf("exec %q in %s: copying output: %w", cmd, shortID(id), err)
	}
	code, err := r.execExitCode(ctx, ex.ID)
	if err != nil {
		return -1, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), err)
	}
	return code, nil
}

// execCreate makes an exec of opts in the container id.
func (r *Runtime) execCreate(ctx context.Context, id string, opts container.ExecOptions) (container.ExecCreateResponse, error) {
	return answer(r, ctx, "create exec in container "+shortID(id), func(ctx context.Context) (container.ExecCreateResponse, error) {
		return r.cli.ContainerExecCreate(ctx, id, opts)
	})
}

// execAttach starts the exec execID with its streams attached, bounded
// until dockerd answers (open); end is to be called once the streams are
// done with.
func (r *Runtime) execAttach(ctx context.Context, execID string, opts container.ExecAttachOptions) (resp types.HijackedResponse, end func(), err error) {
	return open(r, ctx, "attach to exec "+shortID(execID), func(ctx context.Context) (types.HijackedResponse, error) {
		return r.cli.ContainerExecAttach(context.WithValue(ctx, hijacking{}, true), execID, opts)
	}, func(h types.HijackedResponse) { h.Close() })
}

// resizeExec applies the terminal sizes of sizes to the exec execID until
// sizes closes, the exec is done or ctx ends.
func (r *Runtime) resizeExec(ctx context.Context, execID string, sizes <-chan engine.TerminalSize, done <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case size, ok := <-sizes:
			if !ok {
				return
			}
			err := r.call(ctx, "resize exec "+shortID(execID), func(ctx context.Context) error {
				return r.cli.ContainerExecResize(ctx, execID, container.ResizeOptions{Height: uint(size.Height), Width: uint(size.Width)})
			})
			if err != nil {
				// The process may have ended, or not yet started its terminal.
				r.log.Debug("exec resize", "exec", shortID(execID), "err", err)
			}
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// boundedBuffer keeps the first max bytes written to it and drops the rest
// (reporting them written, so that the copy goes on to the end).
type boundedBuffer struct {
	max int
	b   []byte
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
