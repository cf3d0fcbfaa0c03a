package nodeapi

import (
	"bytes"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseLogRequest(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	i := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		query  string
		want   LogRequest
		limit  int64
		status int
	}{
		{"", LogRequest{}, 0, 200},
		{"follow=true&previous=1&timestamps=yes", LogRequest{Follow: true, Previous: true, Timestamps: true}, 0, 200},
		{"follow&timestamps=", LogRequest{Follow: true, Timestamps: true}, 0, 200},
		{"follow=false&previous=0&timestamps=FALSE", LogRequest{}, 0, 200},
		{"tailLines=10", LogRequest{TailLines: i(10)}, 0, 200},
		{"tailLines=0", LogRequest{TailLines: i(0)}, 0, 200},
		{"tail=5&tailLines=9", LogRequest{TailLines: i(5)}, 0, 200},
		{"tail=all&tailLines=9", LogRequest{}, 0, 200},
		{"sinceSeconds=60", LogRequest{Since: now.Add(-time.Minute)}, 0, 200},
		{"sinceSeconds=9223372036", LogRequest{Since: now.Add(-9223372036 * time.Second)}, 0, 200},
		{"sinceSeconds=9223372037", LogRequest{}, 0, 200}, // past what a Duration holds: the whole log
		{"sinceSeconds=9223372036854775807", LogRequest{}, 0, 200},
		{"sinceTime=2029-12-31T23:00:00Z", LogRequest{Since: now.Add(-time.Hour)}, 0, 200},
		{"limitBytes=100", LogRequest{}, 100, 200},
		{"tailLines=ten", LogRequest{}, 0, 400},
		{"sinceSeconds=1.5", LogRequest{}, 0, 400},
		{"limitBytes=x", LogRequest{}, 0, 400},
		{"sinceTime=yesterday", LogRequest{}, 0, 400},
		{"tailLines=-1", LogRequest{}, 0, 422},
		{"limitBytes=0", LogRequest{}, 0, 422},
		{"sinceSeconds=0", LogRequest{}, 0, 422},
		{"sinceSeconds=5&sinceTime=2029-12-31T23:00:00Z", LogRequest{}, 0, 422},
		// stream as ValidatePodLogOptions checks it: one of three, and a
		// specific one not with tailLines (nor the old tail).
		{"stream=Stdout", LogRequest{Stream: "Stdout"}, 0, 200},
		{"stream=Stderr&limitBytes=5", LogRequest{Stream: "Stderr"}, 5, 200},
		{"stream=All&tailLines=3", LogRequest{Stream: "All", TailLines: i(3)}, 0, 200},
		{"stream=Bogus", LogRequest{}, 0, 422},
		{"stream=stdout", LogRequest{}, 0, 422},
		{"stream=", LogRequest{}, 0, 422},
		{"stream=Stderr&tailLines=1", LogRequest{}, 0, 422},
		{"stream=Stdout&tail=1", LogRequest{}, 0, 422},
		// As the kubelet's parameter codec: an empty integer does not
		// decode (400); an empty or "null" sinceTime is the zero time,
		// given (so not with sinceSeconds).
		{"tailLines=", LogRequest{}, 0, 400},
		{"limitBytes=", LogRequest{}, 0, 400},
		{"sinceSeconds=", LogRequest{}, 0, 400},
		{"tail=", LogRequest{}, 0, 200}, // the old tail: empty is absent
		{"sinceTime=", LogRequest{}, 0, 200},
		{"sinceTime=null", LogRequest{}, 0, 200},
		{"sinceTime=null&sinceSeconds=5", LogRequest{}, 0, 422},
		{"sinceTime=&sinceSeconds=5", LogRequest{}, 0, 422},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, limit, status, err := parseLogRequest(q, now)
		if status != tc.status || (err == nil) != (status == 200) {
			t.Errorf("%q: status %d err %v, want %d", tc.query, status, err, tc.status)
			continue
		}
		if status != 200 {
			continue
		}
		if got.Follow != tc.want.Follow || got.Previous != tc.want.Previous || got.Timestamps != tc.want.Timestamps || got.Stream != tc.want.Stream ||
			!got.Since.Equal(tc.want.Since) || limit != tc.limit ||
			(got.TailLines == nil) != (tc.want.TailLines == nil) || (got.TailLines != nil && *got.TailLines != *tc.want.TailLines) {
			t.Errorf("%q: got %+v limit %d, want %+v limit %d", tc.query, got, limit, tc.want, tc.limit)
		}
	}
}

