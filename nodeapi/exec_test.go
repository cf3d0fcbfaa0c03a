package nodeapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/podrun/podrun/engine"
)

// fakeExecer is a ContainerExecer that acts out a few commands:
// "echo WORDS" (stdout), "warn WORDS" (stderr), "cat" (stdin to stdout),
// "exit N", and "size" (waits for a terminal size and writes it).
type fakeExecer struct {
	mu  sync.Mutex
	ids []string
}

func (f *fakeExecer) ExecStream(ctx context.Context, id string, cmd []string, s engine.ExecStreams) (int, error) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	if len(cmd) == 0 {
		return -1, errors.New("no command")
	}
	write := func(w io.Writer, text string) error {
		if w == nil {
			return errors.New("stream not attached")
		}
		_, err := io.WriteString(w, text)
		return err
	}
	switch cmd[0] {
	case "echo":
		return 0, write(s.Stdout, strings.Join(cmd[1:], " ")+"\n")
	case "warn":
		return 0, write(s.Stderr, strings.Join(cmd[1:], " ")+"\n")
	case "cat":
		if s.Stdin == nil || s.Stdout == nil {
			return -1, errors.New("stdin or stdout not attached")
		}
		_, err := io.Copy(s.Stdout, s.Stdin)
		return 0, err
	case "exit":
		var code int
		fmt.Sscan(cmd[1], &code)
		return code, nil
	case "size":
		select {
		case size, ok := <-s.Resize:
			if !ok {
				return -1, errors.New("resize closed")
			}
			return 0, write(s.Stdout, fmt.Sprintf("%dx%d tty=%v\n", size.Width, size.Height, s.TTY))
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	return 127, nil
}

func (f *fakeExecer) lastID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ids) == 0 {
		return ""
	}
	return f.ids[len(f.ids)-1]
}

// restConfig is the apiserver's kubelet client as client-go config: a
// certificate of the cluster CA for user, trusting the node's
// self-signed certificate.
func (h *harness) restConfig(user string, groups ...string) *rest.Config {
	h.t.Helper()
	cert := h.ca.client(h.t, user, groups...)
	key, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		h.t.Fatal(err)
	}
	nodeCert, err := os.ReadFile(filepath.Join(h.dir, "root", SelfSignedCertFile))
	if err != nil {
		h.t.Fatal(err)
	}
	return &rest.Config{Host: h.base, TLSClientConfig: rest.TLSClientConfig{
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}),
		CAData:   nodeCert,
	}}
}

// execURL is the URL the apiserver dials for an exec of cmd in
// default/web-node1's app container (the kubelet's query: input, output,
// error, tty).
func (h *harness) execURL(pod, container string, stdin, tty bool, cmd ...string) *url.URL {
	q := url.Values{"output": {"1"}}
	if !tty {
		q.Set("error", "1")
	}
	if stdin {
		q.Set("input", "1")
	}
	if tty {
		q.Set("tty", "1")
	}
	q["command"] = cmd
	u, err := url.Parse(h.base + "/exec/default/" + pod + "/" + container + "?" + q.Encode())
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

type execProtocol struct {
	name string
	new  func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error)
}

// execProtocols are the two ways a client execs: SPDY (what the apiserver
// speaks to a node) and WebSocket v5 (client-go's, kubectl's default).
var execProtocols = []execProtocol{
	{"SPDY", func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	}},
	{"WebSocket", func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	}},
}

func newExecHarness(t *testing.T) (*harness, *fakeExecer) {
	ex := &fakeExecer{}
	h := newHarness(t, func(o *Options) { o.Exec = ex })
	return h, ex
}

func TestExec(t *testing.T) {
	h, ex := newExecHarness(t)
	cfg := h.restConfig("kube-apiserver-kubelet-client", "system:masters")
	for _, p := range execProtocols {
		for _, tc := range []struct {
			name           string
			cmd            []string
			stdin          string
			stdout, stderr string
			code           int
		}{
			{name: "stdout", cmd: []string{"echo", "hello", "world"}, stdout: "hello world\n"},
			{name: "stderr", cmd: []string{"warn", "oops"}, stderr: "oops\n"},
			{name: "stdin", cmd: []string{"cat"}, stdin: "from stdin\nline 2\n", stdout: "from stdin\nline 2\n"},
			{name: "exit code", cmd: []string{"exit", "3"}, code: 3},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				e, err := p.new(cfg, h.execURL("web-"+testNode, "app", tc.stdin != "", false, tc.cmd...))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var stdout, stderr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
				if tc.stdin != "" {
					opts.Stdin = strings.NewReader(tc.stdin)
				}
				err = e.StreamWithContext(ctx, opts)
				var exit clientexec.ExitError
				switch {
				case tc.code != 0:
					if !errors.As(err, &exit) || exit.ExitStatus() != tc.code {
						t.Errorf("exec %q = %v, want exit code %d", tc.cmd, err, tc.code)
					}
				case err != nil:
					t.Errorf("exec %q: %v", tc.cmd, err)
				}
				if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
					t.Errorf("exec %q: stdout %q, stderr %q; want %q, %q", tc.cmd, stdout.String(), stderr.String(), tc.stdout, tc.stderr)
				}
				// The running app container's ID, from the pod's status.
				if id := ex.lastID(); id != "c2" {
					t.Errorf("exec ran in container %q, want c2", id)
				}
			})
		}
	}
	if sar := h.api.lastSAR(); sar.ResourceAttributes == nil || sar.ResourceAttributes.Subresource != "proxy" {
		t.Errorf("exec was authorized as %+v, want nodes/proxy", sar.ResourceAttributes)
	}
}

