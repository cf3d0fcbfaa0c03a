package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serve starts a server with a pod that carries a literal secret, and
// stops it at the end of the test.
func serve(t *testing.T, opts ServerOptions) *Server {
	t.Helper()
	opts.Pods = func() []*v1.Pod {
		return []*v1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "db",
				Env: []v1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}}}}},
		}}
	}
	s, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestPodsOnlyOnTheSocket: pod specs hold what manifests carry as
// literals, so TCP, which any local user (or every interface, with
// another bind address) reaches, serves health and metrics only, and
// /pods is on the socket.
func TestPodsOnlyOnTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), SocketName)
	s := serve(t, ServerOptions{Addr: "127.0.0.1:0", Socket: sock})

	if code, body := get(t, http.DefaultClient, "http://"+s.Addr()+"/pods"); code != http.StatusNotFound || strings.Contains(body, "hunter2") {
		t.Errorf("TCP /pods: %d %q, want 404", code, body)
	}
	if code, _ := get(t, http.DefaultClient, "http://"+s.Addr()+"/healthz"); code != http.StatusOK {
		t.Errorf("TCP /healthz: %d, want 200", code)
	}

	code, body := get(t, SocketClient(sock, 10*time.Second), "http://podrun/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Items) != 1 || list.Items[0].Name != "db" {
		t.Fatalf("socket /pods: %d %q (%v), want the pod db", code, body, err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v (%v), want 0600", fi.Mode(), err)
	}
}

// TestSocketRefusesOtherUsers: a socket made readable by mistake (or
// connected to between bind and chmod) still answers no other user.
func TestSocketRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, SocketName)
	serve(t, ServerOptions{Socket: sock})
	// nobody must reach the socket's directory to try at all.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	const nobody = 65534
	if err := askAs(nobody, sock); !errors.Is(err, syscall.EACCES) {
		t.Errorf("another user on the 0600 socket: %v, want permission denied", err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := askAs(nobody, sock); err == nil {
		t.Errorf("another user on a 0666 socket was answered")
	}
	if err := askAs(0, sock); err != nil {
		t.Errorf("root: %v", err)
	}
}

// askAs asks the socket for /healthz with uid as the effective user.
func askAs(uid int, sock string) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, and its
		// changed user with it. A raw setresuid changes this thread only.
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			errc <- e
			return
		}
		c, err := net.DialTimeout("unix", sock, 10*time.Second)
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.0\r\n\r\n"); err != nil {
			errc <- err
			return
		}
		b, err := io.ReadAll(c)
		if err == nil && !strings.Contains(string(b), "200 OK") {
			err = errors.New("no answer")
		}
		errc <- err
	}()
	return <-errc
}

// TestSocketStaleOrTaken: a socket left by a killed podrun is replaced;
// one a running podrun serves is not taken from it.
func TestSocketStaleOrTaken(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, SocketName)
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	serve(t, ServerOptions{Socket: sock})

	if _, err := Listen(ServerOptions{Socket: sock}); err == nil || !strings.Contains(err.Error(), "another podrun serves it") {
		t.Errorf("a second server on a served socket: %v, want refused", err)
	}
	if code, _ := get(t, SocketClient(sock, 10*time.Second), "http://podrun/healthz"); code != http.StatusOK {
		t.Errorf("the first server after the second's try: %d", code)
	}

	file := filepath.Join(dir, "file.sock")
	os.WriteFile(file, nil, 0o600)
	if _, err := Listen(ServerOptions{Socket: file}); err == nil || !strings.Contains(err.Error(), "is no socket") {
		t.Errorf("a regular file in the socket's place: %v, want refused", err)
	}
}

// TestSocketDeepRootDir: a root dir deeper than a sockaddr_un holds still
// gets its socket, and the socket goes when the server does.
func TestSocketDeepRootDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, SocketName)
	if len(sock) <= maxSocketPath {
		t.Fatalf("%s is short enough for a sockaddr_un", sock)
	}
	s, err := Listen(ServerOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	if code, _ := get(t, SocketClient(sock, 10*time.Second), "http://podrun/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on a deep socket: %d", code)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after shutdown: %v, want removed", err)
	}
}

// TestSocketServedByAnotherUser: in a root dir others may write to, a
// socket another user serves is not podrun's: ps does not take its
// answers, and watch replaces it.
func TestSocketServedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, SocketName)
	ln := listenAs(t, 65534, sock)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"planted"}}]}`)
	}))

	if _, err := SocketClient(sock, 10*time.Second).Get("http://podrun/pods"); err == nil || !strings.Contains(err.Error(), "served by uid 65534") {
		t.Errorf("a client of another user's socket: %v, want refused", err)
	}
	serve(t, ServerOptions{Socket: sock})
	if code, body := get(t, SocketClient(sock, 10*time.Second), "http://podrun/pods"); code != http.StatusOK || strings.Contains(body, "planted") {
		t.Errorf("after podrun listened: %d %q, want podrun's /pods", code, body)
	}
}

// listenAs listens on a unix socket at path as uid (on a thread of its
// own), closed at the end of the test.
func listenAs(t *testing.T, uid int, path string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine.
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			done <- result{err: e}
			return
		}
		ln, err := net.Listen("unix", path)
		if err == nil {
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
		}
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}
