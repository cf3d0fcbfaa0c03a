// Package health runs the kubelet's container handlers: lifecycle hooks now,
// probes (exec, httpGet, tcpSocket, grpc) on the same handlers. It knows
// nothing of podrun's runtime beyond the small interface it defines.
package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Execer runs a command in a running container and returns its exit code
// and (bounded) output.
type Execer interface {
	Exec(ctx context.Context, containerID string, cmd []string) (exitCode int, output []byte, err error)
}

// Target is the container a handler acts on.
type Target struct {
	ContainerID string
	// PodIP is where httpGet, tcpSocket and grpc handlers connect when they
	// name no host.
	PodIP     string
	Container *v1.Container
	Exec      Execer
	// OnHTTPFallback, when set, is told the host:port of an HTTPS httpGet
	// hook that a plain HTTP server answered and that then passed over
	// HTTP, for the kubelet's LifecycleHTTPFallback warning.
	OnHTTPFallback func(host string)
}

// maxBody is how much of an HTTP answer or exec output is kept for a
// message, as the kubelet keeps 10 KiB.
const maxBody = 10 << 10

// RunHook runs a lifecycle hook (postStart or preStop) to completion or
// until ctx ends. An error says why the hook failed: an exec command that
// exited non-zero, an httpGet that got no answer (any status passes, as
// in the kubelet), a sleep cut short.
func RunHook(ctx context.Context, t Target, h *v1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		code, out, err := runExec(ctx, t, h.Exec.Command)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), code, trim(out))
		}
		return nil
	case h.HTTPGet != nil:
		return runHTTPHook(ctx, t, h.HTTPGet)
	case h.Sleep != nil:
		timer := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			// As the kubelet's: a sleep cut short is a failed hook.
			return fmt.Errorf("sleep of %ds cut short: %w", h.Sleep.Seconds, ctx.Err())
		}
	}
	return errors.New("hook names no handler")
}

// runHTTPHook runs an httpGet hook as the kubelet does: only a failed
// exchange fails it, whatever status the answer has and whether or not
// its body can be read; an HTTPS request that a plain HTTP server answered
// is sent again over HTTP, without its Authorization header.
func runHTTPHook(ctx context.Context, t Target, g *v1.HTTPGetAction) error {
	_, _, err := doHTTPGet(ctx, t, g, hookUserAgent)
	if err == nil || isBodyError(err) {
		return nil
	}
	if !gotHTTPAnswerToHTTPS(err) {
		return err
	}
	plain := *g
	plain.Scheme = v1.URISchemeHTTP
	plain.HTTPHeaders = slices.DeleteFunc(slices.Clone(g.HTTPHeaders), func(h v1.HTTPHeader) bool {
		return http.CanonicalHeaderKey(h.Name) == "Authorization"
	})
	if _, _, perr := doHTTPGet(ctx, t, &plain, hookUserAgent); perr != nil && !isBodyError(perr) {
		return err
	}
	if t.OnHTTPFallback != nil {
		if u, uerr := httpGetURL(t, &plain); uerr == nil {
			t.OnHTTPFallback(u.Host)
		}
	}
	return nil
}

// gotHTTPAnswerToHTTPS reports whether err is net/http's for an HTTPS
// request that a plain HTTP server answered.
func gotHTTPAnswerToHTTPS(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client")
}

func runExec(ctx context.Context, t Target, cmd []string) (int, []byte, error) {
	if t.Exec == nil {
		return 0, nil, errors.New("exec handlers are not supported by this runtime")
	}
	code, out, err := t.Exec.Exec(ctx, t.ContainerID, cmd)
	if err != nil {
		return 0, nil, fmt.Errorf("exec %q: %w", strings.Join(cmd, " "), err)
	}
	return code, out, nil
}

