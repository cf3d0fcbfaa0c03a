package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// restartDockerd stops the running dockerd and starts it again with the same
// command line, as hack/setup.sh started it. Containers stop with it (no
// live-restore), which is what a podrun must recover from.
func restartDockerd(t *testing.T) {
	t.Helper()
	out, err := exec.Command("pidof", "dockerd").Output()
	if err != nil {
		t.Fatalf("find dockerd: %v", err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(out))[0])
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dockerd to exit", 2*time.Minute, func() bool { return syscall.Kill(pid, 0) != nil })

	logf, err := os.OpenFile("/var/log/podrun-dockerd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: dockerd must outlive the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dockerd: %v", err)
	}
	go cmd.Wait()
	waitFor(t, "dockerd to answer", 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := docker.Ping(ctx)
		return err == nil
	})
}

func TestWatchSurvivesDockerdRestart(t *testing.T) {
	e := newEnv(t)
	e.write("a.yaml", sleepPod("a", 2))
	e.write("b.yaml", sleepPod("b", 1))
	stop := e.watch()
	defer stop(syscall.SIGTERM)
	waitFor(t, "pods up", time.Minute, func() bool { return len(e.running()) == 5 })

	restartDockerd(t)
	took := waitFor(t, "pods to converge after dockerd came back", 2*time.Minute, func() bool {
		return len(e.running()) == 5
	})
	t.Logf("converged %s after dockerd answered", took)

	// Exactly one running object per pod and container.
	var buf bytes.Buffer
	seen := map[string]int{}
	for _, c := range e.containers() {
		if c.State == "running" {
			key := c.Labels["io.podrun.pod.name"] + "/" + c.Labels["io.podrun.container.name"] + c.Labels["io.podrun.container.type"]
			seen[key]++
			buf.WriteString(key + "\n")
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s runs %d times:\n%s", k, n, buf.String())
		}
	}
}
