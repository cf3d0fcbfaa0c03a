package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/podrun/podrun/kubeclient"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/nodeapi"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
	"github.com/podrun/podrun/status"
)

// clusterOptions join podrun to a Kubernetes cluster (watch --kubeconfig):
// the apiserver pod source, node registration and status, mirror pods and
// the node API. Names and defaults are the kubelet's flags.
type clusterOptions struct {
	Kubeconfig string
	// NodeIP is the node's InternalIP (the address the apiserver dials for
	// the node API); empty: the host's address (node.HostIP).
	NodeIP     string
	NodeLabels []string
	MaxPods    int
	// Address and Port are the node API's listener; TLSCertFile and
	// TLSPrivateKeyFile its serving certificate (made on first start when
	// not given); ClientCAFile the CA its client certificates are checked
	// against.
	Address           string
	Port              int
	TLSCertFile       string
	TLSPrivateKeyFile string
	ClientCAFile      string
	// TokenWebhook verifies the node API's bearer tokens by TokenReview
	// (the kubelet's authentication.webhook.enabled); false: bearer
	// tokens are refused (401).
	TokenWebhook bool
	// StreamingConnectionIdleTimeout closes a node API exec stream with
	// no traffic for this long.
	StreamingConnectionIdleTimeout time.Duration
	// ClusterDNS and ClusterDomain make ClusterFirst pods' resolv.conf.
	ClusterDNS    []string
	ClusterDomain string
	// StatusUpdateFrequency and StatusReportFrequency time the node's
	// status (posted on change / at the latest).
	StatusUpdateFrequency time.Duration
	StatusReportFrequency time.Duration
}

func addClusterFlags(f *pflag.FlagSet, o *clusterOptions) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to join (may be written after podrun starts); adds the apiserver source and node reporting")
	f.StringVar(&o.NodeIP, "node-ip", "", "the node's InternalIP in the cluster (default: this host's address)")
	f.StringSliceVar(&o.NodeLabels, "node-labels", nil, "labels the node registers with, key=value (comma-separated)")
	f.IntVar(&o.MaxPods, "max-pods", 110, "pods this node reports it can run")
	f.StringVar(&o.Address, "address", "0.0.0.0", "address of the node API (with --kubeconfig)")
	f.IntVar(&o.Port, "port", 10250, "port of the node API (with --kubeconfig); 0 disables it")
	f.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate of the node API (default: one made at first start under the root dir)")
	f.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	f.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA bundle that node API client certificates are checked against")
	f.BoolVar(&o.TokenWebhook, "authentication-token-webhook", true, "verify node API bearer tokens by TokenReview; false refuses them")
	f.DurationVar(&o.StreamingConnectionIdleTimeout, "streaming-connection-idle-timeout", 4*time.Hour, "how long a node API exec stream may have no traffic before it is closed")
	f.StringSliceVar(&o.ClusterDNS, "cluster-dns", nil, "DNS server addresses of the cluster, for pods of dnsPolicy ClusterFirst (comma-separated)")
	f.StringVar(&o.ClusterDomain, "cluster-domain", "", "the cluster's DNS domain, searched by ClusterFirst pods")
	f.DurationVar(&o.StatusUpdateFrequency, "node-status-update-frequency", node.DefaultStatusUpdateFrequency, "how often the node's status is computed and posted if it changed")
	f.DurationVar(&o.StatusReportFrequency, "node-status-report-frequency", node.DefaultStatusReportFrequency, "how often the node's status is posted when it did not change")
}

// nodeAPIAuthentication is how the node API authenticates: client
// certificates of --client-ca-file, and bearer tokens by TokenReview with
// client unless --authentication-token-webhook=false (as the kubelet's
// authentication.webhook.enabled: no token authenticator at all).
func (o *clusterOptions) nodeAPIAuthentication(client nodeapi.ClientFunc) nodeapi.AuthenticatorOptions {
	a := nodeapi.AuthenticatorOptions{ClientCAFile: o.ClientCAFile}
	if o.TokenWebhook {
		a.Client = client
	}
	return a
}

// validate checks the cluster flags; nothing is checked without
// --kubeconfig but what would be ignored silently.
func (o *clusterOptions) validate() error {
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		return badInputf("--node-ip %q is not an IP address", o.NodeIP)
	}
	if _, err := o.labels(); err != nil {
		return err
	}
	for _, ip := range o.ClusterDNS {
		if net.ParseIP(ip) == nil {
			return badInputf("--cluster-dns %q is not an IP address", ip)
		}
	}
	if o.StatusUpdateFrequency <= 0 || o.StatusReportFrequency <= 0 {
		return badInputf("--node-status-update-frequency and --node-status-report-frequency must be positive")
	}
	if o.MaxPods <= 0 {
		return badInputf("--max-pods must be positive")
	}
	if o.Port < 0 || o.Port > 65535 {
		return badInputf("--port %d is not a port", o.Port)
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		return badInputf("--tls-cert-file and --tls-private-key-file go together")
	}
	return nil
}

