package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/expansion"
)

// Result is what a probe says about a container.
type Result int

const (
	// Unknown: the probe could not be run (an unresolvable port, no pod IP,
	// the runtime failed to exec). Like the kubelet, the manager does not
	// count it either way.
	Unknown Result = iota
	// Success: the container passed the probe.
	Success
	// Warning: the container passed, with something to say (an HTTP
	// redirect to another host, not followed). It counts as Success.
	Warning
	// Failure: the container failed the probe.
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// defaultProbeTimeout is timeoutSeconds' default (and minimum).
const defaultProbeTimeout = time.Second

// probeTimeout is how long one run of p may take.
func probeTimeout(p *v1.Probe) time.Duration {
	if p.TimeoutSeconds <= 0 {
		return defaultProbeTimeout
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}

// RunProbe runs p once against t, within p.TimeoutSeconds (1 s when unset)
// or until ctx ends, as the kubelet's handlers do:
//   - exec: exit code 0 is Success, any other Failure (the message is the
//     command's output); a command that outlives the timeout is a Failure.
//     $(VAR) in the command expands from the container's env values.
//   - httpGet: 200-399 is Success (a redirect to another host is not
//     followed and is a Warning), anything else a Failure, as is a failed
//     exchange or a timeout. HTTPS is not verified.
//   - tcpSocket: a connection opened within the timeout is Success.
//   - grpc: grpc.health.v1.Health/Check (insecure) answering SERVING is
//     Success; any other answer, error or timeout is a Failure. Like the
//     kubelet's blocking dial, a connection that fails (refused, reset) is
//     tried again until the timeout.
//
// The message says why a probe failed, in the kubelet's words ("HTTP probe
// failed with statuscode: 500"). err is set, with Result Unknown, only when
// the probe could not be run at all.
func RunProbe(ctx context.Context, t Target, p *v1.Probe) (Result, string, error) {
	timeout := probeTimeout(p)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		return probeExec(ctx, t, p.Exec.Command)
	case p.HTTPGet != nil:
		return probeHTTPGet(ctx, t, p.HTTPGet)
	case p.TCPSocket != nil:
		return probeTCP(ctx, t, p.TCPSocket)
	case p.GRPC != nil:
		return probeGRPC(ctx, t, p.GRPC, timeout)
	}
	return Unknown, "", errors.New("probe names no handler")
}

// probeExec runs an exec probe; ctx carries the probe's timeout.
func probeExec(ctx context.Context, t Target, command []string) (Result, string, error) {
	cmd, err := expandProbeCommand(command, t.Container)
	if err != nil {
		// A command that no process could be given fails every time.
		return Failure, fmt.Sprintf("command%v", err), nil
	}
	code, out, err := runExec(ctx, t, cmd)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
		}
		return Unknown, "", err
	}
	if code != 0 {
		msg := trim(out)
		if msg == "" {
			msg = fmt.Sprintf("command %q exited with %d", strings.Join(cmd, " "), code)
		}
		return Failure, msg, nil
	}
	return Success, trim(out), nil
}

// probeHTTPGet runs an httpGet probe; ctx carries the probe's timeout.
func probeHTTPGet(ctx context.Context, t Target, g *v1.HTTPGetAction) (Result, string, error) {
	if _, err := httpGetURL(t, g); err != nil {
		return Unknown, "", err
	}
	code, body, err := doHTTPGet(ctx, t, g, probeUserAgent)
	switch {
	case isBodyError(err):
		// The kubelet's prober returns this as an error: the run is
		// discarded (after its retries), not counted as a failure.
		return Unknown, "", err
	case err != nil:
		return Failure, err.Error(), nil
	case code >= 200 && code < 300:
		return Success, trim(body), nil
	case code >= 300 && code < 400:
		return Warning, "Probe terminated redirects, Response body: " + trim(body), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code), nil
}

// probeTCP runs a tcpSocket probe; ctx carries the probe's timeout.
func probeTCP(ctx context.Context, t Target, s *v1.TCPSocketAction) (Result, string, error) {
	port, err := resolvePort(s.Port, t.Container)
	if err != nil {
		return Unknown, "", err
	}
	host := s.Host
	if host == "" {
		host = t.PodIP
	}
	if host == "" {
		return Unknown, "", errors.New("the pod has no IP yet")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}

// probeGRPC runs a grpc probe against the pod IP; ctx carries the probe's
// timeout, which the messages name.
func probeGRPC(ctx context.Context, t Target, g *v1.GRPCAction, timeout time.Duration) (Result, string, error) {
	if g.Port <= 0 || g.Port > 65535 {
		return Unknown, "", fmt.Errorf("port %d is out of range", g.Port)
	}
	if t.PodIP == "" {
		return Unknown, "", errors.New("the pod has no IP yet")
	}
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(probeUserAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err), nil
	}
	defer conn.Close()

	// WaitForReady: a server that refuses or drops the first connection
	// (one still starting, say) is dialled again within the timeout, as
	// the kubelet's grpc.WithBlock dial does; failing fast made the
	// liveness probe of a healthy server fail (conformance: *not*
	// restarted with a GRPC liveness probe).
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.Unimplemented:
			return Failure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message(), nil
		case codes.DeadlineExceeded:
			if conn.GetState() != connectivity.Ready {
				return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %v", addr, timeout, ctx.Err()), nil
			}
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// expandProbeCommand expands $(VAR) in an exec probe's command from the
// container's env, as the kubelet does for probes: only the values written
// in the spec are known (a valueFrom variable expands to ""), $$ is a
// literal $, and an unknown reference is left as it is.
func expandProbeCommand(cmd []string, c *v1.Container) ([]string, error) {
	env := map[string]string{}
	if c != nil {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	return expansion.All(cmd, func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}, &expansion.Budget{})
}
