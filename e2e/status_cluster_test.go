package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/podrun/podrun/clustertest"
)

// The pod status podrun reports in cluster mode, checked against a real
// kube-apiserver (clustertest) with the pods on the real Docker Engine:
// what the [NodeConformance] specs read of a pod's status.

// clusterNode starts an apiserver and `podrun watch` as its node e.node;
// it returns the admin client. The namespace default has its service
// account (no controller manager makes it).
func clusterNode(t *testing.T) (*env, kubernetes.Interface) {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{})
	e := newEnv(t)
	admin := c.Client(t)
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(context.Background(),
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := c.NodeKubeconfig(t, e.node)
	_, stop := e.watchWithServer("--kubeconfig", kubeconfig, "--port", "0")
	t.Cleanup(func() { stop(syscall.SIGTERM) })
	return e, admin
}

// apiPod is a pod of busybox for the node, running sh -c script.
func apiPod(node, name, script string) *v1.Pod {
	no := false
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node, AutomountServiceAccountToken: &no, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "main", Image: "podrun/busybox:test", Command: []string{"sh", "-c", script}}},
		},
	}
}

// createAPIPod creates pod; when the test ends it is deleted and its
// containers waited gone.
func createAPIPod(t *testing.T, e *env, admin kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	created, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{})
		e.waitPodGone(pod.Name)
	})
	return created
}

// apiPodWhere polls the pod until cond holds of it, failing after d.
func apiPodWhere(t *testing.T, admin kubernetes.Interface, name, what string, d time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	waitFor(t, what, d, func() bool {
		got, err := admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		p = got
		return cond(got)
	})
	return p
}

// TestClusterDeletedPodFinalStatus: as the Lifecycle Sleep Hook specs, a
// pod deleted in the API (kept by a finalizer) is reported with how its
// container really ended before it is released: terminated, with Docker's
// start and finish times, the finish after its preStop sleep.
func TestClusterDeletedPodFinalStatus(t *testing.T) {
	e, admin := clusterNode(t)
	ctx := context.Background()
	const sleep = 3
	pod := apiPod(e.node, "prestop-sleep", "trap 'exit 0' TERM; sleep 3600 & wait")
	pod.Finalizers = []string{"podrun.io/test"}
	grace := int64(30)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: sleep}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The finalizer goes, so the apiserver drops the pod.
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = admin.CoreV1().Pods("default").Patch(ctx, pod.Name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	}()
	apiPodWhere(t, admin, pod.Name, "the pod running", 2*time.Minute, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	deleted := time.Now().Truncate(time.Second)
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := apiPodWhere(t, admin, pod.Name, "the container terminated", 2*time.Minute, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term.FinishedAt.IsZero() || term.StartedAt.IsZero() || term.ContainerID == "" {
		t.Fatalf("terminated state %+v: want Docker's times and the container's ID", term)
	}
	// The preStop sleep comes before the stop: the finish cannot be
	// earlier than the deletion plus the sleep (an order, not a speed).
	if got := term.FinishedAt.Sub(deleted); got < sleep*time.Second {
		t.Errorf("finished %v after the deletion, before the preStop sleep of %ds was over", got, sleep)
	}
	if term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("exit %d (%s), want 0 Completed: the container's own exit on SIGTERM", term.ExitCode, term.Reason)
	}
	if p.Status.Phase != v1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded (its one container exited 0)", p.Status.Phase)
	}
	e.waitPodGone(pod.Name)
}

// waitPodGone waits until no container of the pod name is left.
func (e *env) waitPodGone(name string) {
	e.t.Helper()
	waitFor(e.t, "the containers of "+name+" removed", 2*time.Minute, func() bool {
		for _, c := range e.containers() {
			if c.Labels["io.podrun.pod.name"] == name {
				return false
			}
		}
		return true
	})
}

