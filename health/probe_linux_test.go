package health

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// fullListener returns a loopback port whose accept queue is full: Linux
// drops further SYNs, so a connection attempt hangs until it times out.
func fullListener(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return port // the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("could not fill the accept queue of a listener")
	return 0
}

func TestTCPProbeTimeout(t *testing.T) {
	t.Parallel()
	port := fullListener(t)
	start := time.Now()
	res, msg, err := RunProbe(context.Background(), Target{PodIP: "127.0.0.1"}, tcpProbe(intstr.FromInt32(int32(port))))
	if res != Failure || err != nil || !strings.Contains(msg, "timeout") {
		t.Fatalf("got %v %q %v", res, msg, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Fatalf("took %v, want about timeoutSeconds (1s)", d)
	}
}
