package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podrun/podrun/clustertest"
	"github.com/podrun/podrun/manifest"

	"github.com/podrun/podrun/kubeclient"
)

// These tests run the Manager against a real etcd and kube-apiserver
// (clustertest) as the node's own identity, system:node:node1, under the
// Node authorizer and the NodeRestriction admission plugin: a node may
// create mirror pods of its own, patch the status of its pods, and delete
// them. The runner's side (PodStatuses) is the test's.

// failAfter bounds every wait; it is never what a test measures.
const failAfter = 45 * time.Second

// runnerPods is the runner's status cache as the test sets it.
type runnerPods struct {
	mu      sync.Mutex
	pods    map[types.UID]*v1.Pod
	final   map[types.UID]*v1.Pod
	changed chan struct{}
}

func newRunnerPods() *runnerPods {
	return &runnerPods{pods: map[types.UID]*v1.Pod{}, final: map[types.UID]*v1.Pod{}, changed: make(chan struct{})}
}

func (r *runnerPods) FinalPod(uid types.UID) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.final[uid]
	return p, ok
}

// finish removes the pod as the runner does one the API deleted: its last
// status, final, stays for FinalPod.
func (r *runnerPods) finish(final *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.final[final.UID] = final.DeepCopy()
	delete(r.pods, final.UID)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *runnerPods) Pods() []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*v1.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	return out
}

func (r *runnerPods) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *runnerPods) set(p *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[p.UID] = p.DeepCopy()
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *runnerPods) remove(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, uid)
	close(r.changed)
	r.changed = make(chan struct{})
}

// running gives pod the status the runner computes for a pod whose
// containers all run (restarts times each).
func running(pod *v1.Pod, ip string, restarts int32) *v1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	started := true
	p.Status = v1.PodStatus{
		Phase: v1.PodRunning, HostIP: "192.0.2.10", HostIPs: []v1.HostIP{{IP: "192.0.2.10"}},
		PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker-pullable://" + c.Image + "@sha256:" + strings.Repeat("ab", 32),
			ContainerID: fmt.Sprintf("docker://%s-%d", c.Name, restarts), Ready: true, Started: &started,
			RestartCount: restarts, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return p
}

// metricValue is the value of a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// kubeadmStatic is a kubeadm static pod as podrun's file source makes it.
func kubeadmStatic(t *testing.T, file string, mod func(string) string) *v1.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "manifest", "testdata", "kubeadm", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if mod != nil {
		text = mod(text)
	}
	snap, err := manifest.Parse("/etc/kubernetes/manifests/"+file, []byte(text), manifest.Options{NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pods) != 1 {
		t.Fatalf("%s: %d pods", file, len(snap.Pods))
	}
	return snap.Pods[0]
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(failAfter)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		if why != "" {
			last = why
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getPod(t *testing.T, c kubernetes.Interface, ns, name string) (*v1.Pod, error) {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("get %s/%s: %v", ns, name, err)
	}
	return p, err
}

// syncLog is a log written by the Manager and read by the test.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type clusterHarness struct {
	c       *clustertest.Cluster
	admin   kubernetes.Interface
	rp      *runnerPods
	mgr     *Manager
	metrics *Metrics
}

// startManager starts a cluster with Node node1 and a Manager as node1.
// Given readNode, the Manager reads the Node's UID itself rather than
// being told it.
func startManager(t *testing.T, readNode bool) *clusterHarness {
	c := clustertest.Start(t, clustertest.Options{})
	admin := c.Client(t)
	ctx := context.Background()
	node, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, cfg := c.NodeKubeconfig(t, "node1")
	nodeClient, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &clusterHarness{c: c, admin: admin, rp: newRunnerPods(), metrics: NewMetrics(prometheus.NewRegistry())}
	logs := &syncLog{}
	h.mgr, err = NewManager(Options{
		Client:       func() (Client, error) { return nodeClient, nil },
		NodeName:     "node1",
		NodeUID:      func() types.UID { return node.UID },
		Pods:         h.rp,
		SyncPeriod:   time.Second,
		BatchDelay:   50 * time.Millisecond,
		MaxBackoff:   200 * time.Millisecond,
		ReleaseAfter: time.Second,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:      h.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	if readNode {
		h.mgr.opts.NodeUID = nil
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.mgr.Run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(failAfter):
			t.Error("Run did not return after its context ended")
		}
		if t.Failed() || os.Getenv("PODRUN_TEST_LOGS") != "" {
			t.Logf("manager log:\n%s", logs.String())
		}
	})
	return h
}

