package cmd

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

// resourcePod is webPod asking for n of the extended resource res.
func resourcePod(name, res string, n int) string {
	return webPod(name) + "    resources: {limits: {" + res + ": " + string(rune('0'+n)) + "}}\n"
}

// TestExtendedResourceFlag: --extended-resource is repeatable, takes
// comma-separated lists (as a config-file list comes), and refuses what
// is no extended resource, a bad count, and a name given twice.
func TestExtendedResourceFlag(t *testing.T) {
	var got *onceOptions
	build := func(g *globalOptions) *cobra.Command {
		return newOnceCmd(g, func(_ context.Context, o *onceOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "once", "a.yaml", "--extended-resource", "example.com/dongle=1",
		"--extended-resource", "nvidia.com/gpu=2,example.com/licence=0"); err != nil {
		t.Fatal(err)
	}
	want := extendedResources{"example.com/dongle": 1, "nvidia.com/gpu": 2, "example.com/licence": 0}
	if !reflect.DeepEqual(got.ExtendedResources, want) {
		t.Errorf("ExtendedResources = %v, want %v", got.ExtendedResources, want)
	}
	for _, bad := range []string{"cpu=2", "hugepages-2Mi=4", "example.com/dongle", "example.com/dongle=-1",
		"example.com/dongle=1.5", "example.com/dongle=1,example.com/dongle=2", "kubernetes.io/thing=1"} {
		if err := parse(t, build, "once", "a.yaml", "--extended-resource", bad); err == nil {
			t.Errorf("--extended-resource %s accepted", bad)
		}
	}
}

// TestExtendedResourceFromConfigFile: the config file declares extended
// resources as a list, as watch's other repeatable flags.
func TestExtendedResourceFromConfigFile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("extended-resource: [example.com/dongle=1, example.com/key=3]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := watchOptionsOf(t, "--config", cfg, "--path", "/etc/pods")
	want := extendedResources{"example.com/dongle": 1, "example.com/key": 3}
	if !reflect.DeepEqual(got.ExtendedResources, want) {
		t.Errorf("ExtendedResources = %v, want %v", got.ExtendedResources, want)
	}
}

// TestOnceRefusesGPUPodWithoutNvidiaRuntime: on an engine without the
// NVIDIA runtime, once reports the GPU pod Failed OutOfnvidia.com/gpu,
// says why under the table, and exits 1; the other pod is up.
func TestOnceRefusesGPUPodWithoutNvidiaRuntime(t *testing.T) {
	e := newCmdEnv(t)
	g := e.write("gpu.yaml", resourcePod("gpu", "nvidia.com/gpu", 1))
	w := e.write("web.yaml", webPod("web"))
	err := e.once(g, w, "--timeout", "10s")
	wantExit(t, "once", err, exitPodFailed, "pods failed: [default/gpu-node1]")
	report := e.out.String()
	for _, s := range []string{
		"default    gpu-node1  Failed   -          OutOfnvidia.com/gpu",
		"default    web-node1  Running  app        Running",
		"default/gpu-node1: Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0: " +
			`the container engine has no NVIDIA runtime (docker info lists no "nvidia" runtime)`,
	} {
		if !strings.Contains(report, s) {
			t.Errorf("report lacks %q:\n%s", s, report)
		}
	}
}

// TestOnceRunsGPUPodWithNvidiaRuntime: with the runtime, the container
// is made with the GPUs it asks for.
func TestOnceRunsGPUPodWithNvidiaRuntime(t *testing.T) {
	e := newCmdEnv(t)
	e.fake.SetRuntimeHandlers("nvidia", "runc")
	g := e.write("gpu.yaml", resourcePod("gpu", "nvidia.com/gpu", 2))
	wantExit(t, "once", e.once(g, "--timeout", "10s"), exitOK)
	c := e.running("gpu-node1")
	if c == nil {
		t.Fatalf("the GPU pod does not run:\n%s", e.out)
	}
	reqs := e.fake.ContainerConfig(c.ID).DeviceRequests
	if len(reqs) != 1 || reqs[0].Driver != "nvidia" || reqs[0].Count != 2 || !reflect.DeepEqual(reqs[0].Capabilities, [][]string{{"gpu"}}) {
		t.Errorf("device requests %+v, want nvidia x2 [[gpu]]", reqs)
	}
}

// TestOnceCountsDeclaredExtendedResources: with one dongle declared, the
// first pod that asks for it runs and the second is refused.
func TestOnceCountsDeclaredExtendedResources(t *testing.T) {
	e := newCmdEnv(t)
	a := e.write("a.yaml", resourcePod("a", "example.com/dongle", 1))
	b := e.write("b.yaml", resourcePod("b", "example.com/dongle", 1))
	err := e.once(a, b, "--timeout", "10s", "--extended-resource", "example.com/dongle=1")
	wantExit(t, "once", err, exitPodFailed, "pods failed: [default/b-node1]")
	report := e.out.String()
	for _, s := range []string{
		"default    a-node1  Running  app        Running",
		"default    b-node1  Failed   -          OutOfexample.com/dongle",
		"requested: 1, used: 1, capacity: 1: declared with --extended-resource example.com/dongle=1; held by default/a-node1",
	} {
		if !strings.Contains(report, s) {
			t.Errorf("report lacks %q:\n%s", s, report)
		}
	}
	if n := len(e.containers("b-node1")); n != 0 {
		t.Errorf("the refused pod has %d containers", n)
	}
}

// The wait: a pod refused a resource does not end it (the holder is
// reported up), as one refused its host ports.
func TestConditionMetOutOfResource(t *testing.T) {
	refused := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfexample.com/dongle"}}
	pending := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodPending}}
	if met, failed := conditionMet([]*v1.Pod{refused, pending}, waitRunning); met || failed {
		t.Errorf("conditionMet = %v, %v; want the wait to go on", met, failed)
	}
}