// sizeQueue gives one terminal size, then stops.
type sizeQueue struct {
	sizes chan *remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q.sizes }

func TestExecTerminalResize(t *testing.T) {
	h, _ := newExecHarness(t)
	cfg := h.restConfig("kube-apiserver-kubelet-client", "system:masters")
	for _, p := range execProtocols {
		t.Run(p.name, func(t *testing.T) {
			e, err := p.new(cfg, h.execURL("web-"+testNode, "app", true, true, "size"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q := sizeQueue{sizes: make(chan *remotecommand.TerminalSize, 2)}
			q.sizes <- &remotecommand.TerminalSize{Width: 120, Height: 40}
			close(q.sizes)
			var stdout bytes.Buffer
			// stdin stays open, as a terminal's does, until the command ends.
			stdin, stdinW := io.Pipe()
			defer stdinW.Close()
			err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Tty: true, TerminalSizeQueue: q})
			if err != nil || stdout.String() != "120x40 tty=true\n" {
				t.Errorf("exec with a terminal = %q, %v; want \"120x40 tty=true\\n\", nil", stdout.String(), err)
			}
		})
	}
}

func TestExecRefused(t *testing.T) {
	h, _ := newExecHarness(t)
	for _, p := range execProtocols {
		t.Run(p.name+"/forbidden", func(t *testing.T) {
			// Alice is authenticated (a certificate of the cluster CA) but
			// has no nodes/proxy.
			e, err := p.new(h.restConfig("alice"), h.execURL("web-"+testNode, "app", false, false, "echo", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			err = e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &stdout, Stderr: io.Discard})
			if err == nil || stdout.Len() != 0 {
				t.Errorf("exec by alice = %q, %v; want refused", stdout.String(), err)
			}
		})
	}
	c := h.apiserverClient()
	alice := h.ca.client(t, "alice")
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		code   int
		body   string
	}{
		{"unknown pod", c, "/exec/default/nope/app?command=echo&output=1", 404, `pod "nope" does not exist`},
		{"pod in another namespace", c, "/exec/other/web-node1/app?command=echo&output=1", 404, "does not exist"},
		{"other uid", c, "/exec/default/web-node1/u9/app?command=echo&output=1", 404, "does not exist"},
		{"unknown container", c, "/exec/default/web-node1/nope?command=echo&output=1", 404, `container "nope" not found`},
		{"not running", c, "/exec/default/web-node1/sidecar?command=echo&output=1", 400, `container "sidecar" in pod "web-node1" is not running`},
		{"no stream", c, "/exec/default/web-node1/app?command=echo", 400, "at least 1 of stdin, stdout, stderr"},
		{"forbidden", h.client(&alice, ""), "/exec/default/web-node1/app?command=echo&output=1", 403, "Forbidden (user=alice, verb=create"},
		{"attach", c, "/attach/default/web-node1/app?output=1", 501, "not implemented"},
		{"portForward", c, "/portForward/default/web-node1", 501, "not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.client.Post(h.base+tc.path, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.body) {
				t.Errorf("POST %s = %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.code, tc.body)
			}
		})
	}
}

func TestRun(t *testing.T) {
	h, ex := newExecHarness(t)
	c := h.apiserverClient()
	resp, err := c.Post(h.base+"/run/default/web-node1/app?cmd="+url.QueryEscape("echo hello run"), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello run\n" || ex.lastID() != "c2" {
		t.Errorf("/run = %d %q in %q, want 200 \"hello run\\n\" in c2", resp.StatusCode, body, ex.lastID())
	}
	resp, err = c.Post(h.base+"/run/default/web-node1/app?cmd="+url.QueryEscape("exit 4"), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "exited with code 4") {
		t.Errorf("/run of exit 4 = %d %q, want 500 with the exit code", resp.StatusCode, body)
	}
}