// TestClusterInitContainerFailsRestartNever: as the InitContainer
// conformance spec, every status update of a RestartNever pod whose second
// init container fails shows its app container waiting as PodInitializing,
// and the pod ends Failed, not initialized, with the kubelet's message.
func TestClusterInitContainerFailsRestartNever(t *testing.T) {
	e, admin := clusterNode(t)
	ctx := context.Background()
	pod := apiPod(e.node, "init-fails", "true")
	pod.Spec.Containers[0].Name = "run1"
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init1", Image: "podrun/busybox:test", Command: []string{"true"}},
		{Name: "init2", Image: "podrun/busybox:test", Command: []string{"false"}},
	}
	created := createAPIPod(t, e, admin, pod)
	w, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	timeout := time.After(2 * time.Minute)
	var last *v1.Pod
	for last == nil || (last.Status.Phase != v1.PodFailed && last.Status.Phase != v1.PodSucceeded) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			p, isPod := ev.Object.(*v1.Pod)
			if !isPod {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
					t.Fatalf("update with %s %+v, want waiting PodInitializing", cs.Name, cs.State)
				}
			}
			last = p
		case <-timeout:
			if last == nil {
				t.Fatal("the pod did not finish: no update of it came")
			}
			t.Fatalf("the pod did not finish; last %+v", last.Status)
		}
	}
	if last.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", last.Status.Phase)
	}
	var init *v1.PodCondition
	for i := range last.Status.Conditions {
		if last.Status.Conditions[i].Type == v1.PodInitialized {
			init = &last.Status.Conditions[i]
		}
	}
	if init == nil || init.Status != v1.ConditionFalse || init.Reason != "ContainersNotInitialized" ||
		init.Message != "containers with incomplete status: [init2]" {
		t.Errorf("Initialized = %+v", init)
	}
	if len(last.Status.InitContainerStatuses) != 2 || last.Status.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("statuses: init %+v, app %+v", last.Status.InitContainerStatuses, last.Status.ContainerStatuses)
	}
}

// TestClusterUnsafeSysctlRefused: as the Sysctls conformance spec, a pod
// setting an unsafe sysctl the node does not allow is Failed in the API
// with reason SysctlForbidden, and nothing of it runs on Docker.
func TestClusterUnsafeSysctlRefused(t *testing.T) {
	e, admin := clusterNode(t)
	pod := apiPod(e.node, "unsafe-sysctl", "sleep 3600")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000000000"}}}
	createAPIPod(t, e, admin, pod)
	p := apiPodWhere(t, admin, pod.Name, "the pod Failed", 2*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != "SysctlForbidden" || p.Status.Message != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
		t.Errorf("refused with %s %q, want the kubelet's SysctlForbidden", p.Status.Reason, p.Status.Message)
	}
	for _, c := range e.containers() {
		if c.Labels["io.podrun.pod.name"] == pod.Name {
			t.Errorf("container %s of the refused pod", c.Names)
		}
	}
}

// TestClusterServiceEnvironment: as the conformance spec "Pods should
// contain environment variables for services", a container started after
// a Service of its namespace exists has that Service's links in its
// environment, and the apiserver's (the kubernetes Service of default).
func TestClusterServiceEnvironment(t *testing.T) {
	e, admin := clusterNode(t)
	ctx := context.Background()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "fooservice", Namespace: "default"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"name": "fooservice"},
			Ports: []v1.ServicePort{{Port: 8765, TargetPort: intstr.FromInt32(8080)}}},
	}
	svc, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.CoreV1().Services("default").Delete(ctx, svc.Name, metav1.DeleteOptions{}) }()
	k8s, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Service's links, as its termination message.
	pod := apiPod(e.node, "env-of-services", "env | grep -E '^(FOOSERVICE|KUBERNETES)_' | sort > /dev/termination-log")
	createAPIPod(t, e, admin, pod)
	p := apiPodWhere(t, admin, pod.Name, "the pod done", 2*time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	msg := ""
	if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
		msg = cs[0].State.Terminated.Message
	}
	ip := svc.Spec.ClusterIP
	for _, want := range []string{
		"FOOSERVICE_SERVICE_HOST=" + ip, "FOOSERVICE_SERVICE_PORT=8765", "FOOSERVICE_PORT=tcp://" + ip + ":8765",
		"FOOSERVICE_PORT_8765_TCP_PORT=8765", "FOOSERVICE_PORT_8765_TCP_PROTO=tcp",
		"FOOSERVICE_PORT_8765_TCP=tcp://" + ip + ":8765", "FOOSERVICE_PORT_8765_TCP_ADDR=" + ip,
		"KUBERNETES_SERVICE_HOST=" + k8s.Spec.ClusterIP,
	} {
		if !strings.Contains(msg, want+"\n") {
			t.Errorf("environment lacks %s; has:\n%s", want, msg)
		}
	}
}
