package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/podrun/podrun/engine"
)

// ContainerLogs copies a container's output to stdout and stderr (nil
// discards). With opts.Follow it streams until the container stops or ctx is
// done, which is not an error. A TTY container has one stream, all of it
// going to stdout.
func (r *Runtime) ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) error {
	ins, err := r.inspect(ctx, id)
	if err != nil {
		return fmt.Errorf("logs %s: %w", shortID(id), wrap(err))
	}
	if ins.Config == nil || ins.Config.Labels[LabelNode] != r.node {
		return fmt.Errorf("logs %s: %w on node %s", shortID(id), engine.ErrNotFound, r.node)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	tail := "all"
	if opts.Tail >= 0 {
		tail = strconv.Itoa(opts.Tail)
	}
	lopts := container.LogsOptions{
		ShowStdout: true,
		ShowStderr: true,
		Follow:     opts.Follow,
		Tail:       tail,
		Timestamps: opts.Timestamps,
	}
	// Bounded until the stream opens: it lasts as long as ctx.
	rc, end, err := open(r, ctx, "logs of container "+shortID(ins.ID), func(ctx context.Context) (io.ReadCloser, error) {
		return r.cli.ContainerLogs(ctx, ins.ID, lopts)
	}, closeStream)
	if err != nil {
		return fmt.Errorf("logs %s: %w", shortID(id), wrap(err))
	}
	defer end()
	defer rc.Close()
	if ins.Config.Tty {
		_, err = io.Copy(stdout, rc)
	} else {
		if opts.Timestamps {
			stdout, stderr = &oneStampPerLine{w: stdout}, &oneStampPerLine{w: stderr}
		}
		_, err = stdcopy.StdCopy(stdout, stderr, rc)
	}
	if err != nil && opts.Follow && ctx.Err() != nil {
		return nil // following until ctx is done
	}
	if err != nil {
		return fmt.Errorf("logs %s: %w", shortID(id), err)
	}
	return nil
}

// oneStampPerLine passes on one stream of a non-TTY container's log with
// timestamps, one Docker message per Write (stdcopy writes a frame at a
// time, and the daemon a message a frame), keeping one timestamp per line:
// Docker splits a line of more than 16 KiB into messages and stamps each
// (moby/moby#37681), where the kubelet's logs stamp a line once (cri-client
// logs.ReadLogs). A message that continues an unfinished line loses its
// stamp, which Docker put there, so no text of the container's goes.
type oneStampPerLine struct {
	w       io.Writer
	partial bool // the last message did not end its line
}

func (s *oneStampPerLine) Write(p []byte) (int, error) {
	n := len(p)
	msg := p
	if s.partial {
		if sp := bytes.IndexByte(p[:min(len(p), 64)], ' '); sp > 0 {
			if _, err := time.Parse(time.RFC3339Nano, string(p[:sp])); err == nil {
				msg = p[sp+1:]
			}
		}
	}
	s.partial = n > 0 && p[n-1] != '\n'
	if _, err := s.w.Write(msg); err != nil {
		return 0, err
	}
	return n, nil
}
