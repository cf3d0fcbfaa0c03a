package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/podrun/podrun/nodeapi"
)

// kubeadmKubeletConfig is /var/lib/kubelet/config.yaml as kubeadm v1.37
// writes it (the same as v1.34's), plus a staticPodURL with headers and
// two fields podrun does not implement.
const kubeadmKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 7s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 3s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
staticPodURL: https://example.invalid/pods
staticPodURLHeader:
  X-Token: [abc]
evictionHard:
  memory.available: 200Mi
  nodefs.inodesFree: 5%
podPidsLimit: 4096
allowedUnsafeSysctls:
- kernel.msg*
- net.core.somaxconn
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
maxPods: 50
`

func TestKubeletConfigurationReadByConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(kubeadmKubeletConfig), 0o600)
	t.Setenv("PODRUN_MAX_PODS", "70")

	got, g := watchOptionsOf(t, "--config", cfg, "--healthz-port", "10300")
	if !slices.Equal(got.Paths, []string{"/etc/kubernetes/manifests"}) || !slices.Equal(got.URLs, []string{"https://example.invalid/pods"}) {
		t.Errorf("sources: paths %q urls %q", got.Paths, got.URLs)
	}
	if !slices.Equal(g.URLHeaders, []string{"X-Token: abc"}) {
		t.Errorf("url headers %q", g.URLHeaders)
	}
	if got.HTTPCheckFrequency != 7*time.Second || got.SyncFrequency != time.Minute || got.FileCheckFrequency != 20*time.Second {
		t.Errorf("frequencies: http %s sync %s file %s (0s must keep the default)", got.HTTPCheckFrequency, got.SyncFrequency, got.FileCheckFrequency)
	}
	if got.HealthzPort != 10300 || got.HealthzAddress != "127.0.0.1" {
		t.Errorf("healthz %s:%d: the flag must win over the file", got.HealthzAddress, got.HealthzPort)
	}
	c := got.Cluster
	if c.MaxPods != 70 {
		t.Errorf("max pods %d: PODRUN_MAX_PODS must win over the file", c.MaxPods)
	}
	if c.ClientCAFile != "/etc/kubernetes/pki/ca.crt" || !slices.Equal(c.ClusterDNS, []string{"10.96.0.10"}) || c.ClusterDomain != "cluster.local" {
		t.Errorf("cluster options %+v", c)
	}
	if c.StatusUpdateFrequency != 3*time.Second || c.StatusReportFrequency != 5*time.Minute {
		t.Errorf("node status frequencies %s %s", c.StatusUpdateFrequency, c.StatusReportFrequency)
	}
	if c.StreamingConnectionIdleTimeout != 4*time.Hour {
		t.Errorf("streaming connection idle timeout %s: 0s must keep the kubelet's 4h", c.StreamingConnectionIdleTimeout)
	}
	if len(got.EvictionHard) != 1 || got.EvictionHard[0].String() != "memory.available<200Mi" || g.PodMaxPIDs != 4096 {
		t.Errorf("eviction thresholds %v, pod max pids %d; want memory.available<200Mi and 4096", got.EvictionHard, g.PodMaxPIDs)
	}
	if !slices.Equal(g.AllowedUnsafeSysctls, []string{"kernel.msg*", "net.core.somaxconn"}) {
		t.Errorf("allowed unsafe sysctls %q", g.AllowedUnsafeSysctls)
	}
	warn := g.ErrOut.(*bytes.Buffer).String()
	if strings.Count(warn, "does not implement") != 1 || !strings.Contains(warn, "evictionHard.nodefs.inodesFree, rotateCertificates") {
		t.Errorf("want one warning naming exactly evictionHard.nodefs.inodesFree and rotateCertificates, got:\n%s", warn)
	}
}

// authentication.webhook.enabled defaults to true in KubeletConfiguration
// v1beta1 (SetDefaults_KubeletConfiguration), so an explicit false is no
// default: it is --authentication-token-webhook=false, and the node API
// then has no TokenReview authenticator (bearer tokens get 401), as the
// kubelet's. true, as kubeadm writes it, keeps TokenReview.
func TestKubeletConfigurationTokenWebhook(t *testing.T) {
	for _, tc := range []struct {
		enabled string
		want    bool
	}{{"false", false}, {"true", true}, {"", true}} {
		file := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
		if tc.enabled != "" {
			file += "authentication:\n  webhook:\n    enabled: " + tc.enabled + "\n"
		}
		_, ignored, err := kubeletConfigFlags([]byte(file))
		if err != nil || len(ignored) != 0 {
			t.Errorf("webhook.enabled %q: ignored %v, %v; want it read", tc.enabled, ignored, err)
		}
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(cfg, []byte(file), 0o600)
		got, _ := watchOptionsOf(t, "--config", cfg, "--path", t.TempDir())
		client := func() (nodeapi.Client, error) { return nil, nil }
		auth := got.Cluster.nodeAPIAuthentication(client)
		if got.Cluster.TokenWebhook != tc.want || (auth.Client != nil) != tc.want {
			t.Errorf("webhook.enabled %q: --authentication-token-webhook %v, TokenReview client %v; want %v",
				tc.enabled, got.Cluster.TokenWebhook, auth.Client != nil, tc.want)
		}
	}
}

func TestKubeletConfigurationStreamingIdleTimeout(t *testing.T) {
	vals, ignored, err := kubeletConfigFlags([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstreamingConnectionIdleTimeout: 30m\n"))
	if err != nil || !slices.Equal(vals["streaming-connection-idle-timeout"], []string{"30m0s"}) || len(ignored) != 0 {
		t.Errorf("streamingConnectionIdleTimeout: 30m = %v, ignored %v, %v; want --streaming-connection-idle-timeout 30m0s", vals, ignored, err)
	}
}

func TestKubeletConfigurationContainerLogs(t *testing.T) {
	vals, ignored, err := kubeletConfigFlags([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: 20Mi\ncontainerLogMaxFiles: 3\n"))
	if err != nil || !slices.Equal(vals["container-log-max-size"], []string{"20Mi"}) ||
		!slices.Equal(vals["container-log-max-files"], []string{"3"}) || len(ignored) != 0 {
		t.Errorf("containerLogMaxSize: 20Mi, containerLogMaxFiles: 3 = %v, ignored %v, %v; want the two flags", vals, ignored, err)
	}
}

func TestKubeletConfigurationOfAnotherVersionRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1alpha9\nkind: KubeletConfiguration\n"), 0o600)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"watch", "--config", cfg, "--path", "x"}, strings.NewReader(""), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "v1alpha9") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// containerRuntimeEndpoint in a KubeletConfiguration, or
// container-runtime-endpoint in podrun's own file, selects the CRI engine;
// the flag wins over both.
func TestContainerRuntimeEndpointFromConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"kubelet", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n", nil, "unix:///run/containerd/containerd.sock"},
		{"podrun", "container-runtime-endpoint: unix:///run/x.sock\n", nil, "unix:///run/x.sock"},
		{"flag", "container-runtime-endpoint: unix:///run/x.sock\n", []string{"--container-runtime-endpoint", "unix:///run/y.sock"}, "unix:///run/y.sock"},
		{"none", "node-name: n\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parsePs(t, tc.file, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if g.RuntimeEndpoint != tc.want {
				t.Errorf("endpoint %q, want %q", g.RuntimeEndpoint, tc.want)
			}
		})
	}
}

func TestCRIEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/containerd/containerd.sock": "unix:///run/containerd/containerd.sock",
		"/run/containerd/containerd.sock":        "unix:///run/containerd/containerd.sock",
		"tcp://127.0.0.1:1234":                   "",
		"run/x.sock":                             "",
	} {
		got, err := criEndpoint(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("criEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
