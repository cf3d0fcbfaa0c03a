package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/clustertest"
)

// TestClusterEphemeralContainer: an ephemeral container added to a running
// API pod through the pods/ephemeralcontainers subresource (as `kubectl
// debug` adds it) runs in the pod on Docker, in its target container's PID
// namespace (it sees the target's process), without the sandbox or the app
// being made again; the API's ephemeralContainerStatuses say it runs, and
// its logs are read by its name.
func TestClusterEphemeralContainer(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	e := newEnv(t)
	ctx := context.Background()
	core := c.Client(t).CoreV1()
	// No controller manager makes the namespace's default service
	// account, which the apiserver's admission wants.
	if _, err := core.ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubeconfig, _ := c.NodeKubeconfig(t, e.node)
	_, stop := e.watchWithServer("--kubeconfig", kubeconfig, "--port", "0")
	defer stop(syscall.SIGTERM)

	no, grace := false, int64(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "eph", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: e.node, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "app", Image: testImage, Command: []string{"sleep", "3601"}}},
		},
	}
	if _, err := core.Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiPod := func() *v1.Pod {
		p, err := core.Pods("default").Get(ctx, "eph", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitFor(t, "the pod running in the API", 2*time.Minute, func() bool {
		p := apiPod()
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	before := e.running()
	if before["eph/app"] == "" || before["eph/POD"] == "" {
		t.Fatalf("running before: %v", before)
	}

	p := apiPod()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: testImage,
			Command: []string{"sh", "-c", "echo from-ephemeral; ps; exec sleep 3602"},
			// As the conformance spec's, and `kubectl debug -it`'s.
			Stdin: true, TTY: true},
		TargetContainerName: "app",
	})
	if _, err := core.Pods("default").UpdateEphemeralContainers(ctx, "eph", p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ephemeral container running in the API's status", 2*time.Minute, func() bool {
		for _, st := range apiPod().Status.EphemeralContainerStatuses {
			if st.Name == "debugger" && st.State.Running != nil {
				return true
			}
		}
		return false
	})
	now := e.running()
	if now["eph/app"] != before["eph/app"] || now["eph/POD"] != before["eph/POD"] {
		t.Errorf("the ephemeral container made the pod again:\nbefore %v\nafter  %v", before, now)
	}
	id := now["eph/debugger"]
	if id == "" {
		t.Fatalf("no running ephemeral container: %v", now)
	}
	ins, err := docker.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := "container:" + before["eph/app"]; string(ins.HostConfig.PidMode) != want {
		t.Errorf("PidMode %q, want %q", ins.HostConfig.PidMode, want)
	}
	if got := ins.Config.Labels["io.podrun.container.type"]; got != "ephemeral" {
		t.Errorf("type label %q", got)
	}
	// Its logs, by its name: it saw the app's process.
	var logs result
	waitFor(t, "the ephemeral container's logs", time.Minute, func() bool {
		logs = e.podrun(30*time.Second, "logs", "eph", "-c", "debugger")
		return logs.code == 0 && strings.Contains(logs.stdout, "sleep 3602")
	})
	contains(t, "the ephemeral container's logs", logs.stdout, "from-ephemeral", "sleep 3601")
}
