package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/health"
)

func TestPodAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	started := at(90 * time.Second)
	tests := []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"a static pod from the daemon: status.startTime", v1.Pod{Status: v1.PodStatus{StartTime: &started}}, "90s"},
		{"creationTimestamp, as kubectl", v1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(3 * time.Hour)},
			Status: v1.PodStatus{StartTime: &started}}, "3h"},
		{"neither", v1.Pod{}, "-"},
		{"a zero startTime", v1.Pod{Status: v1.PodStatus{StartTime: &metav1.Time{}}}, "-"},
	}
	for _, tc := range tests {
		if got := podAge(&tc.pod, now); got != tc.want {
			t.Errorf("%s: age %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPsThroughTheDaemon runs `ps` against a running watch's HTTP server,
// as a user does: the pods come from /pods (Docker is not asked), and AGE
// counts from when watch started the pod.
func TestPsThroughTheDaemon(t *testing.T) {
	e := newCmdEnv(t)
	t0 := time.Now().Truncate(time.Second)
	e.fake.SetClock(func() time.Time { return t0 })
	e.write("web.yaml", webPod("web"))
	socket := filepath.Join(e.g.RootDir, health.SocketName)

	var out bytes.Buffer
	var startedAfter time.Duration
	ps := func() bool {
		out.Reset()
		g := *e.g
		g.Out, g.Clock = &out, testingclock.NewFakeClock(t0.Add(90*time.Second))
		opts := &psOptions{globalOptions: &g, Daemon: true,
			Engine: func(context.Context) (baseEngine, error) { return nil, errors.New("ps asked Docker") }}
		if err := psRun(context.Background(), opts); err != nil {
			return false // the server is not up yet
		}
		if !strings.Contains(out.String(), "Running") {
			return false
		}
		start, err := daemonStartTime(socket, "web-node1")
		if err != nil {
			t.Errorf("the daemon's /pods: %v", err)
			return true
		}
		startedAfter = start.Sub(t0)
		return true
	}
	err := e.watch([]string{"--path", e.dir, "--healthz-port", "0"}, func() bool { return e.running("web-node1") != nil && ps() })
	wantExit(t, "watch", err, exitOK)
	// AGE counts from the startTime watch gave the pod: the real time it
	// was first synced, a moment (longer on a busy machine) after t0.
	want := duration.HumanDuration(90*time.Second - startedAfter)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "default web-node1 1/1 Running 0 "+want {
		t.Errorf("ps through the daemon, want AGE %s:\n%s", want, out.String())
	}
}

// daemonStartTime is the status.startTime of the pod named name on the
// /pods of the watch serving socket.
func daemonStartTime(socket, name string) (time.Time, error) {
	resp, err := health.SocketClient(socket, 10*time.Second).Get("http://podrun/pods")
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return time.Time{}, err
	}
	for _, p := range list.Items {
		if p.Name == name && p.Status.StartTime != nil {
			return p.Status.StartTime.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("no pod %s with a startTime", name)
}
