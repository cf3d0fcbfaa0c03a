package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/kubeclient"
)

// The kubelet's node-status timing (KubeletConfiguration defaults).
const (
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
	DefaultLeaseDuration         = 40 * time.Second
	// LeaseNamespace holds every node's heartbeat Lease.
	LeaseNamespace = "kube-node-lease"
)

// AgentConfig holds an Agent's dependencies and settings.
type AgentConfig struct {
	NodeName string
	// Client returns the cluster's client, or an error while there is none
	// yet (the kubeconfig is written after podrun starts, on a kubeadm
	// box). The agent asks again with back-off.
	Client func() (Client, error)
	// Addresses are the node's addresses (InternalIP, Hostname).
	Addresses []v1.NodeAddress
	// Labels and Taints are set when the node registers; labels also on a
	// node that exists already.
	Labels map[string]string
	Taints []v1.Taint
	// MaxPods is the pods capacity (0: 110).
	MaxPods int
	// EvictionThresholds are watch's --eviction-hard: they set the
	// pressure conditions and what allocatable leaves aside. None: no
	// pressure condition, allocatable is capacity.
	EvictionThresholds []Threshold
	// ExtendedResources are the node's declared extended resources
	// (--extended-resource), reported in its capacity and allocatable as
	// a device plugin's are, so that the scheduler places pods that ask
	// for them.
	ExtendedResources map[v1.ResourceName]int64
	// Port is where the node API listens (daemonEndpoints).
	Port int32
	// Version is the kubeletVersion reported: podrun's version.
	Version string
	// RuntimeVersion is the engine's "docker://<version>".
	RuntimeVersion func(ctx context.Context) (string, error)
	// Facts are the machine's (Gather), read once at start.
	Facts *Facts
	// Measure reads what the conditions are computed from.
	Measure func() (Measurements, error)
	// Healthy says whether the node can run pods: the sync loop turns and
	// the engine answers. Its error is the Ready condition's message.
	Healthy func() error

	// Events records the node's events (Starting, NodeReady,
	// NodeNotReady); nil records none.
	Events EventRecorder

	Clock clock.WithTicker
	Log   *slog.Logger
	// StatusUpdateFrequency is how often the status is computed and posted
	// when it changed; StatusReportFrequency how often it is posted when
	// it did not. LeaseDuration is the Lease's duration; it is renewed
	// every quarter of it.
	StatusUpdateFrequency time.Duration
	StatusReportFrequency time.Duration
	LeaseDuration         time.Duration
}

// EventRecorder records Kubernetes Events (client-go's
// record.EventRecorder is one).
type EventRecorder interface {
	Event(object k8sruntime.Object, eventtype, reason, message string)
}

// Client is what the agent asks of the apiserver: its Node and its Lease
// (kubeclient.Client is one).
type Client interface {
	Nodes() *kubeclient.Nodes
	Leases(namespace string) *kubeclient.Leases
}

// Agent is the node's side of cluster mode: it registers the Node, keeps its
// status current and renews its Lease in kube-node-lease, as the kubelet's
// node-status manager and node-lease controller do.
type Agent struct {
	cfg AgentConfig
	uid atomic.Value // types.UID of the registered Node

	runtimeVersion string
	// last is what was posted last (times aside) and when; the status is
	// posted again only when it changes or StatusReportFrequency passed.
	last     v1.NodeStatus
	lastPost time.Time
}

