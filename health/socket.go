package health

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the unix socket's name in podrun's root dir.
const SocketName = "podrun.sock"

// maxSocketPath is the longest path a sockaddr_un holds, NUL included.
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// listenOwnerOnly listens on a unix socket at path that answers only
// podrun's own user and root: the socket is 0600, and every connection's
// peer credentials are checked as well, since a client may connect
// between bind and chmod. A stale socket (its podrun killed), or one
// another user serves, is replaced; one that podrun's user answers on
// belongs to a running podrun, and is an error. (A watch holds the root
// dir's lock: two do not get here at once.)
func listenOwnerOnly(path string, log *slog.Logger) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is no socket", path)
		}
		if c, err := dialSocket(context.Background(), path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another podrun serves it (two podruns on one root dir)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	var ln net.Listener
	err := atShortPath(path, func(p string) error {
		l, err := net.Listen("unix", p)
		if err != nil {
			return err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			l.Close()
			return err
		}
		// Unlinked by path at close: the short form may no longer resolve then.
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		ln = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &ownerOnly{Listener: ln, path: path, uid: os.Geteuid(), log: log}, nil
}

type ownerOnly struct {
	net.Listener
	path string
	uid  int
	log  *slog.Logger
}

func (l *ownerOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && (uid == l.uid || uid == 0) {
			return c, nil
		}
		if l.log != nil {
			l.log.Debug("refused a connection from another user", "socket", l.path, "uid", uid, "err", err)
		}
		c.Close()
	}
}

// Close unlinks the socket before it closes it: closed first, it would
// look stale to a podrun starting meanwhile, which would replace it, and
// the unlink would then remove that podrun's.
func (l *ownerOnly) Close() error {
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, fs.ErrNotExist) {
		rmErr = nil
	}
	return errors.Join(l.Listener.Close(), rmErr)
}

func peerUID(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if credErr != nil {
		return -1, credErr
	}
	return int(cred.Uid), nil
}

// SocketClient is an HTTP client of the server's unix socket at path;
// any host in a URL reaches it.
func SocketClient(path string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialSocket(ctx, path, timeout)
			},
			DisableKeepAlives: true,
		},
	}
}

// dialSocket connects to the socket at path, if its server runs as this
// user or root: whoever else serves there (in a root dir others may write
// to) is not podrun, and its answers are not to be trusted.
func dialSocket(ctx context.Context, path string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := atShortPath(path, func(p string) error {
		var err error
		c, err = (&net.Dialer{Timeout: timeout}).DialContext(ctx, "unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if uid, err := peerUID(c); err != nil || (uid != os.Geteuid() && uid != 0) {
		c.Close()
		return nil, fmt.Errorf("%s is served by uid %d, not podrun's (%v)", path, uid, err)
	}
	return c, nil
}

// atShortPath calls f with path, or, when path is too long for a
// sockaddr_un (a deep --root-dir), with a short name for it through an
// open descriptor of its directory, which bind and connect resolve alike.
func atShortPath(path string, f func(string) error) error {
	if len(path) <= maxSocketPath {
		return f(path)
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	defer unix.Close(dir)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(path)))
}
