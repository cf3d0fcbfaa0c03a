package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// RemovalReason says why Docker could not remove a container (yet).
type RemovalReason string

const (
	// RemovalBusy: Docker could not remove the container's files because a
	// mount of them is still held ("unlinkat .../merged: device or resource
	// busy"), typically its overlay after a dockerd restart. Docker marks
	// it "dead"; a removal later, once the mount is released, succeeds.
	RemovalBusy RemovalReason = "busy"
	// RemovalDead: the container is in Docker's "dead" state (a removal of
	// it failed before, here or at dockerd's start) and could not be
	// removed now either.
	RemovalDead RemovalReason = "dead"
	// RemovalInProgress: another removal of the container is under way
	// ("removal of container ... is already in progress") and had not
	// ended after removalWait.
	RemovalInProgress RemovalReason = "in progress"
	// RemovalFailed: any other answer of Docker to a remove that left the
	// container in place.
	RemovalFailed RemovalReason = "failed"
)

// RemovalError is returned (wrapped) by RemoveContainer and RemoveSandbox
// when Docker answered a remove but the container is still there. It names
// the container and the state Docker left it in; when Retryable, a removal
// later is expected to succeed, and the caller should try again then
// (container garbage collection does, every period).
type RemovalError struct {
	ID     string // full ID
	Name   string // Docker's name, without the leading "/"; "" if unknown
	State  string // Docker's state after the attempt ("dead", "removing", ...); "" if unknown
	Reason RemovalReason
	Err    error // Docker's answer to the remove
}

func (e *RemovalError) Error() string {
	name := e.Name
	if name == "" {
		name = shortID(e.ID)
	} else {
		name += " (" + shortID(e.ID) + ")"
	}
	state := e.State
	if state == "" {
		state = "in an unknown state"
	}
	what := "could not be removed"
	switch e.Reason {
	case RemovalBusy:
		what += ": its filesystem is still mounted (device or resource busy)"
	case RemovalInProgress:
		what += ": another removal of it is still in progress"
	}
	if e.Retryable() {
		what += "; retry later"
	}
	return fmt.Sprintf("container %s is %s in Docker and %s: %v", name, state, what, e.Err)
}

func (e *RemovalError) Unwrap() error { return e.Err }

// Retryable reports whether a later removal may succeed: the container is
// busy, dead, or being removed, rather than refused for good.
func (e *RemovalError) Retryable() bool { return e.Reason != RemovalFailed }

// DockerState is the container's state in Docker after the failed removal.
func (e *RemovalError) DockerState() string { return e.State }

// classifyRemoval says why a remove that Docker answered with err left the
// container in Docker state state ("" if unknown). A busy mount wins over
// the state (it is why the container is dead); then a dead container; then
// a removal in progress (Docker's answer, or its "removing" state).
func classifyRemoval(err error, state string) RemovalReason {
	msg := ""
	if err != nil {
		msg = strings.ToLower(err.Error())
	}
	switch {
	case strings.Contains(msg, "device or resource busy"):
		return RemovalBusy
	case state == container.StateDead:
		return RemovalDead
	case state == container.StateRemoving, isRemovalInProgress(err):
		return RemovalInProgress
	}
	return RemovalFailed
}

// isRemovalInProgress: Docker refused the remove because another one of
// the same container is under way.
func isRemovalInProgress(err error) bool {
	return err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// removalWait bounds how long a remove waits for another removal of the
// same container (Docker's "already in progress") to end. A variable for
// the tests.
var removalWait = 3 * time.Second

// removalFailed makes the error of a remove of id that Docker answered with
// err (neither "not found" nor unreachable): nil when the container is gone
// after all (another removal took it), else a *RemovalError with the state
// Docker left it in. While another removal is under way (the container is
// "removing"), it waits for that one's outcome, up to removalWait, polling.
func (r *Runtime) removalFailed(ctx context.Context, id string, err error) error {
	deadline := time.Now().Add(removalWait)
	for {
		ins, ierr := r.inspect(ctx, id)
		if cerrdefs.IsNotFound(ierr) {
			return nil
		}
		rerr := &RemovalError{ID: id, Err: err}
		if ierr == nil {
			rerr.State = stateOf(ins)
			rerr.Name = strings.TrimPrefix(ins.Name, "/")
		}
		rerr.Reason = classifyRemoval(err, rerr.State)
		if rerr.State != container.StateRemoving || !time.Now().Before(deadline) {
			return rerr
		}
		select {
		case <-ctx.Done():
			return rerr
		case <-time.After(50 * time.Millisecond):
		}
	}
}
