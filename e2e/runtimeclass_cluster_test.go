package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/clustertest"
)

// TestClusterRuntimeClassFromAPI: in cluster mode a static pod's
// runtimeClassName is resolved from the cluster's RuntimeClass objects,
// read as the node (the node authorizer's rights), and the cluster's
// object wins over a manifest's of the same name: the pod runs with the
// runtime the API names (runc), not the manifest's, which the engine
// lacks (a RuntimeClass handler is a DNS label: Docker's other runtimes
// here, io.containerd.runc.v2, cannot be named).
func TestClusterRuntimeClassFromAPI(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	e := newEnv(t)
	ctx := context.Background()
	if _, err := c.Client(t).NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "api-class"}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.write("apiclass.yaml", securityPod("apiclass", "Always", "sleep 3600", "  runtimeClassName: api-class\n", "")+`---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: api-class
handler: no-such-runtime
`)
	kubeconfig, _ := c.NodeKubeconfig(t, e.node)
	_, stop := e.watchWithServer("--kubeconfig", kubeconfig, "--port", "0")
	defer stop(syscall.SIGTERM)

	name := "apiclass-" + e.node
	waitFor(t, "the pod running", 2*time.Minute, func() bool {
		p := e.psPods()[name]
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	seen := 0
	for _, ctr := range e.containers() {
		if ctr.Labels["io.podrun.pod.name"] != name {
			continue
		}
		ins, err := docker.ContainerInspect(ctx, ctr.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ins.HostConfig.Runtime != "runc" {
			t.Errorf("%s: runtime %q, want the cluster's runc", ctr.Names, ins.HostConfig.Runtime)
		}
		seen++
	}
	if seen != 2 {
		t.Errorf("%d containers of the pod (sandbox and app), want 2", seen)
	}
}
