package runner_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// resourcePod is a pod whose one container asks for n of the extended
// resource name (limits and, as the API defaults them, requests).
func resourcePod(uid, name string, res v1.ResourceName, n int64) *v1.Pod {
	p := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	q := *resource.NewQuantity(n, resource.DecimalSI)
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits: v1.ResourceList{res: q}, Requests: v1.ResourceList{res: q},
	}
	return p
}

// outOf returns the condition "the pod is refused for want of res".
func outOf(res v1.ResourceName) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOf"+string(res)
	}
}

// TestGPUPodGetsDeviceRequest: with the engine's NVIDIA runtime, a
// container's nvidia.com/gpu limit of 2 becomes exactly Docker's `--gpus
// 2`: one device request, driver nvidia, count 2, capabilities [[gpu]].
// A container without GPUs asks for none.
func TestGPUPodGetsDeviceRequest(t *testing.T) {
	fake := newFake(t)
	fake.SetRuntimeHandlers("nvidia", "runc")
	h := start(t, fake, nil)
	p := resourcePod("g", "g-node1", runner.ResourceNvidiaGPU, 2)
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: image, Command: []string{"serve"},
		ImagePullPolicy: v1.PullIfNotPresent})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{p}}
	h.waitStatus("g", "g running", allRunning)
	want := []engine.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: [][]string{{"gpu"}}}}
	cs := h.containers("g")
	if len(cs) != 2 {
		t.Fatalf("%d containers, want 2", len(cs))
	}
	for _, c := range cs {
		got := fake.ContainerConfig(c.ID).DeviceRequests
		switch c.Name {
		case "app":
			if !reflect.DeepEqual(got, want) {
				t.Errorf("app's device requests = %+v, want %+v", got, want)
			}
		default:
			if len(got) != 0 {
				t.Errorf("%s asks for no GPU, but its device requests are %+v", c.Name, got)
			}
		}
	}
}

// TestGPUPodWithoutNvidiaRuntimeIsRefused: an engine without the NVIDIA
// runtime has no GPUs: the pod fails admission as the kubelet's does for a
// resource the node lacks (OutOfnvidia.com/gpu, the kubelet's message),
// says why, and nothing of it is made; another pod runs.
func TestGPUPodWithoutNvidiaRuntimeIsRefused(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, nil)
	g := resourcePod("g", "g-node1", runner.ResourceNvidiaGPU, 1)
	other := newPod("o", "o-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{g, other}}
	p := h.waitStatus("g", "g refused", outOf(runner.ResourceNvidiaGPU))
	for _, want := range []string{
		"Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0",
		`the container engine has no NVIDIA runtime (docker info lists no "nvidia" runtime)`,
	} {
		if !strings.Contains(p.Status.Message, want) {
			t.Errorf("message %q lacks %q", p.Status.Message, want)
		}
	}
	h.waitStatus("o", "o running", allRunning)
	if n, sbs := len(h.containers("g")), h.sandboxesOf("g"); n != 0 || len(sbs) != 0 {
		t.Errorf("refused pod has %d containers and sandboxes %v", n, sbs)
	}
}

// TestUndeclaredExtendedResourceIsRefused: an extended resource podrun
// has no source for is refused, and the message says how to declare it.
func TestUndeclaredExtendedResourceIsRefused(t *testing.T) {
	fake := newFake(t)
	fake.SetRuntimeHandlers("nvidia", "runc")
	h := start(t, fake, nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{resourcePod("d", "d-node1", "example.com/dongle", 1)}}
	p := h.waitStatus("d", "d refused", outOf("example.com/dongle"))
	if want := "declare what the node has with --extended-resource example.com/dongle=COUNT"; !strings.Contains(p.Status.Message, want) {
		t.Errorf("message %q lacks %q", p.Status.Message, want)
	}
}

// TestDeclaredExtendedResourceIsCounted: declared resources are counted
// across the pods admitted: of three pods asking for one dongle each out
// of two, the first two run and the third is refused, naming who holds
// them; when a holder goes, the refused pod runs. A declared resource is
// given to no container.
func TestDeclaredExtendedResourceIsCounted(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, func(c *runner.Config) {
		c.ExtendedResources = map[v1.ResourceName]int64{"example.com/dongle": 2}
	})
	a := resourcePod("a", "a-node1", "example.com/dongle", 1)
	b := resourcePod("b", "b-node1", "example.com/dongle", 1)
	c := resourcePod("c", "c-node1", "example.com/dongle", 1)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a, b, c}}
	h.waitStatus("a", "a running", allRunning)
	h.waitStatus("b", "b running", allRunning)
	p := h.waitStatus("c", "c refused", outOf("example.com/dongle"))
	for _, want := range []string{
		"Node didn't have enough resource: example.com/dongle, requested: 1, used: 2, capacity: 2",
		"declared with --extended-resource example.com/dongle=2",
		"held by default/a-node1, default/b-node1",
		"tried again",
	} {
		if !strings.Contains(p.Status.Message, want) {
			t.Errorf("message %q lacks %q", p.Status.Message, want)
		}
	}
	for _, ctr := range h.containers("a") {
		if got := fake.ContainerConfig(ctr.ID).DeviceRequests; len(got) != 0 {
			t.Errorf("a declared resource became device requests %+v", got)
		}
	}

	if n := fake.Calls("RuntimeHandlers"); n != 0 {
		t.Errorf("the engine was asked for its runtimes %d times for pods without GPUs", n)
	}

	// a goes: its dongle is free, and c runs.
	h.updates <- runner.PodUpdate{Op: runner.OpRemove, Pods: []*v1.Pod{a}}
	h.waitStatus("c", "c running once a is gone", allRunning)
	h.waitStatus("b", "b still running", allRunning)
}

