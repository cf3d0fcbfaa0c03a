package cri

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/engine/labels"
)

// exitLagRuntime is containerd 1.6's CRI as it answers the removal of a
// container whose process has just ended: the task is gone, the exit not
// yet recorded, so the status says running and the removal is refused
// ("still running, to stop first") until the status is asked again
// recordAfter times.
type exitLagRuntime struct {
	internalapi.RuntimeService // what the test does not script: unused

	mu          sync.Mutex
	refusal     string // the error of a refused removal, less the container's ID
	recordAfter int
	statusCalls int
	removes     int
}

func (f *exitLagRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusCalls++
	state := runtimeapi.ContainerState_CONTAINER_RUNNING
	if f.statusCalls > f.recordAfter {
		state = runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: id, State: state, Labels: map[string]string{labels.Node: "lag-node"}}}, nil
}

func (f *exitLagRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removes++
	if f.statusCalls <= f.recordAfter {
		return errors.New(strings.ReplaceAll(f.refusal, "ID", id))
	}
	return nil
}

// TestRemoveContainerWhoseExitIsNotRecordedYet: RemoveContainer removes a
// container (killing it if it runs), so a container that has just ended
// is removed too, once the CRI has recorded its exit, not refused for a
// moment's lag (the chaos of a busy machine hit it).
//
// containerd refuses it in two ways, by when the removal's forced stop
// comes: after the task ended (no task to stop, the status still says
// running), or as it ends (the kill reaches the shim as the task's end
// closes it; seen once in a CI run).
func TestRemoveContainerWhoseExitIsNotRecordedYet(t *testing.T) {
	for name, refusal := range map[string]string{
		"task ended":  `rpc error: code = Unknown desc = failed to set removing state for container "ID": container is still running, to stop first`,
		"task ending": `rpc error: code = Unknown desc = failed to forcibly stop container "ID": failed to kill container "ID": ttrpc: closed: unknown`,
	} {
		t.Run(name, func(t *testing.T) {
			fake := &exitLagRuntime{refusal: refusal, recordAfter: 3}
			r := &Runtime{rs: fake, node: "lag-node", logDir: t.TempDir(), log: slog.New(slog.DiscardHandler),
				owned: map[string]bool{}, statuses: map[string]*runtimeapi.ContainerStatus{}, sandboxIPs: map[string]string{}}
			if err := r.RemoveContainer(context.Background(), "c0ffee"); err != nil {
				t.Fatalf("RemoveContainer: %v", err)
			}
			if fake.removes != 2 {
				t.Errorf("%d removals asked, want the refused one and one once the exit was recorded", fake.removes)
			}
		})
	}
}
