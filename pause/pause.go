// Package pause is what runs as PID 1 of a pod's infra (sandbox) container
// when podrun builds its own infra image (`podrun pause`): it holds the pod's
// namespaces open, reaps the zombies that PID 1 inherits, and exits at once on
// SIGTERM or SIGINT so that stopping a sandbox never waits for the grace
// period.
package pause

import (
	"context"
	"errors"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// Run blocks until ctx is done or the process receives SIGTERM or SIGINT, and
// then returns nil. Meanwhile it reaps every child that exits (orphans are
// re-parented to PID 1, which must wait for them or they stay zombies).
func Run(ctx context.Context) error {
	return run(ctx, nil)
}

// run is Run; listening, when set, is called once the signal handlers are
// in place (a test's cue that a signal sent now reaches Run).
func run(ctx context.Context, listening func()) error {
	if ctx == nil {
		ctx = context.Background() // as cobra gives without ExecuteContext
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	defer signal.Stop(sigs)
	if listening != nil {
		listening()
	}

	// Children that exited before we listened sent their SIGCHLD already.
	reap()
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig := <-sigs:
			if sig == unix.SIGCHLD {
				reap()
				continue
			}
			reap()
			return nil
		}
	}
}

// reap waits, without blocking, for every child that has exited and returns
// how many it collected. SIGCHLD signals coalesce, so one signal may stand
// for several children: it loops until none is left.
func reap() int {
	n := 0
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			// ECHILD: no children at all; pid 0: children, none exited.
			return n
		}
		n++
	}
}
