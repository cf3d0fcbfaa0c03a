package enginetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/podrun/podrun/engine"
)

func TestFakeConformance(t *testing.T) {
	Run(t, NewFakeForSuite(), FakeEnv())
}

func newFakePod(t *testing.T) (*Fake, string, *engine.SandboxConfig) {
	t.Helper()
	f := NewFake("n1")
	f.AddImage("app:1")
	f.AddImage("pause:1")
	sb := &engine.SandboxConfig{Pod: engine.PodRef{UID: "u1", Name: "p", Namespace: "default"}, Image: "pause:1"}
	id, err := f.RunSandbox(context.Background(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return f, id, sb
}

func TestFakeHooks(t *testing.T) {
	ctx := context.Background()
	f, sbID, sb := newFakePod(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f.SetClock(func() time.Time { return now })

	id, err := f.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "c", Image: "app:1", Command: []string{"server"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Exit(id, 1); err == nil {
		t.Errorf("Exit of a created container: nil error")
	}
	f.FailNext("StartContainer", ErrInjected)
	if err := f.StartContainer(ctx, id); !errors.Is(err, ErrInjected) {
		t.Fatalf("StartContainer after FailNext = %v", err)
	}
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer = %v", err)
	}
	if got := f.Calls("StartContainer"); got != 2 {
		t.Errorf("Calls(StartContainer) = %d, want 2", got)
	}
	now = now.Add(time.Minute)
	if err := f.Exit(id, 2); err != nil {
		t.Fatal(err)
	}
	cs, _ := f.ListContainers(ctx)
	if len(cs) != 1 || cs[0].State != engine.StateExited || cs[0].ExitCode != 2 || !cs[0].FinishedAt.Equal(now) || !cs[0].StartedAt.Equal(now.Add(-time.Minute)) {
		t.Errorf("after Exit: %+v", cs[0])
	}
	// Restart, then OOM.
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := f.OOMKill(id); err != nil {
		t.Fatal(err)
	}
	cs, _ = f.ListContainers(ctx)
	if !cs[0].OOMKilled || cs[0].ExitCode != 137 {
		t.Errorf("after OOMKill: %+v", cs[0])
	}
	if cfg := f.ContainerConfig(id); cfg == nil || cfg.Command[0] != "server" {
		t.Errorf("ContainerConfig = %+v", cfg)
	}
	f.ResetCalls()
	if f.Calls("StartContainer") != 0 {
		t.Errorf("ResetCalls did not reset")
	}
}

func TestFakePull(t *testing.T) {
	ctx := context.Background()
	f := NewFake("n1")
	if _, err := f.ImageStatus(ctx, "x:1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("ImageStatus = %v", err)
	}
	boom := errors.New("unauthorized")
	f.SetPullError("x:1", boom)
	if _, err := f.PullImage(ctx, "x:1", nil); !errors.Is(err, boom) {
		t.Fatalf("PullImage = %v, want %v", err, boom)
	}
	f.SetPullError("x:1", nil)
	if _, err := f.PullImage(ctx, "x:1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ImageStatus(ctx, "x:1"); err != nil {
		t.Fatal(err)
	}
}

func TestFakeFollowLogsWaitsForExit(t *testing.T) {
	ctx := context.Background()
	f, sbID, sb := newFakePod(t)
	id, _ := f.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "c", Image: "app:1"})
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.ContainerLogs(ctx, id, engine.LogOptions{Follow: true, Tail: -1}, nil, nil) }()
	select {
	case err := <-done:
		t.Fatalf("follow returned while the container runs: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := f.Exit(id, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not return after exit")
	}
}

func TestFakeExecHandlerAndResync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, sbID, sb := newFakePod(t)
	evs := f.Events(ctx)
	id, _ := f.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "c", Image: "app:1"})
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ev := <-evs; ev.ContainerID != id || ev.Action != "start" || ev.PodUID != "u1" {
		t.Errorf("event %+v, want start of %s", ev, id)
	}
	f.Resync()
	if ev := <-evs; !ev.Resync {
		t.Errorf("event %+v, want Resync", ev)
	}
	var got []string
	f.SetExecHandler(func(cid string, cmd []string) (int, []byte, error) {
		got = cmd
		return 7, []byte("probe output"), nil
	})
	code, out, err := f.Exec(ctx, id, []string{"/bin/check", "-v"})
	if err != nil || code != 7 || string(out) != "probe output" || len(got) != 2 {
		t.Errorf("Exec = %d, %q, %v (handler saw %q)", code, out, err, got)
	}
	if f.Calls("Exec") != 1 {
		t.Errorf("Calls(Exec) = %d", f.Calls("Exec"))
	}
}

// TestFakeCutEvents: a cut stream says Lost, then drops events until Resync.
func TestFakeCutEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, sbID, sb := newFakePod(t)
	evs := f.Events(ctx)
	id, _ := f.CreateContainer(ctx, sbID, sb, &engine.ContainerConfig{Name: "c", Image: "app:1"})
	f.CutEvents()
	if ev := <-evs; !ev.Lost {
		t.Fatalf("event %+v, want Lost", ev)
	}
	if err := f.StartContainer(ctx, id); err != nil { // unreported
		t.Fatal(err)
	}
	f.Resync()
	if ev := <-evs; !ev.Resync {
		t.Fatalf("event %+v, want Resync (the start while cut is dropped)", ev)
	}
	if err := f.Exit(id, 1); err != nil {
		t.Fatal(err)
	}
	if ev := <-evs; ev.Action != "die" || ev.ContainerID != id {
		t.Errorf("event %+v, want die of %s after Resync", ev, id)
	}
}
