package nodeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// LogRequest is what a /containerLogs request asks for, checked and
// resolved (sinceSeconds is turned into a time).
type LogRequest struct {
	// Follow streams the log until the container ends or the client goes.
	Follow bool
	// Previous reads the run before the current one (the container
	// status's lastState).
	Previous bool
	// Timestamps prefixes each line with its time (RFC 3339).
	Timestamps bool
	// TailLines, when set, is how many lines from the end to start with.
	TailLines *int64
	// Since, when not zero, drops the lines written before it.
	Since time.Time
	// Stream is the one stream to read, v1.LogStreamStdout or
	// v1.LogStreamStderr; "" or v1.LogStreamAll: both.
	Stream string
}

// LogReader writes a container's log. The server has already found the pod
// and the container in the pod's spec; LimitBytes is enforced by the
// server, which stops the reader by cancelling ctx. The server sends its
// 200 with the first write to w: a reader writes zero bytes once it has
// found the run to read, as the kubelet's GetKubeletContainerLogs does, so
// the client has its headers before the first line (a followed container
// may write none for long); an error returned before any write is a 4xx.
type LogReader interface {
	// ContainerLogs writes the log of container of the pod namespace/pod
	// (stdout and stderr, interleaved as written, or req.Stream alone) to
	// w, until its end, or with req.Follow until the container ends or
	// ctx does. ErrNotFound (wrapped) when there is no such pod or
	// container (404); any other error (a container that has not started,
	// no previous run) is the client's to read (400), as the kubelet
	// answers.
	ContainerLogs(ctx context.Context, namespace, pod, container string, req LogRequest, w io.Writer) error
}

// ErrNotFound is returned (wrapped) by a LogReader for a pod or container
// that does not exist.
var ErrNotFound = errors.New("not found")

// parseLogRequest reads the query of /containerLogs as the kubelet does
// (v1.PodLogOptions' query parameters, and the old "tail"). A value that
// does not parse is 400; one that ValidatePodLogOptions refuses 422.
// stream is read as the kubelet reads it with its PodLogsQuerySplitStreams
// gate on (podrun has no gates): Stdout or Stderr alone, or All.
// limitBytes is returned apart: the server enforces it.
func parseLogRequest(q url.Values, now time.Time) (req LogRequest, limitBytes int64, status int, err error) {
	bad := func(format string, a ...any) (LogRequest, int64, int, error) {
		return LogRequest{}, 0, 400, fmt.Errorf(format, a...)
	}
	invalid := func(format string, a ...any) (LogRequest, int64, int, error) {
		return LogRequest{}, 0, 422, fmt.Errorf(format, a...)
	}
	if tail := q.Get("tail"); tail != "" {
		q.Del("tailLines")
		if tail != "all" {
			q.Set("tailLines", tail)
		}
	}
	req.Follow = queryBool(q, "follow")
	req.Previous = queryBool(q, "previous")
	req.Timestamps = queryBool(q, "timestamps")
	tail, err := queryInt(q, "tailLines")
	if err != nil {
		return bad("%v", err)
	}
	since, err := queryInt(q, "sinceSeconds")
	if err != nil {
		return bad("%v", err)
	}
	limit, err := queryInt(q, "limitBytes")
	if err != nil {
		return bad("%v", err)
	}
	// As metav1.Time.UnmarshalQueryParameter: "" and "null" (older
	// clients' JSON) are the zero time, given all the same.
	var sinceTime time.Time
	vs, sinceTimeSet := q["sinceTime"]
	if sinceTimeSet && len(vs) > 0 && vs[0] != "" && vs[0] != "null" {
		sinceTime, err = time.Parse(time.RFC3339, vs[0])
		if err != nil {
			return bad("sinceTime %q is not an RFC 3339 time", vs[0])
		}
	}
	stream, streamSet := "", false
	if vs, ok := q["stream"]; ok && len(vs) > 0 {
		stream, streamSet = vs[0], true
	}
	switch {
	case streamSet && stream != v1.LogStreamStdout && stream != v1.LogStreamStderr && stream != v1.LogStreamAll:
		return invalid("stream %q is not %s, %s or %s", stream, v1.LogStreamStdout, v1.LogStreamStderr, v1.LogStreamAll)
	case streamSet && stream != v1.LogStreamAll && tail != nil:
		return invalid("tailLines and a specific stream are mutually exclusive")
	case tail != nil && *tail < 0:
		return invalid("tailLines must be greater than or equal to 0")
	case limit != nil && *limit < 1:
		return invalid("limitBytes must be greater than 0")
	case since != nil && sinceTimeSet:
		return invalid("at most one of sinceTime or sinceSeconds may be given")
	case since != nil && *since < 1:
		return invalid("sinceSeconds must be greater than 0")
	}
	req.TailLines = tail
	req.Since = sinceTime
	req.Stream = stream
	// Longer ago than a time.Duration reaches (~292 years) is the whole
	// log; the product would overflow into a time in the future, and
	// drop every line.
	if since != nil && *since <= int64(math.MaxInt64/time.Second) {
		req.Since = now.Add(-time.Duration(*since) * time.Second)
	}
	if limit != nil {
		limitBytes = *limit
	}
	return req, limitBytes, 200, nil
}

// queryBool is a boolean query parameter as Kubernetes reads one: absent
// is false, "0" and "false" are false, anything else (even "") is true.
func queryBool(q url.Values, name string) bool {
	vs, ok := q[name]
	if !ok || len(vs) == 0 {
		return false
	}
	return vs[0] != "0" && !strings.EqualFold(vs[0], "false")
}