// floodExecer writes total bytes to stdout, 32 KiB a write (as Docker's
// stdcopy does), until a write fails, and counts what was taken.
type floodExecer struct {
	total int

	mu       sync.Mutex
	accepted int
	err      error // the write that failed
	stopped  bool  // ctx had ended when it failed
}

func (f *floodExecer) ExecStream(ctx context.Context, _ string, _ []string, s engine.ExecStreams) (int, error) {
	chunk := bytes.Repeat([]byte("y\n"), 16<<10)
	for sent := 0; sent < f.total; sent += len(chunk) {
		n, err := s.Stdout.Write(chunk[:min(len(chunk), f.total-sent)])
		f.mu.Lock()
		f.accepted += n
		f.err, f.stopped = err, ctx.Err() != nil
		f.mu.Unlock()
		if err != nil {
			return -1, err
		}
	}
	return 0, nil
}

// TestRunOutputIsBounded: /run holds its command's output until the
// command ends, so it takes at most maxRunOutput bytes of it. A command
// that writes more is stopped (its write fails and its context ends) and
// answered with a 500 saying so; one that writes just that much is
// answered with its output.
func TestRunOutputIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int
		code  int
	}{
		{"over", 4 * maxRunOutput, http.StatusInternalServerError},
		{"at the limit", maxRunOutput, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &floodExecer{total: tc.total}
			h := newHarness(t, func(o *Options) { o.Exec = ex })
			resp, err := h.apiserverClient().Post(h.base+"/run/default/web-node1/app?cmd=yes", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxRunOutput+1))
			if err != nil {
				t.Fatal(err)
			}
			ex.mu.Lock()
			defer ex.mu.Unlock()
			if ex.accepted > maxRunOutput {
				t.Errorf("/run took %d bytes of output, want at most %d", ex.accepted, maxRunOutput)
			}
			if tc.code == http.StatusOK {
				if resp.StatusCode != tc.code || len(body) != tc.total || ex.err != nil {
					t.Errorf("/run of %d bytes = %d with %d bytes, write error %v; want 200 with all of them", tc.total, resp.StatusCode, len(body), ex.err)
				}
				return
			}
			if resp.StatusCode != tc.code || !strings.Contains(string(body), "output exceeds 16 MiB") || len(body) > 1<<10 {
				t.Errorf("/run of %d bytes = %d %.200q (%d bytes); want 500 saying the output exceeds 16 MiB", tc.total, resp.StatusCode, body, len(body))
			}
			if ex.err == nil || !ex.stopped {
				t.Errorf("the command's write = %v with its context ended %v; want it failed and the command stopped", ex.err, ex.stopped)
			}
		})
	}
}

// TestRunIsBoundedInTime: a /run's client sees nothing until the command
// ends, so the command is stopped, as an idle stream is closed, after the
// stream idle timeout (here past at once).
func TestRunIsBoundedInTime(t *testing.T) {
	ex := blockingExecer{ended: make(chan error, 1)}
	h := newHarness(t, func(o *Options) { o.Exec = ex; o.StreamIdleTimeout = time.Nanosecond })
	resp, err := h.apiserverClient().Post(h.base+"/run/default/web-node1/app?cmd=sleep", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "did not end within") {
		t.Errorf("/run past its timeout = %d %q, want 500 saying the command did not end in time", resp.StatusCode, body)
	}
	select {
	case err := <-ex.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the command ended with %v, want its deadline", err)
		}
	default:
		t.Error("/run answered but its command still runs")
	}
}

// TestExecLegacyWebSocket is the node half of the conformance spec "Pods
// should support remote command execution over websockets": the apiserver
// passes its channel.k8s.io WebSocket through to the node, and the output
// must come back on channel 1 (stdout) until the server closes.
func TestExecLegacyWebSocket(t *testing.T) {
	h, _ := newExecHarness(t)
	u := h.execURL("web-"+testNode, "app", false, false, "echo", "remote execution test")
	u.Scheme = "wss"
	cfg, err := websocket.NewConfig(u.String(), "https://"+u.Host)
	if err != nil {
		t.Fatal(err)
	}
	cert := h.ca.client(t, "kube-apiserver-kubelet-client", "system:masters")
	cfg.Protocol = []string{"channel.k8s.io"}
	cfg.TlsConfig = &tls.Config{RootCAs: h.roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(20 * time.Second))
	var stdout bytes.Buffer
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(msg) == 0:
		case msg[0] == 1:
			stdout.Write(msg[1:])
		case len(msg) > 1:
			t.Errorf("message on channel %d: %q", msg[0], msg[1:])
		}
	}
	if stdout.String() != "remote execution test\n" {
		t.Errorf("stdout = %q, want \"remote execution test\\n\"", stdout.String())
	}
}