// resolvePort turns a port number or a container port's name into a
// number, as the kubelet does: a name is looked up in the container's ports
// first, then read as a number; the result must be in 1-65535.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := 0
	switch p.Type {
	case intstr.Int:
		port = int(p.IntVal)
	case intstr.String:
		found := false
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					port, found = int(cp.ContainerPort), true
					break
				}
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return 0, fmt.Errorf("no container port named %q", p.StrVal)
			}
			port = n
		}
	default:
		return 0, fmt.Errorf("port %v is neither a number nor a name", p)
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("port %d is out of range", port)
	}
	return port, nil
}

// httpGetURL builds the URL of an httpGet handler, as the kubelet does.
func httpGetURL(t Target, g *v1.HTTPGetAction) (*url.URL, error) {
	port, err := resolvePort(g.Port, t.Container)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = t.PodIP
	}
	if host == "" {
		return nil, errors.New("the pod has no IP yet")
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	// The path is parsed alone, and one that does not parse is sent as it
	// is (escaped), as the kubelet's formatURL does: the API server took it.
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	// The kubelet's request from u.String() fails for some hosts (the API
	// server does not validate httpGet.host): no request, and a probe run
	// that counts neither way, not a failure.
	if _, err := url.Parse(u.String()); err != nil {
		return nil, fmt.Errorf("httpGet URL: %w", err)
	}
	return u, nil
}

// User agents sent by HTTP handlers when the handler sets none, shaped as
// the kubelet's (kube-probe/..., kube-lifecycle/...) so that servers that
// recognise probes by their user agent recognise podrun's too.
const (
	probeUserAgent = "kube-probe/podrun"
	hookUserAgent  = "kube-lifecycle/podrun"
)

// httpTransport is shared by every httpGet handler. HTTPS is not verified,
// as the kubelet does not verify probe targets, and offers HTTP/2, as the
// kubelet's transport does (a transport with its own TLS config speaks
// only HTTP/1.1 unless told); no proxy is used; no connection is kept.
var httpTransport = &http.Transport{
	TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes do not verify, as the kubelet's
	ForceAttemptHTTP2:  true,
	DisableKeepAlives:  true,
	DisableCompression: true,
	Proxy:              nil,
	DialContext:        (&net.Dialer{}).DialContext,
}

// httpClient follows redirects only to the same host, as the kubelet does:
// a redirect elsewhere ends the exchange with the 3xx answer; more than 10
// redirects are an error.
var httpClient = &http.Client{
	Transport: httpTransport,
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	},
}

// httpGetHeader builds the request headers of an httpGet handler as the
// kubelet does: the handler's headers, then User-Agent and Accept (*/*)
// unless the handler sets them; an Accept set to "" is not sent.
func httpGetHeader(hs []v1.HTTPHeader, userAgent string) http.Header {
	h := make(http.Header, len(hs)+2)
	for _, x := range hs {
		h.Add(x.Name, x.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	return h
}

// doHTTPGet performs an httpGet handler until it answers or ctx ends, and
// returns the status and the start of the body (at most maxBody bytes). A
// Host header in the handler sets the request's Host.
func doHTTPGet(ctx context.Context, t Target, g *v1.HTTPGetAction, userAgent string) (int, []byte, error) {
	u, err := httpGetURL(t, g)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header = httpGetHeader(g.HTTPHeaders, userAgent)
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, nil, &bodyError{url: u.Redacted(), err: err}
	}
	return resp.StatusCode, body, nil
}

// bodyError is an answer's body that could not be read (cut short, or
// stalled past the timeout) after its status came. The kubelet tells it
// from a failed exchange: a probe run that meets it is discarded, not a
// failure, and a hook that meets it has passed.
type bodyError struct {
	url string
	err error
}

func (e *bodyError) Error() string {
	return fmt.Sprintf("HTTP GET %s: reading the answer: %v", e.url, e.err)
}

func (e *bodyError) Unwrap() error { return e.err }

// isBodyError reports whether err is a *bodyError.
func isBodyError(err error) bool {
	var be *bodyError
	return errors.As(err, &be)
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1024 {
		s = s[:1024] + "..."
	}
	return s
}