// queryInt is an integer query parameter as Kubernetes reads one
// (runtime.Convert_Slice_string_To_Pointer_int64): absent is nil, and a
// value that is not an integer, "" included, is an error.
func queryInt(q url.Values, name string) (*int64, error) {
	vs, ok := q[name]
	if !ok || len(vs) == 0 {
		return nil, nil
	}
	s := vs[0]
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an integer", name, s)
	}
	return &n, nil
}

// EngineLogReader is what EngineLogs needs of the container engine:
// engine.LogReader (the Docker runtime has it).
type EngineLogReader interface {
	ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) error
}

// EngineLogs is a LogReader over the container engine, as the kubelet
// reads logs: the container's run is found in the pod's status (the
// current run's containerID, or lastState.terminated's for Previous), and
// its log is read from the engine by ID. sinceSeconds and sinceTime, which
// the engine contract does not carry, are applied here to the lines'
// timestamps. Both fields are needed.
type EngineLogs struct {
	Pods   PodLister
	Engine EngineLogReader
}

// ContainerLogs implements LogReader.
func (l EngineLogs) ContainerLogs(ctx context.Context, namespace, pod, container string, req LogRequest, w io.Writer) error {
	p := findPod(l.Pods.Pods(), namespace, pod)
	if p == nil {
		return fmt.Errorf("pod %q in namespace %q: %w", pod, namespace, ErrNotFound)
	}
	id, err := LogContainerID(p, container, req.Previous)
	if err != nil {
		return err
	}
	opts := engine.LogOptions{Follow: req.Follow, Tail: -1, Timestamps: req.Timestamps || !req.Since.IsZero()}
	if req.TailLines != nil {
		opts.Tail = int(min(*req.TailLines, int64(1<<31-1)))
	}
	out := &lockedWriter{w: w}
	// The run is found: the response starts (GetKubeletContainerLogs'
	// zero-byte write to stdout).
	if _, err := out.Write(nil); err != nil {
		return err
	}
	var stdout, stderr io.Writer = out, out
	if !req.Since.IsZero() {
		fo := &sinceFilter{w: out, since: req.Since, strip: !req.Timestamps}
		fe := &sinceFilter{w: out, since: req.Since, strip: !req.Timestamps}
		defer fo.flush()
		defer fe.flush()
		stdout, stderr = fo, fe
	}
	// One stream: the other is read and dropped (the kubelet gives the
	// runtime a nil writer for it).
	switch req.Stream {
	case v1.LogStreamStdout:
		stderr = io.Discard
	case v1.LogStreamStderr:
		stdout = io.Discard
	}
	err = l.Engine.ContainerLogs(ctx, id, opts, stdout, stderr)
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("the log of container %q in pod %q is gone (its container was removed): %w", container, pod, err)
	}
	return err
}

// LogContainerID is the engine ID of the container run whose log is asked
// for, from the pod's status, as the kubelet's validateContainerLogStatus:
// with previous, the run of lastState.terminated, and an error saying so
// when there is none.
func LogContainerID(pod *v1.Pod, container string, previous bool) (string, error) {
	cs := findStatus(pod, container)
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", container, pod.Name)
	}
	last := cs.LastTerminationState.Terminated
	var id string
	switch st := cs.State; {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		id = last.ContainerID
	case st.Running != nil:
		id = cs.ContainerID
	case st.Terminated != nil:
		id = st.Terminated.ContainerID
		if id == "" && last != nil {
			id = last.ContainerID
		}
		if id == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
		}
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
		}
		id = last.ContainerID
	case st.Waiting != nil:
		switch st.Waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", container, pod.Name)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", container, pod.Name)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %s", container, pod.Name, st.Waiting.Reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, pod.Name)
	}
	id = engineID(id)
	if id == "" {
		return "", fmt.Errorf("container %q in pod %q has no container ID", container, pod.Name)
	}
	return id, nil
}

func findPod(pods []*v1.Pod, namespace, name string) *v1.Pod {
	for _, p := range pods {
		if p != nil && p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// hasContainer: name is a container, init container or ephemeral container
// of pod's spec.
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func findStatus(pod *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// lockedWriter serializes the writes of stdout and stderr into one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sinceFilter passes on the lines of one stream whose leading timestamp
// ("<RFC 3339 time> <text>", as the engine writes them with Timestamps) is
// not before since, without the timestamp when strip is set. A line whose
// timestamp does not parse is passed on whole. Each complete line is
// written with one Write, so two filters can share a writer.
type sinceFilter struct {
	w     io.Writer
	since time.Time
	strip bool
	line  []byte // the line being read, until its newline
}

const maxFilterLine = 1 << 20

func (f *sinceFilter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.line = append(f.line, p...)
			if len(f.line) > maxFilterLine {
				// A line this long is cut, as the engine cuts its own.
				if err := f.emit(); err != nil {
					return 0, err
				}
			}
			return n, nil
		}
		f.line = append(f.line, p[:i+1]...)
		p = p[i+1:]
		if err := f.emit(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush writes a last line that had no newline.
func (f *sinceFilter) flush() {
	if len(f.line) > 0 {
		_ = f.emit()
	}
}

func (f *sinceFilter) emit() error {
	line := f.line
	f.line = f.line[:0]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		_, err := f.w.Write(line)
		return err
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:sp]))
	if err != nil {
		_, err := f.w.Write(line)
		return err
	}
	if ts.Before(f.since) {
		return nil
	}
	if f.strip {
		line = line[sp+1:]
	}
	_, err = f.w.Write(line)
	return err
}
