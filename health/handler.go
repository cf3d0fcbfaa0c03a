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
}

// maxBody is how much of an HTTP answer or exec output is kept for a
// message, as the kubelet keeps 10 KiB.
const maxBody = 10 << 10

// RunHook runs a lifecycle hook (postStart or preStop) to completion or
// until ctx ends. An error says why the hook failed.
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
		status, body, err := doHTTPGet(ctx, t, h.HTTPGet)
		if err != nil {
			return err
		}
		if status < 200 || status >= 400 {
			return fmt.Errorf("HTTP GET answered %d: %s", status, trim(body))
		}
		return nil
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return nil
	}
	return errors.New("hook names no handler")
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

// resolvePort turns a port number or a container port's name into a number.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d is out of range", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
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
	path := g.Path
	if path == "" {
		path = "/"
	} else if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, fmt.Errorf("httpGet URL: %w", err)
	}
	return u, nil
}

// doHTTPGet performs an httpGet handler and returns the status and the
// start of the body. HTTPS is not verified, as the kubelet does not verify
// probe targets; redirects are followed only to the same host.
func doHTTPGet(ctx context.Context, t Target, g *v1.HTTPGetAction) (int, []byte, error) {
	u, err := httpGetURL(t, g)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("User-Agent", "podrun-probe/1")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes do not verify, as the kubelet's
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 || req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("HTTP GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, body, nil
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1024 {
		s = s[:1024] + "..."
	}
	return s
}