func TestLogContainerID(t *testing.T) {
	term := func(id string) *v1.ContainerStateTerminated { return &v1.ContainerStateTerminated{ContainerID: id} }
	pod := func(cs v1.ContainerStatus) *v1.Pod {
		cs.Name = "c"
		return &v1.Pod{Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{cs}}}
	}
	for _, tc := range []struct {
		name     string
		cs       v1.ContainerStatus
		previous bool
		want     string // ID, or part of the error
		err      bool
	}{
		{"running", v1.ContainerStatus{ContainerID: "docker://abc", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, false, "abc", false},
		{"running, previous", v1.ContainerStatus{ContainerID: "docker://abc", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			LastTerminationState: v1.ContainerState{Terminated: term("docker://old")}}, true, "old", false},
		{"no previous", v1.ContainerStatus{ContainerID: "docker://abc", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, true,
			"previous terminated container", true},
		{"terminated", v1.ContainerStatus{ContainerID: "docker://abc", State: v1.ContainerState{Terminated: term("docker://abc")}}, false, "abc", false},
		{"terminated without ID", v1.ContainerStatus{State: v1.ContainerState{Terminated: term("")},
			LastTerminationState: v1.ContainerState{Terminated: term("docker://old")}}, false, "old", false},
		{"crash loop back-off", v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: term("docker://old")}}, false, "old", false},
		{"creating", v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, false,
			"waiting to start: ContainerCreating", true},
		{"pull back-off", v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}, false,
			"trying and failing to pull image", true},
		{"no state", v1.ContainerStatus{}, false, "no logs yet", true},
		{"bare ID", v1.ContainerStatus{ContainerID: "abc", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, false, "abc", false},
	} {
		id, err := LogContainerID(pod(tc.cs), "c", tc.previous)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %q %v, want an error saying %q", tc.name, id, err, tc.want)
		case !tc.err && (err != nil || id != tc.want):
			t.Errorf("%s: %q %v, want %q", tc.name, id, err, tc.want)
		}
	}
	if _, err := LogContainerID(pod(v1.ContainerStatus{}), "other", false); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Errorf("a container with no status: %v", err)
	}
}

func TestSinceFilter(t *testing.T) {
	in := "2030-01-01T00:00:01.000000000Z old\n" +
		"2030-01-01T00:00:02.000000000Z new one\n" +
		"not a timestamped line\n" +
		"2030-01-01T00:00:03.5Z newer\n" +
		"2030-01-01T00:00:04.000000000Z last, no newline"
	since := time.Date(2030, 1, 1, 0, 0, 2, 0, time.UTC)
	for _, strip := range []bool{true, false} {
		// Every split of the input: lines and timestamps cut anywhere.
		for _, size := range []int{1, 2, 7, 31, 32, 1000} {
			var out bytes.Buffer
			f := &sinceFilter{w: &out, since: since, strip: strip}
			for rest := in; rest != ""; {
				n := min(size, len(rest))
				if _, err := io.WriteString(f, rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			f.flush()
			want := "new one\nnot a timestamped line\nnewer\nlast, no newline"
			if !strip {
				want = "2030-01-01T00:00:02.000000000Z new one\nnot a timestamped line\n2030-01-01T00:00:03.5Z newer\n2030-01-01T00:00:04.000000000Z last, no newline"
			}
			if out.String() != want {
				t.Errorf("strip=%v, writes of %d: %q, want %q", strip, size, out.String(), want)
			}
		}
	}
}
