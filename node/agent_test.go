package node_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podrun/podrun/clustertest"
	"github.com/podrun/podrun/node"

	"github.com/podrun/podrun/kubeclient"
)

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

func ready(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// TestAgentAgainstAPIServer runs the node agent with a node's own
// credentials (node authorizer, NodeRestriction) against a real
// kube-apiserver: it waits for a kubeconfig that is not there yet,
// registers, reports Ready from the health it is given, renews its Lease,
// registers again when the Node is deleted, and outlives an apiserver
// restart.
func TestAgentAgainstAPIServer(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	admin := c.Client(t)
	const name = "agent-n1"
	_, nodeCfg := c.NodeKubeconfig(t, name)

	// The kubeconfig "appears" on the third ask.
	var asks atomic.Int32
	client := func() (node.Client, error) {
		if asks.Add(1) < 3 {
			return nil, errors.New("kubeconfig not written yet")
		}
		return kubeclient.NewForConfig(nodeCfg)
	}
	// Events go through client-go's broadcaster with the node's own
	// credentials, as watch sends them.
	nodeClient, err := kubeclient.NewForConfig(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: nodeClient})
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: "kubelet", Host: name})

	var healthMu sync.Mutex
	var health error
	agent := node.NewAgent(node.AgentConfig{
		NodeName:       name,
		Client:         client,
		Addresses:      []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.18.0.9"}, {Type: v1.NodeHostName, Address: name}},
		Labels:         map[string]string{"podrun.io/test": "yes"},
		Port:           10250,
		Version:        "v0.0.0-test",
		RuntimeVersion: func(context.Context) (string, error) { return "docker://20.10.24", nil },
		Facts:          &node.Facts{CPUs: 2, MemoryBytes: 4 << 30, MachineID: "m1", BootID: "b1", Architecture: "amd64"},
		// The kubelet's defaults, as watch's --eviction-hard.
		EvictionThresholds: defaultThresholds(t),
		Measure: func() (node.Measurements, error) {
			return node.Measurements{MemoryAvailableBytes: 2 << 30,
				NodeFS: node.Filesystem{CapacityBytes: 10 << 30, AvailableBytes: 5 << 30}}, nil
		},
		Healthy: func() error {
			healthMu.Lock()
			defer healthMu.Unlock()
			return health
		},
		Events:                recorder,
		Log:                   slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		StatusUpdateFrequency: 200 * time.Millisecond,
		StatusReportFrequency: 3 * time.Second,
		LeaseDuration:         4 * time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		agent.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	get := func() (*v1.Node, error) {
		return admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	}
	waitFor(t, "the node to register Ready", func() (bool, error) {
		n, err := get()
		return err == nil && ready(n) == v1.ConditionTrue, err
	})
	n, _ := get()
	if n.Labels["kubernetes.io/hostname"] != name || n.Labels["kubernetes.io/os"] != "linux" || n.Labels["podrun.io/test"] != "yes" {
		t.Errorf("labels %v", n.Labels)
	}
	if got := n.Status.Capacity.Cpu().Value(); got != 2 {
		t.Errorf("cpu capacity %d", got)
	}
	if got := n.Status.Allocatable.Memory().Value(); got != 4<<30-100<<20 {
		t.Errorf("allocatable memory %d", got)
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "docker://20.10.24" || n.Status.NodeInfo.KubeletVersion != "v0.0.0-test" ||
		n.Status.NodeInfo.MachineID != "m1" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("nodeInfo %+v endpoints %+v", n.Status.NodeInfo, n.Status.DaemonEndpoints)
	}
	if agent.NodeUID() != n.UID {
		t.Errorf("agent's node UID %q, API's %q", agent.NodeUID(), n.UID)
	}

	// The Lease is renewed (every second for a 4 s lease) and owned by
	// the Node.
	var lease *coordinationv1.Lease
	waitFor(t, "the lease", func() (bool, error) {
		lease, err = admin.CoordinationV1().Leases(node.LeaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil, err
	})
	first := lease.Spec.RenewTime.Time
	waitFor(t, "a lease renewal", func() (bool, error) {
		l, err := admin.CoordinationV1().Leases(node.LeaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first) && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == n.UID, err
	})

	// Unhealthy: NotReady with the reason, then Ready again.
	healthMu.Lock()
	health = errors.New("container runtime is down: docker gone")
	healthMu.Unlock()
	waitFor(t, "NotReady", func() (bool, error) {
		n, err := get()
		return err == nil && ready(n) == v1.ConditionFalse, err
	})
	healthMu.Lock()
	health = nil
	healthMu.Unlock()
	waitFor(t, "Ready again", func() (bool, error) {
		n, err := get()
		return err == nil && ready(n) == v1.ConditionTrue, err
	})
	for _, reason := range []string{"RegisteredNode", "NodeNotReady", "NodeReady"} {
		waitFor(t, "a "+reason+" event of the node", func() (bool, error) {
			evs, err := admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + name + ",reason=" + reason})
			return err == nil && len(evs.Items) > 0, err
		})
	}

	// A Node deleted in the API is registered again (at the next post,
	// which comes at the latest after StatusReportFrequency).
	if err := admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node registered again", func() (bool, error) {
		n2, err := get()
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return err == nil && n2.UID != n.UID && ready(n2) == v1.ConditionTrue, err
	})

	// The apiserver away: the agent keeps trying and reports once it is
	// back (a change made meanwhile is posted).
	c.StopAPIServer()
	healthMu.Lock()
	health = errors.New("sync loop stalled")
	healthMu.Unlock()
	c.StartAPIServer()
	waitFor(t, "the change made while the apiserver was away", func() (bool, error) {
		n, err := get()
		return err == nil && ready(n) == v1.ConditionFalse, err
	})
}

// testWriter sends the agent's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func defaultThresholds(t *testing.T) []node.Threshold {
	th, err := node.ParseThresholds(node.DefaultEvictionHard)
	if err != nil {
		t.Fatal(err)
	}
	return th
}