// TestExtendedRequestsCountsInitContainers: a pod asks for the larger of
// its app containers' sum and its largest init container, as the
// kubelet's admission counts it.
func TestExtendedRequestsCountsInitContainers(t *testing.T) {
	p := resourcePod("x", "x-node1", "example.com/dongle", 1)
	p.Spec.Containers = append(p.Spec.Containers, *p.Spec.Containers[0].DeepCopy())
	p.Spec.Containers[1].Name = "app2"
	init := *p.Spec.Containers[0].DeepCopy()
	init.Name = "init"
	init.Resources.Limits["example.com/dongle"] = *resource.NewQuantity(3, resource.DecimalSI)
	init.Resources.Requests["example.com/dongle"] = *resource.NewQuantity(3, resource.DecimalSI)
	got := runner.ExtendedRequests(p)
	if got["example.com/dongle"] != 2 || len(got) != 1 {
		t.Errorf("ExtendedRequests = %v, want example.com/dongle 2 (two containers of 1)", got)
	}
	p.Spec.InitContainers = []v1.Container{init}
	if got := runner.ExtendedRequests(p); got["example.com/dongle"] != 3 {
		t.Errorf("ExtendedRequests with an init container of 3 = %v, want 3", got)
	}
	cpu := newPod("y", "y-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	cpu.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if got := runner.ExtendedRequests(cpu); len(got) != 0 {
		t.Errorf("ExtendedRequests of a cpu-only pod = %v, want none", got)
	}
}

// TestGPUCountChangeReplacesContainer: GPUs are given when a container is
// made, so a changed count replaces the container (Docker's update cannot
// change them), while a container without extended resources keeps the
// hash it always had.
func TestGPUCountChangeReplacesContainer(t *testing.T) {
	c := &resourcePod("g", "g", runner.ResourceNvidiaGPU, 1).Spec.Containers[0]
	c2 := c.DeepCopy()
	c2.Resources.Limits[runner.ResourceNvidiaGPU] = *resource.NewQuantity(2, resource.DecimalSI)
	if runner.ContainerHash(c) == runner.ContainerHash(c2) {
		t.Error("a changed GPU count keeps the container's hash: it would be updated in place, without the GPUs")
	}
	plain := v1.Container{Name: "app", Image: image, Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}
	noRes := plain.DeepCopy()
	noRes.Resources = v1.ResourceRequirements{}
	if runner.ContainerHash(&plain) != runner.ContainerHash(noRes) {
		t.Error("cpu limits changed the container hash")
	}
}

// blockingRuntimes is a fake engine whose runtime list (what GPU
// admission asks) answers only once released.
type blockingRuntimes struct {
	*enginetest.Fake
	entered chan struct{}
	release chan struct{}
}

func (b *blockingRuntimes) RuntimeHandlers(ctx context.Context) ([]string, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Fake.RuntimeHandlers(ctx)
}

// TestAdmissionNotHeldByRuntimeList: while the engine is slow to list its
// runtimes for a GPU pod's admission, a pod already admitted (its host
// port) syncs an edit and a new pod runs: the runtime list is not asked
// under admission's lock. Once the list answers, the GPU pod runs.
func TestAdmissionNotHeldByRuntimeList(t *testing.T) {
	fake := newFake(t)
	fake.SetRuntimeHandlers("nvidia", "runc")
	slow := &blockingRuntimes{Fake: fake, entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := start(t, fake, func(c *runner.Config) { c.Runtime = slow })
	release := sync.OnceFunc(func() { close(slow.release) })
	t.Cleanup(release) // before the harness stops

	a := portPod("a", "a-node1", hostPort(8080))
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{a}}
	h.waitStatus("a", "a running", allRunning)

	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{resourcePod("g", "g-node1", runner.ResourceNvidiaGPU, 1)}}
	select {
	case <-slow.entered:
	case <-time.After(time.Minute):
		t.Fatal("the GPU pod's admission never asked for the runtimes")
	}

	edited := a.DeepCopy()
	edited.Annotations = map[string]string{"edited": "yes"}
	p := portPod("p", "p-node1")
	for _, u := range []runner.PodUpdate{{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}, {Op: runner.OpAdd, Pods: []*v1.Pod{p}}} {
		select {
		case h.updates <- u:
		case <-time.After(time.Minute):
			t.Fatal("the runner takes no update while the runtimes are being listed")
		}
	}
	h.waitStatus("a", "a's edit synced", func(p *v1.Pod) bool { return p.Annotations["edited"] == "yes" && allRunning(p) })
	h.waitStatus("p", "p running", allRunning)
	if got, ok := h.r.Pod("g"); ok && allRunning(got) {
		t.Fatal("the GPU pod runs before the runtimes were listed")
	}

	release()
	h.waitStatus("g", "g running once the runtimes are listed", allRunning)
}