// NewAgent returns an Agent; Run starts it.
func NewAgent(cfg AgentConfig) *Agent {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.StatusUpdateFrequency <= 0 {
		cfg.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if cfg.StatusReportFrequency <= 0 {
		cfg.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.Facts == nil {
		cfg.Facts = &Facts{Architecture: runtime.GOARCH}
	}
	return &Agent{cfg: cfg}
}

// NodeUID is the UID of the registered Node, "" until it is registered
// (mirror pods name it as their owner).
func (a *Agent) NodeUID() types.UID {
	uid, _ := a.uid.Load().(types.UID)
	return uid
}

// Run registers the node once the cluster can be reached, then keeps its
// status and Lease current until ctx ends. It never gives up: an
// unreachable apiserver is waited out with back-off, and local pods never
// depend on it.
func (a *Agent) Run(ctx context.Context) {
	client := a.waitClient(ctx)
	if client == nil {
		return
	}
	if !a.retry(ctx, "register node", func() error { return a.register(ctx, client) }) {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.runLease(ctx, client)
	}()
	a.runStatus(ctx, client)
}

// waitClient asks for the client until there is one, or ctx ends (nil).
func (a *Agent) waitClient(ctx context.Context) Client {
	var client Client
	a.retry(ctx, "connect to the cluster", func() error {
		var err error
		client, err = a.cfg.Client()
		return err
	})
	return client
}

// event records an event of the Node, as the kubelet's node events
// (involvedObject: the node by name, its UID).
func (a *Agent) event(eventtype, reason, message string) {
	if a.cfg.Events == nil {
		return
	}
	ref := &v1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
	a.cfg.Events.Event(ref, eventtype, reason, message)
}

func readyStatus(cs []v1.NodeCondition) v1.ConditionStatus {
	for _, c := range cs {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}

// retry calls f until it succeeds (true) or ctx ends (false), waiting 1 s
// doubling to 30 s between tries, logging a failure when it changes and at
// most every 5 min otherwise.
func (a *Agent) retry(ctx context.Context, what string, f func() error) bool {
	wait := time.Second
	var lastMsg string
	var lastLog time.Time
	for {
		err := f()
		if err == nil {
			return true
		}
		if msg := err.Error(); msg != lastMsg || a.cfg.Clock.Since(lastLog) > 5*time.Minute {
			a.cfg.Log.Warn(what+" failed; will retry", "node", a.cfg.NodeName, "err", err, "retry", wait)
			lastMsg, lastLog = msg, a.cfg.Clock.Now()
		}
		t := a.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// defaultLabels are the labels the kubelet puts on its Node.
func (a *Agent) defaultLabels() map[string]string {
	l := map[string]string{
		v1.LabelHostname:          a.cfg.NodeName,
		v1.LabelOSStable:          runtime.GOOS,
		v1.LabelArchStable:        runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	maps.Copy(l, a.cfg.Labels)
	return l
}

// register creates the Node, or, when it exists (podrun restarted, or the
// node was registered before), adds podrun's labels to it, as the
// kubelet's tryRegisterWithAPIServer. Its taints are then the cluster's
// business (kubeadm marks the control plane).
func (a *Agent) register(ctx context.Context, client Client) error {
	if a.runtimeVersion == "" && a.cfg.RuntimeVersion != nil {
		v, err := a.cfg.RuntimeVersion(ctx)
		if err != nil {
			return fmt.Errorf("container runtime version: %w", err)
		}
		a.runtimeVersion = v
	}
	want := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        a.cfg.NodeName,
			Labels:      a.defaultLabels(),
			Annotations: map[string]string{annotationAttachByCMP: "true"},
		},
		Spec: v1.NodeSpec{Taints: a.cfg.Taints},
	}
	want.Status = a.status(a.measure(), nil, a.cfg.Clock.Now())
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	created, err := client.Nodes().Create(rctx, want, metav1.CreateOptions{})
	if err == nil {
		a.uid.Store(created.UID)
		a.remember(created.Status)
		a.cfg.Log.Info("node registered", "node", a.cfg.NodeName, "uid", created.UID)
		a.event(v1.EventTypeNormal, "RegisteredNode", "Node "+a.cfg.NodeName+" registered by podrun "+a.cfg.Version)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", a.cfg.NodeName, err)
	}
	var uid types.UID
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := client.Nodes().Get(rctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		uid = existing.UID
		missing := false
		for k, v := range want.Labels {
			if existing.Labels[k] != v {
				missing = true
			}
		}
		if !missing {
			return nil
		}
		if existing.Labels == nil {
			existing.Labels = map[string]string{}
		}
		maps.Copy(existing.Labels, want.Labels)
		_, err = client.Nodes().Update(rctx, existing, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update node %s: %w", a.cfg.NodeName, err)
	}
	a.uid.Store(uid)
	a.cfg.Log.Info("node already registered; using it", "node", a.cfg.NodeName, "uid", uid)
	return nil
}

// measure reads the machine and the node's health once, for one status.
func (a *Agent) measure() Measurements {
	m, err := a.cfg.Measure()
	if err != nil {
		a.cfg.Log.Debug("node measurements incomplete", "err", err)
	}
	if a.cfg.Healthy != nil {
		m.RuntimeErr = a.cfg.Healthy()
	}
	return m
}

// status is the node's status from m; old's conditions (others' among
// them) give the transition times.
func (a *Agent) status(m Measurements, old []v1.NodeCondition, now time.Time) v1.NodeStatus {
	f := a.cfg.Facts
	capacity, allocatable := Resources(f, m.NodeFS, a.cfg.MaxPods, a.cfg.EvictionThresholds)
	for name, n := range a.cfg.ExtendedResources {
		capacity[name] = *resource.NewQuantity(n, resource.DecimalSI)
		allocatable[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return v1.NodeStatus{
		Capacity:        capacity,
		Allocatable:     allocatable,
		Conditions:      mergeConditions(old, Conditions(m, a.cfg.EvictionThresholds, f.MemoryBytes), metav1.NewTime(now)),
		Addresses:       a.cfg.Addresses,
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: a.cfg.Port}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               f.MachineID,
			SystemUUID:              f.SystemUUID,
			BootID:                  f.BootID,
			KernelVersion:           f.KernelVersion,
			OSImage:                 f.OSImage,
			ContainerRuntimeVersion: a.runtimeVersion,
			KubeletVersion:          a.cfg.Version,
			OperatingSystem:         runtime.GOOS,
			Architecture:            f.Architecture,
		},
	}
}

// remember records s as posted now.
func (a *Agent) remember(s v1.NodeStatus) {
	a.last = *s.DeepCopy()
	a.lastPost = a.cfg.Clock.Now()
}

// changed reports whether s says something the last posted status did not
// (heartbeat and transition times aside).
func (a *Agent) changed(s v1.NodeStatus) bool {
	return !sameConditions(s.Conditions, a.last.Conditions) ||
		!reflect.DeepEqual(s.Addresses, a.last.Addresses) ||
		!reflect.DeepEqual(s.NodeInfo, a.last.NodeInfo) ||
		!sameResources(s.Capacity, a.last.Capacity) || !sameResources(s.Allocatable, a.last.Allocatable) ||
		s.DaemonEndpoints != a.last.DaemonEndpoints
}

func sameResources(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// runStatus posts the node's status every StatusUpdateFrequency when it
// changed, and every StatusReportFrequency when not.
func (a *Agent) runStatus(ctx context.Context, client Client) {
	t := a.cfg.Clock.NewTicker(a.cfg.StatusUpdateFrequency)
	defer t.Stop()
	for {
		if err := a.syncStatus(ctx, client); err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("node status not posted; will retry", "node", a.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// syncStatus posts the status if it is due. A Node deleted in the API is
// registered again.
func (a *Agent) syncStatus(ctx context.Context, client Client) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := a.cfg.Clock.Now()
	m := a.measure()
	want := a.status(m, a.last.Conditions, now)
	if !a.changed(want) && now.Sub(a.lastPost) < a.cfg.StatusReportFrequency {
		return nil
	}
	// The first read comes from the apiserver's cache, as the kubelet's;
	// after a conflict, from etcd.
	get := metav1.GetOptions{ResourceVersion: "0"}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.Nodes().Get(rctx, a.cfg.NodeName, get)
		get = metav1.GetOptions{}
		if err != nil {
			return err
		}
		s := a.status(m, n.Status.Conditions, now)
		// Fields others own stay as they are (images, volumes, config).
		n.Status.Capacity, n.Status.Allocatable = s.Capacity, s.Allocatable
		n.Status.Conditions, n.Status.Addresses = s.Conditions, s.Addresses
		n.Status.DaemonEndpoints, n.Status.NodeInfo = s.DaemonEndpoints, s.NodeInfo
		posted, err := client.Nodes().UpdateStatus(rctx, n, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		a.uid.Store(posted.UID)
		if was, is := readyStatus(a.last.Conditions), readyStatus(posted.Status.Conditions); was != is {
			if is == v1.ConditionTrue {
				a.event(v1.EventTypeNormal, "NodeReady", "Node "+a.cfg.NodeName+" status is now: NodeReady")
			} else {
				a.event(v1.EventTypeNormal, "NodeNotReady", "Node "+a.cfg.NodeName+" status is now: NodeNotReady")
			}
		}
		a.remember(posted.Status)
		return nil
	})
	if apierrors.IsNotFound(err) {
		a.cfg.Log.Warn("node was deleted in the API; registering it again", "node", a.cfg.NodeName)
		return a.register(ctx, client)
	}
	if err != nil {
		return fmt.Errorf("update node %s status: %w", a.cfg.NodeName, err)
	}
	return nil
}

// runLease renews the node's Lease as the kubelet's node-lease controller
// does: every quarter of its duration, owned by the
// Node so that it goes with it.
func (a *Agent) runLease(ctx context.Context, client Client) {
	setOwner := func(l *coordinationv1.Lease) error {
		uid := a.NodeUID()
		if uid == "" {
			return errors.New("node not registered yet")
		}
		if len(l.OwnerReferences) == 0 || l.OwnerReferences[0].UID != uid {
			l.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: a.cfg.NodeName, UID: uid,
			}}
		}
		return nil
	}
	l := &leaseRenewer{leases: client.Leases(LeaseNamespace), name: a.cfg.NodeName, holder: a.cfg.NodeName,
		durationSec: int32(a.cfg.LeaseDuration / time.Second), renewInterval: a.cfg.LeaseDuration / 4,
		prepare: setOwner, clock: a.cfg.Clock, log: a.cfg.Log}
	l.run(ctx)
}
