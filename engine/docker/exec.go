package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/podrun/podrun/engine"
)

var _ engine.Execer = (*Runtime)(nil)

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
	ex, err := r.cli.ContainerExecCreate(ctx, full, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, nil, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
	resp, err := r.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, nil, fmt.Errorf("exec in %s: %w", shortID(id), wrap(err))
	}
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
	// The output ends when the process does; its exit code follows shortly.
	for {
		ins, err := r.cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return -1, out.b, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), wrap(err))
		}
		if !ins.Running {
			return ins.ExitCode, out.b, nil
		}
		select {
		case <-ctx.Done():
			return -1, out.b, fmt.Errorf("exec %q in %s: %w", cmd, shortID(id), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
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
