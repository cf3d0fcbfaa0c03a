package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"
)

// OtherTestBinaries returns the command lines of the Go test binaries
// running now (pgrep -f '\.test( |$)'), this process left out: restarting
// dockerd under them would break their tests.
func OtherTestBinaries() []string {
	out, _ := exec.Command("pgrep", "-af", `\.test( |$)`).Output()
	self := strconv.Itoa(os.Getpid())
	var others []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pid, cmd, ok := strings.Cut(line, " ")
		if !ok || pid == self || strings.HasPrefix(cmd, "pgrep ") {
			continue
		}
		others = append(others, line)
	}
	return others
}

// RestartDockerd stops the running dockerd (SIGTERM; its containers stop
// with it, as there is no live-restore) and starts it again with the same
// command line, in a session of its own so that it outlives the caller,
// its output appended to /var/log/podrun-dockerd.log (as hack/setup.sh
// starts it). It returns when the engine answers again, with the time it
// did.
func RestartDockerd(ctx context.Context, cli *client.Client) (time.Time, error) {
	out, err := exec.Command("pidof", "dockerd").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("find dockerd: %w", err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(out))[0])
	if err != nil {
		return time.Time{}, err
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return time.Time{}, err
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return time.Time{}, err
	}
	if _, err := WaitFor(ctx, 2*time.Minute, 100*time.Millisecond, "dockerd to exit", func() (bool, error) {
		return syscall.Kill(pid, 0) != nil, nil
	}); err != nil {
		return time.Time{}, err
	}
	logf, err := os.OpenFile("/var/log/podrun-dockerd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return time.Time{}, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return time.Time{}, fmt.Errorf("start dockerd: %w", err)
	}
	go cmd.Wait()
	var back time.Time
	_, err = WaitFor(ctx, 2*time.Minute, 50*time.Millisecond, "dockerd to answer", func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := cli.Ping(pctx); err != nil {
			return false, nil
		}
		back = time.Now()
		return true, nil
	})
	return back, err
}
