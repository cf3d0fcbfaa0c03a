package pause

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a pause process (see TestMain), so
// that signals and orphans can be sent to a process of its own.
const helperEnv = "PODRUN_PAUSE_TEST_HELPER"

// programEnv names the pause program the "exec-program" helper becomes.
const programEnv = "PODRUN_PAUSE_TEST_PROGRAM"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperMain runs pause.Run as the stand-in of a container's PID 1: it becomes
// a child subreaper (so orphans are re-parented to it, as to PID 1), then,
// for mode "orphans", makes children that exit later without being waited
// for by anyone but Run.
func helperMain(mode string) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl:", err)
		return 2
	}
	if mode == "orphans" || mode == "orphans-noreap" || mode == "exec-program" {
		// The shell exits at once; its background children are orphaned,
		// re-parented to us, and exit over the next half second.
		sh := exec.Command("/bin/sh", "-c",
			`for i in 1 2 3 4 5 6 7 8; do (sleep 0.$i; exit $i) & done`)
		if err := sh.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			return 2
		}
		// Deliberately no sh.Wait(): the shell itself is a zombie for Run
		// to reap too.
	}
	if mode == "exec-program" {
		// The pause program in our place, a subreaper still (the flag
		// survives execve), with orphans to reap.
		fmt.Println("ready")
		err := syscall.Exec(os.Getenv(programEnv), []string{"pause"}, nil)
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 2
	}
	if mode == "orphans-noreap" {
		// The control: nobody reaps, the zombies stay.
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return 0
	}
	// "ready" once Run listens: a signal the test sends then is Run's.
	if err := run(context.Background(), func() { fmt.Println("ready") }); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

func startHelper(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	buf := make([]byte, len("ready\n"))
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("helper did not get ready: %q %v", buf, err)
	}
	return cmd
}

// waitExit waits for cmd with a deadline and returns its exit error.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("pause did not exit within %s", within)
		return nil
	}
}

func TestExitsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startHelper(t, "idle")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := waitExit(t, cmd, 5*time.Second); err != nil {
				t.Fatalf("pause exited with %v, want status 0", err)
			}
		})
	}
}

func TestIgnoresOtherSignals(t *testing.T) {
	cmd := startHelper(t, "idle")
	if err := cmd.Process.Signal(unix.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("pause is gone after SIGCHLD: %v", err)
	}
	_ = cmd.Process.Signal(unix.SIGTERM)
	if err := waitExit(t, cmd, 5*time.Second); err != nil {
		t.Fatalf("pause exited with %v", err)
	}
}

func TestZombiesStayWithoutReaper(t *testing.T) {
	// The control for TestReapsOrphans: without Run, the children do stay.
	cmd := startHelper(t, "orphans-noreap")
	deadline := time.Now().Add(10 * time.Second)
	for {
		zombies := 0
		for _, k := range children(t, cmd.Process.Pid) {
			if strings.HasSuffix(k, "(Z)") {
				zombies++
			}
		}
		if zombies == 9 { // the shell and its eight children
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 9 zombies, have %v", children(t, cmd.Process.Pid))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReapsOrphans(t *testing.T) {
	cmd := startHelper(t, "orphans")
	pid := cmd.Process.Pid

	// Every child (the shell and its eight orphans) exits within about a
	// second; none may stay behind as a zombie.
	deadline := time.Now().Add(10 * time.Second)
	var kids []string
	for {
		kids = children(t, pid)
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of pause still present (zombies not reaped?): %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Make sure we saw the orphans at all: the helper's tasks would have
	// included them had reaping not happened; give the slowest (0.8 s) time
	// to have been born and reaped, and check again.
	time.Sleep(time.Second)
	if kids := children(t, pid); len(kids) != 0 {
		t.Fatalf("children of pause still present: %v", kids)
	}
	_ = cmd.Process.Signal(unix.SIGTERM)
	if err := waitExit(t, cmd, 5*time.Second); err != nil {
		t.Fatalf("pause exited with %v", err)
	}
}

// children lists the processes whose parent is pid, as "pid(state)".
func children(t *testing.T, pid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces: split after ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			out = append(out, fmt.Sprintf("%s(%s)", filepath.Base(filepath.Dir(p)), f[0]))
		}
	}
	return out
}

// The tests below call Run and reap in the test process itself: they must not
// run in parallel with a test that waits for a child of its own.

func TestRunReturnsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestReapWithoutChildren(t *testing.T) {
	if n := reap(); n != 0 {
		t.Fatalf("reap() = %d with no exited children", n)
	}
}