// labels parses --node-labels.
func (o *clusterOptions) labels() (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range o.NodeLabels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, badInputf("--node-labels %q: want key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, badInputf("--node-labels key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, badInputf("--node-labels value %q: %s", v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

// nodeAddresses are the node's InternalIP and Hostname.
func nodeAddresses(nodeIP, nodeName string) []v1.NodeAddress {
	return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP}, {Type: v1.NodeHostName, Address: nodeName}}
}

// kubeClient is the cluster's client, made from a kubeconfig file the first
// time the file can be read: on a kubeadm box podrun starts before
// `kubeadm init` writes kubelet.conf, and runs its static pods meanwhile.
// Every part of cluster mode asks Get again (with back-off) until it has a
// client.
type kubeClient struct {
	path      string
	userAgent string

	mu     sync.Mutex
	client *kubeclient.Client
	// made is closed when the client is made (by the first Get that can).
	made chan struct{}
}

// Made is closed once a Get has made the client: for a part that only
// waits while the others retry.
func (k *kubeClient) Made() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.made == nil {
		k.made = make(chan struct{})
	}
	return k.made
}

// errNoKubeconfig says the kubeconfig is not written yet.
var errNoKubeconfig = errors.New("kubeconfig not written yet")

// Get returns the client, or why there is none yet.
func (k *kubeClient) Get() (*kubeclient.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		return k.client, nil
	}
	if _, err := os.Stat(k.path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", k.path, errNoKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", k.path, err)
	}
	cfg.UserAgent = k.userAgent
	// The kubelet's kubeAPIQPS and kubeAPIBurst defaults.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", k.path, err)
	}
	k.client = c
	if k.made == nil {
		k.made = make(chan struct{})
	}
	close(k.made)
	return c, nil
}

// clientAs is kc's client as the interface one part of cluster mode
// defines for it (kubeclient.Client implements each: see the assertions
// below).
func clientAs[C any](kc *kubeClient) func() (C, error) {
	return func() (C, error) {
		c, err := kc.Get()
		if err != nil {
			var none C
			return none, err
		}
		return any(c).(C), nil
	}
}

var (
	_ source.APIClient = (*kubeclient.Client)(nil)
	_ source.TokenAPI  = (*kubeclient.Client)(nil)
	_ status.Client    = (*kubeclient.Client)(nil)
	_ node.Client      = (*kubeclient.Client)(nil)
	_ nodeapi.Client   = (*kubeclient.Client)(nil)
)

// runtimeClassesOf is kc's RuntimeClasses client, for the RuntimeClass
// watch.
func runtimeClassesOf(kc *kubeClient) func() (source.RuntimeClassAPI, error) {
	return func() (source.RuntimeClassAPI, error) {
		c, err := kc.Get()
		if err != nil {
			return nil, err
		}
		return c.RuntimeClasses(), nil
	}
}

// servicesOf is kc's Services client of all namespaces, for the Service
// watch.
func servicesOf(kc *kubeClient) func() (source.ServiceAPI, error) {
	return func() (source.ServiceAPI, error) {
		c, err := kc.Get()
		if err != nil {
			return nil, err
		}
		return c.Services(""), nil
	}
}

// cluster is what joins the node to a cluster besides the apiserver
// source: the node agent (registration, status, Lease), the status manager
// (mirror pods, pod status) and the node API (nil with --port 0).
type cluster struct {
	log      *slog.Logger
	kc       *kubeClient
	events   *clusterEvents
	agent    *node.Agent
	statuses *status.Manager
	nodeAPI  *nodeapi.Server
	// runtimeClasses gives the runner the cluster's RuntimeClasses, and
	// services its Services.
	runtimeClasses *source.RuntimeClassWatch
	services       *source.ServiceWatch
}

