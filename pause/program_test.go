package pause

import (
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

// The pause program's tests run it as a process of its own; the orphans
// test makes it a subreaper first (helperMain's "exec-program" mode).

// writeProgram puts Program() in an executable file.
func writeProgram(t *testing.T) string {
	t.Helper()
	if Program() == nil {
		t.Fatalf("no pause program for this architecture")
	}
	path := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(path, Program(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitMasked waits until pid waits for signals in rt_sigtimedwait: it has
// blocked SIGINT, SIGTERM and SIGCHLD by then, so a signal sent is the
// program's to take. (While it waits, the kernel moves the set it waits
// for out of SigBlk; /proc/PID/syscall names the call instead.)
func waitMasked(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !inSigtimedwait(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never waited for signals", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inSigtimedwait reports whether pid is in the rt_sigtimedwait system call.
func inSigtimedwait(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return false
	}
	nr, _, _ := strings.Cut(string(b), " ")
	return nr == strconv.Itoa(unix.SYS_RT_SIGTIMEDWAIT)
}

func startProgram(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(writeProgram(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitMasked(t, cmd.Process.Pid)
	return cmd
}

func TestProgramExitsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startProgram(t)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := waitExit(t, cmd, 5*time.Second); err != nil {
				t.Fatalf("the pause program exited with %v, want status 0", err)
			}
		})
	}
}

func TestProgramTakesSIGCHLD(t *testing.T) {
	cmd := startProgram(t)
	if err := cmd.Process.Signal(unix.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	// It took the SIGCHLD (nothing pending) and waits again, rather than
	// exiting (a zombie is in no system call).
	deadline := time.Now().Add(10 * time.Second)
	for pendingSIGCHLD(t, cmd.Process.Pid) || !inSigtimedwait(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("after a SIGCHLD the program neither took it nor waits again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(unix.SIGTERM)
	if err := waitExit(t, cmd, 5*time.Second); err != nil {
		t.Fatalf("the pause program exited with %v after a SIGCHLD", err)
	}
}

func pendingSIGCHLD(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, field := range []string{"SigPnd:", "ShdPnd:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				set, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if set&(1<<(unix.SIGCHLD-1)) != 0 {
					return true
				}
			}
		}
	}
	return false
}

func TestProgramReapsOrphans(t *testing.T) {
	path := writeProgram(t)
	t.Setenv(programEnv, path)
	cmd := startHelper(t, "exec-program")
	pid := cmd.Process.Pid
	waitMasked(t, pid)

	// The shell and its eight orphans, some exited before the program
	// began and the rest after, all end up reaped.
	deadline := time.Now().Add(10 * time.Second)
	for kids := children(t, pid); len(kids) > 0; kids = children(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("children of the pause program still present (zombies not reaped?): %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(unix.SIGTERM)
	if err := waitExit(t, cmd, 5*time.Second); err != nil {
		t.Fatalf("the pause program exited with %v", err)
	}
}
