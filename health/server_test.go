package health

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
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
