package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// containerdConn is a connection to containerd's own gRPC services on the
// CRI socket (content, images, tasks), dialed on first use. A CRI runtime
// that is not containerd refuses them; what uses them does without.
type containerdConn struct {
	endpoint string

	mu     sync.Mutex
	closed bool
	conn   *grpc.ClientConn
}

func (c *containerdConn) get() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, errors.New("runtime closed")
	case c.conn != nil:
		return c.conn, nil
	}
	conn, err := grpc.NewClient(c.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", c.endpoint, err)
	}
	c.conn = conn
	return conn, nil
}

func (c *containerdConn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// inCRINamespace is ctx for a call of containerd's services on the
// objects the CRI made.
func inCRINamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", criNamespace)
}

// isStrayTask reports whether err is containerd's refusal to remove a
// container whose task runs though its CRI status says it does not.
func isStrayTask(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "running task")
}

// strayTaskWait bounds how long endStrayTask waits for the killed task to
// exit.
const strayTaskWait = 30 * time.Second

// endStrayTask kills and deletes the task of container id through
// containerd's tasks service. It is for a container the CRI cannot stop:
// containerd 1.6, when its client goes away during StartContainer (podrun
// killed), can leave the task running while the CRI status still says
// created; the CRI's StopContainer then does nothing and its
// RemoveContainer fails ("cannot delete running task"), for good.
func (r *Runtime) endStrayTask(ctx context.Context, id string) error {
	conn, err := r.containerd.get()
	if err != nil {
		return err
	}
	tasks := tasksapi.NewTasksClient(conn)
	ctx, cancel := context.WithTimeout(inCRINamespace(ctx), strayTaskWait)
	defer cancel()
	// Waiting is asked before the kill, so that the exit cannot come
	// between them unseen.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	exited := make(chan error, 1)
	go func() {
		_, err := tasks.Wait(waitCtx, &tasksapi.WaitRequest{ContainerID: id})
		exited <- err
	}()
	if _, err := tasks.Kill(ctx, &tasksapi.KillRequest{ContainerID: id, Signal: uint32(unix.SIGKILL), All: true}); err != nil &&
		status.Code(err) != codes.NotFound {
		return fmt.Errorf("kill task %s: %w", shortID(id), err)
	}
	if err := <-exited; err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("wait for task %s: %w", shortID(id), err)
	}
	if _, err := tasks.Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete task %s: %w", shortID(id), err)
	}
	return nil
}
