package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Every Engine API call that is a request and its answer runs under the
// runtime's call timeout (Options.CallTimeout, the kubelet's
// --runtime-request-timeout): a dockerd that takes a request and never
// answers it (deadlocked, or its answer lost) would otherwise hold the
// caller, a pod worker's sync say, for good. As in the kubelet's CRI
// client, pulls have their own bound (PullProgressDeadline), a stop's
// bound is the timeout plus its grace period, and a stream is bounded
// until dockerd's answer opens it, not after (open): its life is its
// caller's. The event stream and an image import (whose request is the
// upload) are not bounded at all.

// noAnswerError is a call dockerd did not answer within its bound. It is
// context.DeadlineExceeded, and neither a "not found" nor an unreachable
// engine: dockerd took the request.
type noAnswerError struct {
	call  string
	bound time.Duration
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("%s: docker did not answer within %s: %v", e.call, e.bound, context.DeadlineExceeded)
}

// Unwrap makes it context.DeadlineExceeded. The HTTP transport fails the
// request with the context's cause, this: the Docker client returns it as
// is only when it is DeadlineExceeded, and would otherwise take it for a
// failure to connect (which wrap makes ErrUnavailable).
func (e *noAnswerError) Unwrap() error { return context.DeadlineExceeded }

// timedOut reports whether err is (or wraps) a call that dockerd did not
// answer in time.
func timedOut(err error) bool {
	var t *noAnswerError
	return errors.As(err, &t)
}