func TestMirrorPodsAgainstAPIServer(t *testing.T) {
	h := startManager(t, true)
	admin := h.admin
	ctx := context.Background()
	etcd := kubeadmStatic(t, "etcd.yaml", nil)
	h.rp.set(running(etcd, "192.0.2.10", 0))

	var mirrorUID types.UID
	eventually(t, "etcd's mirror pod, Running", func() (bool, string) {
		m, err := getPod(t, admin, "kube-system", "etcd-node1")
		if err != nil {
			return false, err.Error()
		}
		mirrorUID = m.UID
		return m.Status.Phase == v1.PodRunning && m.Status.PodIP == "192.0.2.10" && len(m.Status.ContainerStatuses) == 1 &&
			m.Status.ContainerStatuses[0].Ready, fmt.Sprintf("phase %s", m.Status.Phase)
	})
	m, _ := getPod(t, admin, "kube-system", "etcd-node1")
	if m.Annotations[v1.MirrorPodAnnotationKey] != etcd.Annotations[manifest.AnnotationConfigHash] {
		t.Errorf("config.mirror %q, want the static pod's hash", m.Annotations[v1.MirrorPodAnnotationKey])
	}
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].Name != "node1" {
		t.Errorf("owner references %v", m.OwnerReferences)
	}
	if m.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("QOS class %q", m.Status.QOSClass)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized, v1.PodScheduled} {
		if c := findCondition(m.Status.Conditions, ct); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("condition %s: %v", ct, c)
		}
	}

	t.Run("only changes are sent", func(t *testing.T) {
		// The PATCH that made the mirror Running is counted when its
		// answer is back, which may be after the test saw its effect:
		// the window starts once it is counted.
		ok := h.metrics.patches.WithLabelValues("ok")
		eventually(t, "the status PATCH counted", func() (bool, string) {
			return metricValue(ok) >= 1, fmt.Sprint(metricValue(ok))
		})
		before := metricValue(ok)
		time.Sleep(3500 * time.Millisecond) // three periodic rounds
		if after := metricValue(ok); after != before {
			t.Errorf("%v status PATCHes without a change", after-before)
		}
	})

	t.Run("deleted mirror is made again", func(t *testing.T) {
		if err := admin.CoreV1().Pods("kube-system").Delete(ctx, "etcd-node1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a new mirror pod, Running", func() (bool, string) {
			m, err := getPod(t, admin, "kube-system", "etcd-node1")
			if err != nil {
				return false, err.Error()
			}
			return m.UID != mirrorUID && m.DeletionTimestamp == nil && m.Status.Phase == v1.PodRunning, string(m.UID)
		})
	})

	t.Run("edited static pod", func(t *testing.T) {
		edited := kubeadmStatic(t, "etcd.yaml", func(s string) string {
			return strings.Replace(s, "registry.k8s.io/etcd:3.5.15-0", "registry.k8s.io/etcd:3.5.16-0", 1)
		})
		if edited.UID != etcd.UID {
			t.Fatal("an edit changed the static UID")
		}
		h.rp.set(running(edited, "192.0.2.10", 0))
		eventually(t, "the mirror of the edit", func() (bool, string) {
			m, err := getPod(t, admin, "kube-system", "etcd-node1")
			if err != nil {
				return false, err.Error()
			}
			return m.Annotations[v1.MirrorPodAnnotationKey] == edited.Annotations[manifest.AnnotationConfigHash] &&
				m.Spec.Containers[0].Image == "registry.k8s.io/etcd:3.5.16-0" && m.Status.Phase == v1.PodRunning, m.Spec.Containers[0].Image
		})
	})

	t.Run("refused mirror", func(t *testing.T) {
		// NodeRestriction refuses a mirror pod that references a
		// ConfigMap; the static pod runs without one, and that is shown.
		withCM := kubeadmStatic(t, "kube-scheduler.yaml", func(s string) string {
			return strings.Replace(s, "  volumes:\n", "  volumes:\n  - name: conf\n    configMap:\n      name: sched-conf\n", 1)
		})
		h.rp.set(running(withCM, "192.0.2.10", 0))
		eventually(t, "the refusal", func() (bool, string) {
			msg, ok := h.mgr.MirrorErrors()[withCM.UID]
			return ok && strings.Contains(msg, "configmaps"), msg
		})
		out := h.mgr.AnnotateMirrorErrors([]*v1.Pod{withCM})
		if !strings.Contains(out[0].Annotations[AnnotationMirrorError], "refused") {
			t.Errorf("annotation %q", out[0].Annotations[AnnotationMirrorError])
		}
		if _, err := getPod(t, admin, "kube-system", withCM.Name); !apierrors.IsNotFound(err) {
			t.Errorf("a refused mirror pod exists: %v", err)
		}
		if v := metricValue(h.metrics.refuse); v != 1 {
			t.Errorf("podrun_mirror_pods_missing = %v", v)
		}
		h.rp.remove(withCM.UID)
		eventually(t, "the refusal forgotten", func() (bool, string) {
			_, ok := h.mgr.MirrorErrors()[withCM.UID]
			return !ok, ""
		})
	})

	t.Run("refused mirror asked again", func(t *testing.T) {
		// The Priority admission plugin refuses a pod naming a
		// PriorityClass that does not exist yet, as it refuses kubeadm's
		// system-node-critical pods until the apiserver has made that
		// class: once it exists, the mirror pod is made within the
		// back-off's first steps, not after its cap.
		const class = "podrun-made-later"
		later := kubeadmStatic(t, "kube-scheduler.yaml", func(s string) string {
			return strings.Replace(s, "  priority: 2000001000\n  priorityClassName: system-node-critical\n", "  priorityClassName: "+class+"\n", 1)
		})
		h.rp.set(running(later, "192.0.2.10", 0))
		t.Cleanup(func() { h.rp.remove(later.UID) })
		eventually(t, "the refusal", func() (bool, string) {
			msg, ok := h.mgr.MirrorErrors()[later.UID]
			return ok && strings.Contains(msg, class), msg
		})
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}
		if _, err := admin.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
		})
		eventually(t, "the mirror pod, once its PriorityClass exists", func() (bool, string) {
			m, err := getPod(t, admin, "kube-system", later.Name)
			if err != nil {
				return false, err.Error()
			}
			if msg, ok := h.mgr.MirrorErrors()[later.UID]; ok {
				return false, "made, but the refusal is still shown: " + msg
			}
			return m.Spec.PriorityClassName == class, m.Spec.PriorityClassName
		})
	})

	t.Run("static pod gone", func(t *testing.T) {
		h.rp.remove(etcd.UID)
		eventually(t, "the mirror pod deleted", func() (bool, string) {
			_, err := getPod(t, admin, "kube-system", "etcd-node1")
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
}

// apiPod is a pod of the API as the apiserver source hands it to the
// runner: the API's name, namespace and UID.
func asRunnerPod(p *v1.Pod) *v1.Pod {
	out := p.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[manifest.AnnotationConfigSource] = manifest.ConfigSourceAPI
	out.Annotations[manifest.AnnotationSource] = "apiserver"
	out.Status = v1.PodStatus{}
	return out
}

func newAPIPod(t *testing.T, admin kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	no := false
	grace := int64(20)
	p, err := admin.CoreV1().Pods("default").Create(context.Background(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: "node1", AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: "example.com/gate"}},
			Containers:     []v1.Container{{Name: "app", Image: "podrun/busybox:test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAPIPodStatusAgainstAPIServer(t *testing.T) {
	h := startManager(t, false)
	admin := h.admin
	ctx := context.Background()

	web := newAPIPod(t, admin, "web")
	// A controller's readiness gate, in the API before the node reports.
	web.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	web, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, web, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.rp.set(running(asRunnerPod(web), "10.1.0.5", 0))
	eventually(t, "web Running in the API", func() (bool, string) {
		p, err := getPod(t, admin, "default", "web")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning && p.Status.PodIP == "10.1.0.5" && len(p.Status.ContainerStatuses) == 1,
			string(p.Status.Phase)
	})
	p, _ := getPod(t, admin, "default", "web")
	if c := findCondition(p.Status.Conditions, "example.com/gate"); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("the controller's condition was not kept: %v", p.Status.Conditions)
	}
	if cs := p.Status.ContainerStatuses[0]; !strings.HasPrefix(cs.ImageID, "docker-pullable://") || cs.ContainerID != "docker://app-0" {
		t.Errorf("container status %+v", cs)
	}

	t.Run("a change is sent", func(t *testing.T) {
		h.rp.set(running(asRunnerPod(web), "10.1.0.5", 3))
		eventually(t, "restartCount 3", func() (bool, string) {
			p, err := getPod(t, admin, "default", "web")
			if err != nil {
				return false, err.Error()
			}
			return p.Status.ContainerStatuses[0].RestartCount == 3, ""
		})
	})

	t.Run("readiness gate", func(t *testing.T) {
		// As the conformance spec: another writes the gate's condition
		// with a status patch; Ready follows it, the containers ready.
		gate := func(status v1.ConditionStatus) {
			patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"example.com/gate","status":%q}]}}`, status)
			if _, err := admin.CoreV1().Pods("default").Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
		}
		readyIs := func(want v1.ConditionStatus, reason string) {
			t.Helper()
			eventually(t, "Ready "+string(want), func() (bool, string) {
				p, err := getPod(t, admin, "default", "web")
				if err != nil {
					return false, err.Error()
				}
				c := findCondition(p.Status.Conditions, v1.PodReady)
				return c != nil && c.Status == want && c.Reason == reason, fmt.Sprint(p.Status.Conditions)
			})
		}
		readyIs(v1.ConditionTrue, "")
		gate(v1.ConditionFalse)
		readyIs(v1.ConditionFalse, "ReadinessGatesNotReady")
		gate(v1.ConditionTrue)
		readyIs(v1.ConditionTrue, "")
	})

	t.Run("apiserver away", func(t *testing.T) {
		h.c.StopAPIServer()
		// The runner goes on, and the Manager does not hold it up.
		h.rp.set(running(asRunnerPod(web), "10.1.0.5", 4))
		time.Sleep(2 * time.Second)
		h.c.StartAPIServer()
		eventually(t, "restartCount 4 once the apiserver is back", func() (bool, string) {
			p, err := getPod(t, admin, "default", "web")
			if err != nil {
				return false, err.Error()
			}
			return p.Status.ContainerStatuses[0].RestartCount == 4, ""
		})
	})

	t.Run("deleted pod is released", func(t *testing.T) {
		w, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// While its containers run, the pod stays in the API.
		time.Sleep(1500 * time.Millisecond)
		p, err := getPod(t, admin, "default", "web")
		if err != nil || p.DeletionTimestamp == nil {
			t.Fatalf("web while stopping: %v (deleting: %v)", err, p != nil && p.DeletionTimestamp != nil)
		}
		// The runner stopped and removed it, and says how its container
		// ended: that is the final status, then the pod is gone.
		final := running(asRunnerPod(web), "10.1.0.5", 4)
		finished := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		final.Status.Phase = v1.PodFailed
		final.Status.ContainerStatuses[0].Ready = false
		final.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 143, Reason: "Error", StartedAt: finished, FinishedAt: finished, ContainerID: "docker://app-4"}}
		h.rp.finish(final)
		var last *v1.Pod
		timeout := time.After(failAfter)
		for deleted := false; !deleted; {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch ended")
				}
				if p, isPod := ev.Object.(*v1.Pod); isPod {
					if ev.Type == watch.Deleted {
						deleted = true
					} else {
						last = p
					}
				}
			case <-timeout:
				t.Fatal("web was not deleted")
			}
		}
		if last == nil || last.Status.Phase != v1.PodFailed || last.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Fatalf("final status before deletion: %+v", last.Status)
		}
		// As the kubelet: how it really ended, not a made-up end (the
		// conformance prestop sleep specs read finishedAt).
		if term := last.Status.ContainerStatuses[0].State.Terminated; term.ExitCode != 143 || !term.FinishedAt.Equal(&finished) {
			t.Errorf("final container state %+v, want exit 143 finished at %v", term, finished)
		}
	})

	t.Run("deleted pod the runner never had", func(t *testing.T) {
		ghost := newAPIPod(t, admin, "ghost")
		if err := admin.CoreV1().Pods("default").Delete(ctx, ghost.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "ghost released", func() (bool, string) {
			_, err := getPod(t, admin, "default", "ghost")
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
}

// TestManagerWithoutClient: a Manager whose kubeconfig never appears keeps
// trying, blocks nothing, and returns when its context ends.
func TestManagerWithoutClient(t *testing.T) {
	rp := newRunnerPods()
	m, err := NewManager(Options{
		Client:   func() (Client, error) { return nil, errors.New("no kubeconfig yet") },
		NodeName: "node1", Pods: rp, MaxBackoff: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	for i := range 20 {
		rp.set(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(fmt.Sprint(i))}})
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(failAfter):
		t.Fatal("Run did not return")
	}
	if _, err := NewManager(Options{NodeName: "node1", Pods: rp}); err == nil {
		t.Error("NewManager without a client function succeeded")
	}
}
