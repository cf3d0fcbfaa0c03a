package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// Termination messages, as the kubelet reads them back (kuberuntime's
// getTerminationMessage and readLastStringFromContainerLogs): the last
// 4096 bytes of the file a container's terminationMessagePath is bound to;
// under FallbackToLogsOnError, for a container that failed with that file
// empty, the last 80 lines of its logs, at most their last 2048 bytes. A
// pod's statuses carry at most 12 KiB of messages in all, shared evenly by
// its containers.
const (
	maxTerminationMessage     = 4 * 1024
	maxPodTerminationMessages = 12 * 1024
	terminationLogLines       = 80
	maxTerminationLogTail     = 2 * 1024
	// terminationLogTimeout bounds the read of a log tail: the pod's
	// worker waits for it.
	terminationLogTimeout = 10 * time.Second
)

// readTerminationMessage returns the end (at most 4096 bytes) of the
// termination-message file of attempt of container in pod uid (see
// terminationMessageFile); "" when there is none. The file is reached
// through the root dir and must be the regular file podrun made: a symlink,
// FIFO, hard link or anything else in its place (a container with a way to the pod
// directory could plant one) is refused, never followed or opened for
// reading, and so is a file with other names (a hard link), so the message
// cannot disclose another file nor block the read.
func readTerminationMessage(rootDir, uid, container string, attempt int) (string, error) {
	if err := checkName("container name", container); err != nil {
		return "", err
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return "", err
	}
	defer d.Close()
	// The container's directory, checked to be that very one (not, by a
	// symlink, another pod's): the file's name is then one element of it.
	dir, err := d.openDir(false, "containers", container)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer dir.Close()
	name := terminationLogName(d, container, attempt)
	base := filepath.Base(name)
	fi, err := dir.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", refused(name, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s): refused", name, fi.Mode().Type())
	}
	// O_NONBLOCK: a FIFO swapped in after the Lstat does not hang the
	// open; the checks below refuse it.
	f, err := dir.OpenFile(base, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", refused(name, err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return "", fmt.Errorf("%s was replaced while being read: refused", name)
	}
	// podrun's file has one name; a hard link put in its place may be any
	// file of the filesystem.
	if st, ok := ofi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return "", fmt.Errorf("%s has %d links (a hard link put in its place): refused", name, st.Nlink)
	}
	size := ofi.Size()
	buf := make([]byte, min(size, maxTerminationMessage))
	n, err := f.ReadAt(buf, size-int64(len(buf)))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return string(buf[:n]), nil
}

// terminationMessage is what the terminated state of run (a finished
// attempt of the container spec) says beyond the runtime's own message:
// the container's termination-message file, or under
// FallbackToLogsOnError, when that is empty and the container failed (and
// did start: a runtime start error has no logs), the tail of its logs.
func (r *Runner) terminationMessage(ctx context.Context, pod *v1.Pod, spec *v1.Container, run *engine.Container) string {
	fallback := spec.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError &&
		run.ExitCode != 0 && run.Message == ""
	msg := ""
	if spec.TerminationMessagePath != "" {
		m, err := readTerminationMessage(r.cfg.RootDir, string(pod.UID), run.Name, run.Attempt)
		if err != nil {
			r.log.Warn("termination message not read", "pod", podKey(pod), "container", run.Name,
				"attempt", run.Attempt, "err", err)
			return "Error on reading termination log: " + err.Error()
		}
		msg = m
	}
	if fallback && msg == "" {
		msg = r.logTail(ctx, run.ID)
	}
	return msg
}

// logTail is the end of a container's logs, stdout and stderr as they
// came: its last 80 lines, at most their last 2048 bytes.
func (r *Runner) logTail(ctx context.Context, id string) string {
	lr, ok := r.raw.(engine.LogReader)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, terminationLogTimeout)
	defer cancel()
	t := &tailBuffer{max: maxTerminationLogTail}
	if err := lr.ContainerLogs(ctx, id, engine.LogOptions{Tail: terminationLogLines}, t, t); err != nil {
		return "Error on reading termination message from logs: " + err.Error()
	}
	return t.String()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	if over := len(t.b) + len(p) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	t.b = append(t.b, p...)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// terminationMessages returns, by container ID, the termination message
// of each finished run the pod's status shows (the latest and the previous
// run of each container of the spec). Each is read once, when the worker
// first sees the run finished, and kept while the run is in the pod's
// state: a relist reads nothing again.
func (w *podWorker) terminationMessages(ctx context.Context, pod *v1.Pod, st *podState) map[string]string {
	if w.msgs == nil {
		w.msgs = map[string]string{}
	}
	shown := map[string]bool{}
	for _, spec := range slices.Concat(allContainers(pod), ephemeralContainers(pod)) {
		cur := st.latest(spec.Name, "")
		if cur == nil {
			continue
		}
		for _, run := range []*engine.Container{cur, previousRun(st, spec.Name, cur)} {
			if run == nil || run.State != engine.StateExited {
				continue
			}
			shown[run.ID] = true
			if _, ok := w.msgs[run.ID]; !ok {
				w.msgs[run.ID] = w.r.terminationMessage(ctx, pod, spec, run)
			}
		}
	}
	for id := range w.msgs {
		if !shown[id] {
			delete(w.msgs, id)
		}
	}
	return w.msgs
}

// capTerminationMessages cuts the terminated states' messages of s to the
// pod's share each (12 KiB over the pod's containers), as the kubelet's
// status manager does.
func capTerminationMessages(pod *v1.Pod, s *v1.PodStatus) {
	per := maxPodTerminationMessages
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		per /= n
	}
	cut := func(t *v1.ContainerStateTerminated) {
		if t != nil && len(t.Message) > per {
			t.Message = t.Message[:per]
		}
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			cut(list[i].State.Terminated)
			cut(list[i].LastTerminationState.Terminated)
		}
	}
}

// pruneTerminationLogs removes the termination-message files of runs the
// runtime no longer holds (garbage collection removed them), so that a
// container that restarts for months does not leave a file per attempt:
// for each container name with runs in st, the files of attempts below its
// oldest run's. Newer attempts are kept (one may be being made now), and
// so are the files of names without runs. Removal follows no symlink.
func pruneTerminationLogs(rootDir, uid string, st *podState) error {
	oldest := map[string]int{}
	for _, c := range st.Containers {
		if a, ok := oldest[c.Name]; !ok || c.Attempt < a {
			oldest[c.Name] = c.Attempt
		}
	}
	if len(oldest) == 0 {
		return nil
	}
	d, err := openPodDirs(rootDir, uid)
	if err != nil {
		return err
	}
	defer d.Close()
	var errs []error
	for name, first := range oldest {
		if checkName("container name", name) != nil {
			continue
		}
		dir, err := d.openDir(false, "containers", name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		names, err := readDirNames(dir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, n := range names {
			a, ok := strings.CutSuffix(n, terminationLogSuffix)
			attempt, err := strconv.Atoi(a)
			if !ok || err != nil || attempt >= first {
				continue
			}
			if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(d.rel("containers", name), n), err))
			}
		}
		dir.Close()
	}
	return errors.Join(errs...)
}