// newCluster makes the parts of cluster mode; the node API's port is
// bound here, so that a taken port fails watch at start.
func newCluster(ctx context.Context, opts *watchOptions, kc *kubeClient, events *clusterEvents, rt watchEngine, r *runner.Runner,
	mux *source.Mux, reg prometheus.Registerer) (*cluster, error) {
	agent, nodeIP, err := newNodeAgent(ctx, opts, kc, events, rt, r)
	if err != nil {
		return nil, err
	}
	statuses, err := status.NewManager(status.Options{Client: clientAs[status.Client](kc), NodeName: opts.NodeName, NodeUID: agent.NodeUID,
		Pods: r, Desired: mux.Pods, SourcesReady: mux.Ready, Clock: opts.Clock, Logger: opts.Log, Metrics: status.NewMetrics(reg)})
	if err != nil {
		return nil, err
	}
	c := &cluster{log: opts.Log, kc: kc, events: events, agent: agent, statuses: statuses,
		runtimeClasses: &source.RuntimeClassWatch{Client: runtimeClassesOf(kc), OnChange: r.SetClusterRuntimeClasses,
			Clock: opts.Clock, Logger: opts.Log},
		services: &source.ServiceWatch{Client: servicesOf(kc), OnChange: r.SetServices, Clock: opts.Clock, Logger: opts.Log}}
	if opts.Cluster.Port == 0 {
		return c, nil
	}
	c.nodeAPI, err = nodeapi.Listen(nodeapi.Options{
		NodeName:          opts.NodeName,
		Addr:              net.JoinHostPort(opts.Cluster.Address, strconv.Itoa(opts.Cluster.Port)),
		TLSCertFile:       opts.Cluster.TLSCertFile,
		TLSKeyFile:        opts.Cluster.TLSPrivateKeyFile,
		RootDir:           opts.RootDir,
		NodeIPs:           []net.IP{net.ParseIP(nodeIP)},
		Authenticator:     nodeapi.NewAuthenticator(opts.Cluster.nodeAPIAuthentication(clientAs[nodeapi.Client](kc))),
		Authorizer:        nodeapi.NewAuthorizer(nodeapi.AuthorizerOptions{Client: clientAs[nodeapi.Client](kc)}),
		Pods:              r,
		Logs:              nodeapi.EngineLogs{Pods: r, Engine: rt},
		Exec:              rt,
		StreamIdleTimeout: opts.Cluster.StreamingConnectionIdleTimeout,
		Healthy:           r.Healthy,
		Logger:            opts.Log,
	})
	if err != nil {
		return nil, badInput(fmt.Errorf("node API (--address, --port, --tls-cert-file): %w", err))
	}
	return c, nil
}

// start runs the parts on wg until ctx ends.
func (c *cluster) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(5)
	go func() {
		defer wg.Done()
		c.events.run(ctx, c.kc)
	}()
	go func() {
		defer wg.Done()
		c.runtimeClasses.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.services.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.agent.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.statuses.Run(ctx)
	}()
	if c.nodeAPI == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.nodeAPI.Serve(ctx); err != nil {
			c.log.Error("node API", "err", err)
		}
	}()
	c.log.Info("serving the node API", "address", c.nodeAPI.Addr())
}

// newNodeAgent makes the node's registration, status and Lease reporter,
// and says the node's IP.
func newNodeAgent(ctx context.Context, opts *watchOptions, kc *kubeClient, events *clusterEvents, rt watchEngine, r *runner.Runner) (*node.Agent, string, error) {
	labels, err := opts.Cluster.labels()
	if err != nil {
		return nil, "", err
	}
	nodeIP := opts.Cluster.NodeIP
	if nodeIP == "" {
		nodeIP = opts.Host().IP
	}
	facts, err := node.Gather(map[string]string{"root-dir": opts.RootDir})
	if err != nil {
		opts.Log.Warn("some node facts are missing", "err", err)
	}
	return node.NewAgent(node.AgentConfig{
		NodeName:           opts.NodeName,
		Client:             clientAs[node.Client](kc),
		Addresses:          nodeAddresses(nodeIP, opts.NodeName),
		Labels:             labels,
		MaxPods:            opts.Cluster.MaxPods,
		EvictionThresholds: opts.EvictionHard,
		ExtendedResources:  opts.ExtendedResources,
		Port:               int32(opts.Cluster.Port),
		Version:            kubeletVersion(),
		RuntimeVersion:     rt.RuntimeVersion,
		Facts:              facts,
		Measure:            opts.measureNode,
		Healthy:            func() error { return errors.Join(r.Healthy(), r.RuntimeErr()) },
		Events:             events.recorder,
		Clock:              opts.Clock,
		Log:                opts.Log,

		StatusUpdateFrequency: opts.Cluster.StatusUpdateFrequency,
		StatusReportFrequency: opts.Cluster.StatusReportFrequency,
	}), nodeIP, nil
}

// clusterEvents sends the events of the sync core and the node agent to
// the apiserver, through client-go's broadcaster (which aggregates repeats
// and rate-limits each object's events). Events recorded before the
// cluster can be reached are dropped.
type clusterEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

func newClusterEvents(nodeName string) *clusterEvents {
	b := record.NewBroadcaster()
	return &clusterEvents{broadcaster: b,
		recorder: b.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: "kubelet", Host: nodeName})}
}

// run starts the sink once kc's client is made (the node agent's retries
// make it) and stops the broadcaster when ctx ends.
func (e *clusterEvents) run(ctx context.Context, kc *kubeClient) {
	defer e.broadcaster.Shutdown()
	select {
	case <-ctx.Done():
		return
	case <-kc.Made():
	}
	client, err := kc.Get()
	if err != nil {
		return // cannot be: the client is made
	}
	e.broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: client})
	<-ctx.Done()
}
