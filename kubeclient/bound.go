package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// boundedRequests is an HTTP transport that bounds each request but a
// watch by timeout, from its sending to the end of its answer's body
// (which the caller reads after RoundTrip returns).
type boundedRequests struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (b *boundedRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return b.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), b.timeout)
	resp, err := b.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, b.explain(req.Context(), ctx, err)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, b: b, parent: req.Context(), ctx: ctx, cancel: cancel}
	return resp, nil
}

// explain says that err is the bound's doing, when it is (ctx, the
// request's bounded context, passed its deadline while its caller's,
// parent, goes on).
func (b *boundedRequests) explain(parent, ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return fmt.Errorf("no answer from the apiserver within %s: %w", b.timeout, err)
	}
	return err
}

// isWatch reports whether req asks for a watch (watch=true, as client-go
// asks), which streams for as long as it is open.
func isWatch(req *http.Request) bool {
	w, err := strconv.ParseBool(req.URL.Query().Get("watch"))
	return err == nil && w
}

// boundedBody is an answer's body read under its request's bound; the
// bound's timer ends with the body's Close.
type boundedBody struct {
	io.ReadCloser
	b           *boundedRequests
	parent, ctx context.Context
	cancel      context.CancelFunc
}

func (r *boundedBody) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = r.b.explain(r.parent, r.ctx, err)
	}
	return n, err
}

func (r *boundedBody) Close() error {
	defer r.cancel()
	return r.ReadCloser.Close()
}