// TestExecEndsWhenTheSPDYConnectionDrops: when the connection of a SPDY
// exec breaks (the apiserver closes it when its client goes), a command
// that writes nothing more is not waited on: net/http ends the request's
// context at a failed read of the hijacked connection.
func TestExecEndsWhenTheSPDYConnectionDrops(t *testing.T) {
	ex := blockingExecer{ended: make(chan error, 1)}
	h := newHarness(t, func(o *Options) { o.Exec = ex })
	cert := h.ca.client(t, "kube-apiserver-kubelet-client", "system:masters")
	conn, err := tls.Dial("tcp", h.srv.Addr(), &tls.Config{RootCAs: h.roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	u := h.execURL("web-"+testNode, "app", false, false, "sleep")
	u.RawQuery = url.Values{"output": {"1"}, "command": {"sleep"}}.Encode()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n", u.RequestURI())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || br.Buffered() != 0 {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	sc, err := spdy.NewClientConnection(conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.CreateStream(http.Header{"Streamtype": {"error"}}); err != nil {
		t.Fatal(err)
	}
	stdout, err := sc.CreateStream(http.Header{"Streamtype": {"stdout"}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("started\n"))
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "started\n" {
		t.Fatalf("stdout %q, %v; want the command started", buf, err)
	}
	conn.Close()
	select {
	case <-ex.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the exec still runs 20s after its connection broke")
	}
}

// blockingExecer runs every command until ctx ends, then reports it.
type blockingExecer struct{ ended chan error }

func (b blockingExecer) ExecStream(ctx context.Context, _ string, _ []string, s engine.ExecStreams) (int, error) {
	io.WriteString(s.Stdout, "started\n")
	<-ctx.Done()
	b.ended <- ctx.Err()
	return -1, ctx.Err()
}

// slowExecer's command writes "done" once it has run for d.
type slowExecer struct{ d time.Duration }

func (e slowExecer) ExecStream(ctx context.Context, _ string, _ []string, s engine.ExecStreams) (int, error) {
	select {
	case <-time.After(e.d):
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	io.WriteString(s.Stdout, "done\n")
	return 0, nil
}

// TestRunAnswersAfterOutlivingTheWriteTimeout: the write timeout bounds
// the writing of /run's answer, not the command's run before it: a
// command that runs longer than the write timeout is still answered.
func TestRunAnswersAfterOutlivingTheWriteTimeout(t *testing.T) {
	const writeTimeout = 2 * time.Second
	h := newHarness(t, func(o *Options) { o.Exec = slowExecer{d: 3 * writeTimeout}; o.WriteTimeout = writeTimeout })
	resp, err := h.apiserverClient().Post(h.base+"/run/default/web-node1/app?cmd=slow", "text/plain", nil)
	if err != nil {
		t.Fatalf("/run of a command that outlives the write timeout: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "done\n" {
		t.Errorf("/run = %d %q, %v; want 200 \"done\\n\"", resp.StatusCode, body, err)
	}
}

// TestExecEndsWhenTheWebSocketClientGoes: a command that writes nothing
// more is not waited on after its WebSocket client has gone. (A SPDY
// client's graceful close, a GoAway frame on a connection it keeps open
// until the server's streams end, is not seen, as with the kubelet.)
func TestExecEndsWhenTheWebSocketClientGoes(t *testing.T) {
	ex := blockingExecer{ended: make(chan error, 1)}
	h := newHarness(t, func(o *Options) { o.Exec = ex })
	cfg := h.restConfig("kube-apiserver-kubelet-client", "system:masters")
	e, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, h.execURL("web-"+testNode, "app", false, false, "sleep").String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	out := writerFunc(func(b []byte) (int, error) {
		if bytes.Contains(b, []byte("started")) {
			close(started)
		}
		return len(b), nil
	})
	done := make(chan error, 1)
	go func() { done <- e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out, Stderr: io.Discard}) }()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not start")
	}
	cancel()
	select {
	case <-ex.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the exec still runs 20s after its client went")
	}
	<-done
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestExecOutlivesTheWriteTimeout: the write timeout of plain responses
// (here already past when the request starts) does not cut a stream.
func TestExecOutlivesTheWriteTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Exec = &fakeExecer{}; o.WriteTimeout = time.Nanosecond })
	cfg := h.restConfig("kube-apiserver-kubelet-client", "system:masters")
	for _, p := range execProtocols {
		t.Run(p.name, func(t *testing.T) {
			e, err := p.new(cfg, h.execURL("web-"+testNode, "app", false, false, "echo", "still", "here"))
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: io.Discard}); err != nil || stdout.String() != "still here\n" {
				t.Errorf("exec = %q, %v; want \"still here\\n\", nil", stdout.String(), err)
			}
		})
	}
}
