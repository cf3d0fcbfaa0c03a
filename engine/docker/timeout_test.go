package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podrun/podrun/engine"
)

// silentDocker is a Docker Engine API on a unix socket that takes every
// request and answers none but /_ping and those of answers (by "METHOD
// /path", without the version prefix): a deadlocked dockerd. It sends each
// request it holds to held, and lets them go at the end of the test.
type silentDocker struct {
	host string
	held chan string
	// dropped receives each held request whose client closed its
	// connection.
	dropped chan string
}

func newSilentDocker(t *testing.T, answers map[string]any) *silentDocker {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	d := &silentDocker{host: "unix://" + l.Addr().String(), held: make(chan string, 16), dropped: make(chan string, 16)}
	quit := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		call := req.Method + " " + apiPath.ReplaceAllString(req.URL.Path, "")
		if strings.HasSuffix(call, " /_ping") {
			w.Header().Set("Api-Version", "1.41")
			return
		}
		if a, ok := answers[call]; ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(a)
			return
		}
		d.held <- call
		// With the body read, the server watches the connection: its
		// close ends the request's context.
		_, _ = io.Copy(io.Discard, req.Body)
		select {
		case <-quit:
		case <-req.Context().Done(): // the client closed the connection
			d.dropped <- call
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		close(quit)
		srv.Close()
	})
	return d
}

// TestCallsDockerDoesNotAnswerTimeOut: a call that dockerd takes and never
// answers fails once the call timeout has passed (a stop's, once the
// timeout and the grace period have), with an error that names the call
// and says it timed out: not one that passes for "not found" or for an
// engine that cannot be reached, nor, for a remove, for an answer that
// left the container in place. Streams (an exec's attach, logs) are
// bounded until dockerd answers them; an exec's attach, which the Docker
// client makes on a connection of its own that no context ends, has that
// connection closed when it is given up.
func TestCallsDockerDoesNotAnswerTimeOut(t *testing.T) {
	t.Parallel()
	const (
		node    = "silent-node"
		quietID = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
		execID  = "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
	)
	d := newSilentDocker(t, map[string]any{
		// fullTestID is this node's: inspecting it is answered.
		"GET /containers/" + fullTestID + "/json": map[string]any{
			"Id": fullTestID, "Name": "/" + testObjectName, "Created": "2026-01-01T00:00:00Z",
			"State":  map[string]any{"Status": "running", "Running": true},
			"Config": map[string]any{"Labels": map[string]string{LabelNode: node, LabelContainerType: "app"}},
		},
		"POST /containers/" + fullTestID + "/exec": map[string]string{"Id": execID},
	})
	r, err := New(Options{NodeName: node, Host: d.host, Logger: testLogger(t), CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	for _, tc := range []struct {
		name string
		do   func(context.Context) error
		held string // the request dockerd holds
		want string // the error names the call and its bound
	}{
		{"list", func(ctx context.Context) error { _, err := r.ListContainers(ctx); return err },
			"GET /containers/json", "list containers: docker did not answer within 200ms"},
		{"inspect", func(ctx context.Context) error { return r.StartContainer(ctx, quietID) },
			"GET /containers/" + quietID + "/json", "inspect container fedcba987654: docker did not answer within 200ms"},
		{"start", func(ctx context.Context) error { return r.StartContainer(ctx, fullTestID) },
			"POST /containers/" + fullTestID + "/start", "start container 0123456789ab: docker did not answer within 200ms"},
		{"stop", func(ctx context.Context) error { return r.StopContainer(ctx, fullTestID, time.Second) },
			"POST /containers/" + fullTestID + "/stop", "stop container 0123456789ab: docker did not answer within 1.2s"},
		{"remove", func(ctx context.Context) error { return r.RemoveContainer(ctx, fullTestID) },
			"DELETE /containers/" + fullTestID, "remove container 0123456789ab: docker did not answer within 200ms"},
		{"image inspect", func(ctx context.Context) error { _, err := r.ImageStatus(ctx, "img:1"); return err },
			"GET /images/img:1/json", "inspect image img:1: docker did not answer within 200ms"},
		{"version", func(ctx context.Context) error { _, err := r.RuntimeVersion(ctx); return err },
			"GET /version", "docker version: docker did not answer within 200ms"},
		{"exec attach", func(ctx context.Context) error { _, _, err := r.Exec(ctx, fullTestID, []string{"true"}); return err },
			"POST /exec/" + execID + "/start", "attach to exec e0e1e2e3e4e5: docker did not answer within 200ms"},
		{"logs", func(ctx context.Context) error {
			return r.ContainerLogs(ctx, fullTestID, engine.LogOptions{Follow: true, Tail: -1}, nil, nil)
		}, "GET /containers/" + fullTestID + "/logs", "logs of container 0123456789ab: docker did not answer within 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The only guard against a call that waits for good: the
			// error is then this context's, which names no call.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := tc.do(ctx)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one that says %q", err, tc.want)
			}
			if call, _, _ := strings.Cut(tc.want, ": docker did not answer"); strings.Count(err.Error(), call) != 1 {
				t.Errorf("error %v: want it to name %q once", err, call)
			}
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrUnavailable) {
				t.Errorf("error %v: want context.DeadlineExceeded, neither ErrNotFound nor ErrUnavailable", err)
			}
			var rerr *RemovalError
			if errors.As(err, &rerr) {
				t.Errorf("error %v: a remove dockerd did not answer is no RemovalError", err)
			}
			select {
			case held := <-d.held:
				if held != tc.held {
					t.Errorf("dockerd held %s, want %s", held, tc.held)
				}
			case <-ctx.Done():
				t.Fatalf("dockerd held no request; want %s", tc.held)
			}
			if tc.name != "exec attach" {
				return
			}
			for {
				select {
				case call := <-d.dropped:
					if call == tc.held {
						return
					}
				case <-ctx.Done():
					t.Fatalf("the connection of %s, given up, is still open", tc.held)
				}
			}
		})
	}
}

// TestStopBoundIsTheTimeoutAndTheGrace: Docker answers a stop once the
// container has stopped, the grace period (in Docker's whole seconds) at
// the latest: that is added to the call timeout, as the kubelet bounds its
// StopContainer.
func TestStopBoundIsTheTimeoutAndTheGrace(t *testing.T) {
	r, err := New(Options{NodeName: "n", CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for grace, want := range map[time.Duration]time.Duration{
		0:                       10 * time.Second,
		time.Second:             11 * time.Second,
		1500 * time.Millisecond: 12 * time.Second,
		30 * time.Second:        40 * time.Second,
	} {
		if got := r.stopBound(grace); got != want {
			t.Errorf("stop bound with grace %s = %s, want %s", grace, got, want)
		}
	}
}

// TestCallTimeoutDefault: no CallTimeout is the kubelet's 2 minutes.
func TestCallTimeoutDefault(t *testing.T) {
	r, err := New(Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.callTimeout != engine.DefaultRequestTimeout || engine.DefaultRequestTimeout != 2*time.Minute {
		t.Errorf("call timeout %s, want 2m0s", r.callTimeout)
	}
}
