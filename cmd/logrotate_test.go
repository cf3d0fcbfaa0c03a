package cmd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	testingclock "k8s.io/utils/clock/testing"
)

// rotatingEngine is the fake engine with the CRI engine's log rotation:
// each pass is sent on passes, and answered with err.
type rotatingEngine struct {
	*fakeEngine
	passes chan [2]int64
	err    error
}

func (e *rotatingEngine) RotateLogs(ctx context.Context, maxSize int64, maxFiles int) error {
	select {
	case e.passes <- [2]int64{maxSize, int64(maxFiles)}:
	case <-ctx.Done():
	}
	return e.err
}

// TestLogRotationEveryMonitorInterval: a pass at once, then one every
// 10 s of the clock, until the context ends; a pass's failures are logged
// one line each, and the next pass comes all the same.
func TestLogRotationEveryMonitorInterval(t *testing.T) {
	e := newCmdEnv(t)
	clk := testingclock.NewFakeClock(time.Now())
	rt := &rotatingEngine{passes: make(chan [2]int64),
		err: errors.Join(errors.New("container a: reopen"), errors.New("container b: rename"))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rotateLogs(ctx, rt, logRotationOptions{MaxSize: 1 << 20, MaxFiles: 3}, clk, e.g.Log)
	}()
	if got := <-rt.passes; got != [2]int64{1 << 20, 3} {
		t.Errorf("pass with %v, want 1Mi and 3 files", got)
	}
	for range 2 {
		eventually(t, "the ticker", clk.HasWaiters)
		clk.Step(containerLogMonitorInterval - time.Nanosecond)
		select {
		case <-rt.passes:
			t.Fatal("a pass before the interval")
		default:
		}
		clk.Step(time.Nanosecond)
		<-rt.passes
	}
	// Ended after the third pass's lines, which a pass cut short by the
	// end would not log.
	eventually(t, "the third pass logged", func() bool { return len(e.log.find("container log rotation")) == 6 })
	cancel()
	<-done
	var logged []string
	for _, r := range e.log.find("container log rotation") {
		logged = append(logged, r.attrs["err"])
	}
	if want := slices.Repeat([]string{"container a: reopen", "container b: rename"}, 3); !slices.Equal(logged, want) {
		t.Errorf("logged %q, want a line per failure of each pass %q", logged, want)
	}
}

// TestWatchRotatesCRILogs: watch has an engine that rotates its logs (the
// CRI engine) rotate them with the flags' size and count; the Docker
// engine has no rotation, and watch runs without.
func TestWatchRotatesCRILogs(t *testing.T) {
	e := newCmdEnv(t)
	rt := &rotatingEngine{fakeEngine: e.eng, passes: make(chan [2]int64, 1)}
	var pass [2]int64
	err := e.watchWith(func(context.Context) (watchEngine, error) { return rt, nil },
		[]string{"--path", e.dir, "--container-log-max-size", "64Ki", "--container-log-max-files", "2"},
		func() bool {
			select {
			case pass = <-rt.passes:
				return true
			default:
				return false
			}
		})
	wantExit(t, "watch", err, exitOK)
	if pass != [2]int64{64 << 10, 2} {
		t.Errorf("rotation with %v, want 64Ki and 2 files", pass)
	}
}

func TestLogRotationFlags(t *testing.T) {
	var got *watchOptions
	build := func(g *globalOptions) *cobra.Command {
		return newWatchCmd(g, func(_ context.Context, o *watchOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "watch", "--path", "x"); err != nil {
		t.Fatal(err)
	}
	if got.LogRotation.MaxSize != 10<<20 || got.LogRotation.MaxFiles != 5 {
		t.Errorf("defaults %+v, want the kubelet's 10Mi and 5", got.LogRotation)
	}
	for _, bad := range [][]string{
		{"--container-log-max-size", "ten"}, {"--container-log-max-size", "0"}, {"--container-log-max-size", "-1Mi"},
		{"--container-log-max-files", "1"},
	} {
		err := parse(t, build, append([]string{"watch", "--path", "x"}, bad...)...)
		wantExit(t, strings.Join(bad, " "), err, exitBadInput, bad[0])
	}
}
