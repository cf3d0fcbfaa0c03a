package benchkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Podrun runs one podrun binary as one node.
type Podrun struct {
	Bin   string
	Node  string
	Root  string // --root-dir
	Infra string // --pod-infra-image; "" for podrun's default
	// Endpoint is --container-runtime-endpoint (a CRI runtime's socket);
	// "" for Docker.
	Endpoint string
	// Env is added to the process's environment (DOCKER_HOST=...).
	Env []string
	// Log receives podrun's stderr when set.
	Log *os.File
}

// Args are the flags every call gets, then rest.
func (p *Podrun) Args(sub string, rest ...string) []string {
	a := []string{sub, "--node-name", p.Node, "--root-dir", p.Root, "--config", ""}
	if p.Infra != "" {
		a = append(a, "--pod-infra-image", p.Infra)
	}
	if p.Endpoint != "" {
		a = append(a, "--container-runtime-endpoint", p.Endpoint)
	}
	return append(a, rest...)
}

// Result is how a podrun run ended.
type Result struct {
	Code   int
	Stdout string
	Stderr string
	Took   time.Duration
}

// Run runs podrun to its end, bounded by timeout (then it is killed and
// the result is an error).
func (p *Podrun) Run(ctx context.Context, timeout time.Duration, sub string, rest ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Bin, p.Args(sub, rest...)...)
	cmd.Env = append(os.Environ(), p.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	if p.Log != nil {
		p.Log.Write(errb.Bytes())
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("podrun %s did not finish within %s; stderr:\n%s", sub, timeout, tail(res.Stderr, 2000))
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		return res, err
	}
	return res, nil
}

// Proc is a podrun running in the background.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts podrun in the background, in its own process group.
func (p *Podrun) Start(sub string, rest ...string) (*Proc, error) {
	cmd := exec.Command(p.Bin, p.Args(sub, rest...)...)
	cmd.Env = append(os.Environ(), p.Env...)
	var errb bytes.Buffer
	cmd.Stdout = nil
	cmd.Stderr = &syncWriter{b: &errb, tee: p.Log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	trackProc(pr)
	return pr, nil
}

// Pid is the process ID.
func (pr *Proc) Pid() int { return pr.Cmd.Process.Pid }

// Exited reports whether the process has ended.
func (pr *Proc) Exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has ended.
func (pr *Proc) Done() <-chan struct{} { return pr.done }

// Stderr is what the process wrote to stderr so far (its last max bytes).
func (pr *Proc) Stderr(max int) string {
	if w, ok := pr.Cmd.Stderr.(*syncWriter); ok {
		return tail(w.String(), max)
	}
	return ""
}

// Stop sends sig and waits up to wait for the process to end, then kills
// it. It returns the process's exit error (nil for status 0).
func (pr *Proc) Stop(sig syscall.Signal, wait time.Duration) error {
	_ = pr.Cmd.Process.Signal(sig)
	select {
	case <-pr.done:
		return pr.err
	case <-time.After(wait):
		_ = pr.Cmd.Process.Kill()
		<-pr.done
		return fmt.Errorf("podrun did not exit within %s of %s; killed", wait, sig)
	}
}

// Kill sends SIGKILL and waits for the process.
func (pr *Proc) Kill() {
	_ = pr.Cmd.Process.Kill()
	<-pr.done
}

// FreePort returns a TCP port free on 127.0.0.1 now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// syncWriter is a buffer safe for a process's writes and a reader's
// String, copying to tee when set.
type syncWriter struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	tee *os.File
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tee != nil {
		_, _ = w.tee.Write(p)
	}
	// Keep the last 1 MiB: a long run's log must not grow without bound.
	if w.b.Len() > 1<<20 {
		keep := append([]byte(nil), w.b.Bytes()[w.b.Len()-(512<<10):]...)
		w.b.Reset()
		w.b.Write(keep)
	}
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
