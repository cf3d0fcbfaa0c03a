package health

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServerClosesIdleConnections: any local user may connect, so a
// kept-alive connection that asks nothing more is closed after the idle
// timeout rather than held for ever (each one a file descriptor and a
// goroutine of podrun's).
func TestServerClosesIdleConnections(t *testing.T) {
	s := serve(t, ServerOptions{Addr: "127.0.0.1:0", IdleTimeout: 100 * time.Millisecond})

	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: podrun\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("/healthz: %s, close %v; want 200 on a kept-alive connection", resp.Status, resp.Close)
	}
	// Nothing more is asked: the server closes the connection (EOF), long
	// before this deadline.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("an idle kept-alive connection: %v, want it closed by the server (EOF)", err)
	}
}

// TestPodsShowsAURLSourceWithoutCredentials: any local user may read
// /pods (`podrun ps`), so a pod's podrun.io/source names its URL without
// the userinfo and query that may carry credentials; the pod podrun holds
// keeps the whole URL, which identifies it.
func TestPodsShowsAURLSourceWithoutCredentials(t *testing.T) {
	const url = "https://deploy:S3CRET@config.example/pods.yaml?sig=x"
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default",
		Annotations: map[string]string{"podrun.io/source": url}}}
	s := &Server{opts: ServerOptions{Pods: func() []*v1.Pod { return []*v1.Pod{pod} }}}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/pods", nil))
	var list v1.PodList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("/pods = %d %q, %v", rec.Code, rec.Body, err)
	}
	if got := list.Items[0].Annotations["podrun.io/source"]; got != "https://config.example/pods.yaml" {
		t.Errorf("/pods shows podrun.io/source %q, want the URL without its credentials", got)
	}
	if pod.Annotations["podrun.io/source"] != url {
		t.Errorf("the pod held became %q, want the whole URL", pod.Annotations["podrun.io/source"])
	}
}

// TestServerAnswersARequestWhoseBodyNeverComes: any local user may
// connect, and no route reads a body; net/http, to keep the connection,
// reads an unread body before it answers, with no deadline (the server
// has no ReadTimeout). A request that declares a body and sends none must
// still be answered and its connection closed, not held for ever (a file
// descriptor and a goroutine of podrun's each, past the idle timeout).
func TestServerAnswersARequestWhoseBodyNeverComes(t *testing.T) {
	s := serve(t, ServerOptions{Addr: "127.0.0.1:0", IdleTimeout: 100 * time.Millisecond})
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: podrun\r\nContent-Length: 1000\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nHost: podrun\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /nowhere HTTP/1.1\r\nHost: podrun\r\nContent-Length: 1000\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		// Generous: the answer comes at once; only a broken server waits.
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Errorf("%q: no answer: %v", req, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%q: answered %s, then %v; want the connection closed (EOF)", req, resp.Status, err)
		}
	}
}

// closeRecorder is a listener whose connections record that the server
// closed them.
type closeRecorder struct{ net.Listener }

func (l closeRecorder) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c}, nil
}

type recordedConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *recordedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// TestServerShutdownClosesConnectionsStillOpen: Shutdown leaves a
// connection that is not idle open (here a request whose header never
// ends, which net/http counts as idle only after 5 s); once the shutdown's
// bound passes, the server closes it, so that no connection of any local
// user outlives podrun's shutdown (nor the goroutine that serves it).
func TestServerShutdownClosesConnectionsStillOpen(t *testing.T) {
	s, err := Listen(ServerOptions{Addr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.tcp.ln = closeRecorder{s.tcp.ln}
	accepted := make(chan *recordedConn, 1)
	s.tcp.srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted <- c.(*recordedConn)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()

	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// No blank line: the request is never whole.
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: podrun\r\n"); err != nil {
		t.Fatal(err)
	}
	// Generous: these come at once; only a broken server waits.
	var sc *recordedConn
	select {
	case sc = <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not take the connection")
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its shutdown's bound")
	}
	if !sc.closed.Load() {
		t.Fatal("Serve returned with a connection still open")
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the client's connection after the shutdown: %v, want it closed by the server", err)
	}
}