// failed is err, of an operation named what, with what in front; but for
// a call by that name that dockerd did not answer, whose error says what
// already.
func failed(what string, err error) error {
	var t *noAnswerError
	if errors.As(err, &t) && t.call == what {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// call runs fn, one request-and-answer call of the Engine API named what
// ("inspect container 0123456789ab"), under the call timeout.
func (r *Runtime) call(ctx context.Context, what string, fn func(context.Context) error) error {
	return callWithin(ctx, what, r.callTimeout, fn)
}

// callWithin runs fn with a context that ends bound after ctx's start, at
// the latest. When that bound ends it, the error is a *noAnswerError naming
// the call; any other error is fn's.
func callWithin(ctx context.Context, what string, bound time.Duration, fn func(context.Context) error) error {
	timeout := &noAnswerError{call: what, bound: bound}
	cctx, cancel := context.WithTimeoutCause(ctx, bound, timeout)
	defer cancel()
	err := fn(cctx)
	if err != nil && context.Cause(cctx) == error(timeout) {
		return timeout
	}
	return err
}

// answer is call for a call that returns a value.
func answer[T any](r *Runtime, ctx context.Context, what string, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := r.call(ctx, what, func(ctx context.Context) (err error) {
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// open runs fn, an Engine API call named what that opens a stream, with
// the call timeout bounding the call until fn returns (dockerd answered,
// and the stream began), not the stream. fn's context is ctx until end is
// called, which the caller does once done with the stream. When the
// timeout, or ctx, ends first, open returns at once with that error: an
// exec's attach waits for dockerd's answer whatever its context says (a
// hijacked connection), so fn is left to return in its own time, and the
// stream it may open then is closed with drop.
func open[S any](r *Runtime, ctx context.Context, what string, fn func(context.Context) (S, error), drop func(S)) (s S, end func(), err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	type opened struct {
		s   S
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := fn(sctx)
		done <- opened{s, err}
	}()
	abandon := func(err error) (S, func(), error) {
		cancel(err)
		go func() {
			if o := <-done; o.err == nil {
				drop(o.s)
			}
		}()
		var none S
		return none, func() {}, err
	}
	timer := time.NewTimer(r.callTimeout)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.err != nil {
			cancel(nil)
			return o.s, func() {}, o.err
		}
		return o.s, func() { cancel(nil) }, nil
	case <-timer.C:
		return abandon(&noAnswerError{call: what, bound: r.callTimeout})
	case <-ctx.Done():
		return abandon(ctx.Err())
	}
}

// hijacking marks the context of a call that hijacks its connection (an
// exec's attach): closeHijackedOnCancel closes that connection when the
// context ends.
type hijacking struct{}

// closeHijackedOnCancel is a client option that makes a hijacked call's
// connection end with its context. The Docker client writes such a call
// and waits for its answer on a connection of its own, whatever the
// context says: a call open gave up on (dockerd never answered) would hold
// its goroutine and its connection for as long as dockerd stays silent,
// one more at each exec probe's period. Closing the connection ends the
// wait. Other calls go through the HTTP transport, whose pooled connections
// outlive their requests' contexts: they are not touched. (A TLS
// connection is dialled without the transport's dialer, so without this.)
func closeHijackedOnCancel(c *client.Client) error {
	tr, ok := c.HTTPClient().Transport.(*http.Transport)
	if !ok || tr.DialContext == nil {
		return nil
	}
	dial := tr.DialContext
	return client.WithDialContext(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil && ctx.Value(hijacking{}) != nil {
			context.AfterFunc(ctx, func() { _ = conn.Close() })
		}
		return conn, err
	})(c)
}

// closeStream drops a stream open gave up on.
func closeStream(rc io.ReadCloser) { _ = rc.Close() }

// stopBound bounds a stop with grace: Docker answers once the container
// has stopped, which may take the whole grace period (rounded up, as
// Docker counts it) before its SIGKILL; the kubelet's StopContainer waits
// its runtime request timeout plus the grace period.
func (r *Runtime) stopBound(grace time.Duration) time.Duration {
	return r.callTimeout + time.Duration(graceSeconds(grace))*time.Second
}

// The calls made from more than one place.

// inspect inspects the container ref (an ID or a name).
func (r *Runtime) inspect(ctx context.Context, ref string) (container.InspectResponse, error) {
	name := ref
	if len(name) == 64 {
		name = shortID(name) // an ID
	}
	return answer(r, ctx, "inspect container "+name, func(ctx context.Context) (container.InspectResponse, error) {
		return r.cli.ContainerInspect(ctx, ref)
	})
}

// inspectImage inspects the image ref.
func (r *Runtime) inspectImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	return answer(r, ctx, "inspect image "+ref, func(ctx context.Context) (image.InspectResponse, error) {
		return r.cli.ImageInspect(ctx, ref)
	})
}

// listContainers lists containers (of every node and none, unless opts
// filters).
func (r *Runtime) listContainers(ctx context.Context, opts container.ListOptions) ([]container.Summary, error) {
	return answer(r, ctx, "list containers", func(ctx context.Context) ([]container.Summary, error) {
		return r.cli.ContainerList(ctx, opts)
	})
}

// create creates a container, named name unless it is "".
func (r *Runtime) create(ctx context.Context, config *container.Config, hc *container.HostConfig, name string) (container.CreateResponse, error) {
	what := "create container"
	if name != "" {
		what += " " + name
	}
	return answer(r, ctx, what, func(ctx context.Context) (container.CreateResponse, error) {
		return r.cli.ContainerCreate(ctx, config, hc, nil, nil, name)
	})
}

// start starts the container id.
func (r *Runtime) start(ctx context.Context, id string) error {
	return r.call(ctx, "start container "+shortID(id), func(ctx context.Context) error {
		return r.cli.ContainerStart(ctx, id, container.StartOptions{})
	})
}

// removeForce force-removes the container id and its anonymous volumes.
func (r *Runtime) removeForce(ctx context.Context, id string) error {
	return r.call(ctx, "remove container "+shortID(id), func(ctx context.Context) error {
		return r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
}

// ping asks dockerd's /_ping.
func (r *Runtime) ping(ctx context.Context) (types.Ping, error) {
	return answer(r, ctx, "ping", r.cli.Ping)
}
