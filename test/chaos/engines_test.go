//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/bench/benchkit"
	"github.com/podrun/podrun/engine/labels"
)

// view is how a scenario sees its node's objects on the engine under test:
// Docker's containers (a sandbox is an infra container), or a CRI
// runtime's pod sandboxes and containers.
type view interface {
	objects(ctx context.Context, node string) ([]object, error)
	// cleanup removes everything labelled with node.
	cleanup(ctx context.Context, node string) error
}

// object is a sandbox or container of a node, keyed as benchkit.Key keys
// them ("pod/container", "pod/POD").
type object struct {
	key, id, state string
	running        bool
	// startCutShort is a container whose start never ran its process
	// (StartError, exit code 128, never started) because the podrun that
	// asked for it was killed: containerd 1.6 cancels a StartContainer
	// whose caller goes away ("context canceled"; or the shim it was
	// starting, of the container or of its sandbox, is killed with it).
	// A podrun started again runs it as the next attempt, as the kubelet
	// does after a failed start; the exited one stays for its last state
	// until GC. state.check holds that it runs again.
	startCutShort bool
}

// dockerView sees the node on the Docker Engine.
type dockerView struct{}

func (dockerView) objects(ctx context.Context, node string) ([]object, error) {
	cs, err := benchkit.List(ctx, docker, node)
	if err != nil {
		return nil, err
	}
	out := make([]object, 0, len(cs))
	for _, c := range cs {
		out = append(out, object{key: benchkit.Key(c, node), id: c.ID, state: c.State, running: c.State == "running"})
	}
	return out, nil
}

func (dockerView) cleanup(ctx context.Context, node string) error {
	return benchkit.Cleanup(ctx, docker, node)
}

// criView sees the node on a CRI runtime: a ready sandbox counts as a
// running object, as Docker's running infra container does.
type criView struct{ rs internalapi.RuntimeService }

func (v criView) objects(ctx context.Context, node string) ([]object, error) {
	sel := map[string]string{benchkit.LabelNode: node}
	sbs, err := v.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	cs, err := v.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	out := make([]object, 0, len(sbs)+len(cs))
	pod := func(l map[string]string) string { return strings.TrimSuffix(l[labels.PodName], "-"+node) }
	for _, sb := range sbs {
		out = append(out, object{key: pod(sb.Labels) + "/POD", id: sb.Id, state: sb.State.String(),
			running: sb.State == runtimeapi.PodSandboxState_SANDBOX_READY})
	}
	for _, c := range cs {
		o := object{key: pod(c.Labels) + "/" + c.Labels[labels.ContainerName], id: c.Id, state: c.State.String(),
			running: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING}
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			st, err := v.rs.ContainerStatus(ctx, c.Id, false)
			if err != nil {
				return nil, err
			}
			s := st.GetStatus()
			o.state = fmt.Sprintf("%s %d %s: %s, started at %d", o.state, s.GetExitCode(), s.GetReason(), s.GetMessage(), s.GetStartedAt())
			o.startCutShort = s.GetStartedAt() == 0 && s.GetReason() == "StartError"
		}
		out = append(out, o)
	}
	return out, nil
}

func (v criView) cleanup(ctx context.Context, node string) error {
	return benchkit.RemoveCRINode(ctx, v.rs, node)
}

// criEndpoint is the CRI runtime the CRI scenarios run on: podrun's
// private containerd (hack/containerd.sh, which run.sh starts), or
// CHAOS_CRI_ENDPOINT.
func criEndpoint() string {
	if e := os.Getenv("CHAOS_CRI_ENDPOINT"); e != "" {
		return e
	}
	return "unix:///run/podrun-containerd/containerd.sock"
}

// criRuntime connects to criEndpoint once per test; a runtime that does
// not answer fails the test (run.sh sets it up).
func criRuntime(t *testing.T) internalapi.RuntimeService {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	rs, err := benchkit.CRI(ctx, criEndpoint())
	if err == nil {
		_, err = rs.Version(ctx, "")
	}
	if err != nil {
		t.Fatalf("the CRI scenarios need the CRI runtime at %s (run.sh starts podrun's private containerd with hack/containerd.sh): %v", criEndpoint(), err)
	}
	return rs
}
