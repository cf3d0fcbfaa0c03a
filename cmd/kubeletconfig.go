package cmd

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/podrun/podrun/node"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// kubeletConfigKind is the kind of the file kubeadm writes to
// /var/lib/kubelet/config.yaml, which `--config` also reads, so that podrun
// takes the kubelet's place with the kubelet's own configuration.
const kubeletConfigKind = "KubeletConfiguration"

// isKubeletConfig reports whether data is a KubeletConfiguration document.
func isKubeletConfig(data []byte) bool {
	var tm struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	return yaml.Unmarshal(data, &tm) == nil && tm.Kind == kubeletConfigKind
}

// kubeletConfigFlags turns a KubeletConfiguration into podrun flag values
// (by flag name; several values for a repeatable flag) and names, as
// dotted field paths, the fields it sets that podrun does not implement.
// Fields left at their zero value ("0s", false, {}) are the kubelet's
// defaults and name nothing.
func kubeletConfigFlags(data []byte) (map[string][]string, []string, error) {
	var kc kubeletv1beta1.KubeletConfiguration
	// Fields of a newer kubelet are not an error: what is not known is
	// named below with the rest that podrun does not implement.
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, nil, err
	}
	if kc.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
		return nil, nil, fmt.Errorf("%s apiVersion %q: podrun reads %s", kubeletConfigKind, kc.APIVersion, kubeletv1beta1.SchemeGroupVersion)
	}
	vals := map[string][]string{}
	set := func(flag string, v ...string) { vals[flag] = v }
	duration := func(flag string, d interface{ String() string }, zero bool) {
		if !zero {
			set(flag, d.String())
		}
	}
	if kc.StaticPodPath != "" {
		set("path", kc.StaticPodPath)
	}
	if kc.StaticPodURL != "" {
		set("url", kc.StaticPodURL)
	}
	var headers []string
	for _, k := range sortedKeysOf(kc.StaticPodURLHeader) {
		for _, v := range kc.StaticPodURLHeader[k] {
			headers = append(headers, k+": "+v)
		}
	}
	if len(headers) > 0 {
		set("manifest-url-header", headers...)
	}
	duration("sync-frequency", kc.SyncFrequency.Duration, kc.SyncFrequency.Duration == 0)
	duration("file-check-frequency", kc.FileCheckFrequency.Duration, kc.FileCheckFrequency.Duration == 0)
	duration("http-check-frequency", kc.HTTPCheckFrequency.Duration, kc.HTTPCheckFrequency.Duration == 0)
	duration("node-status-update-frequency", kc.NodeStatusUpdateFrequency.Duration, kc.NodeStatusUpdateFrequency.Duration == 0)
	duration("node-status-report-frequency", kc.NodeStatusReportFrequency.Duration, kc.NodeStatusReportFrequency.Duration == 0)
	duration("image-minimum-gc-age", kc.ImageMinimumGCAge.Duration, kc.ImageMinimumGCAge.Duration == 0)
	duration("streaming-connection-idle-timeout", kc.StreamingConnectionIdleTimeout.Duration, kc.StreamingConnectionIdleTimeout.Duration == 0)
	duration("runtime-request-timeout", kc.RuntimeRequestTimeout.Duration, kc.RuntimeRequestTimeout.Duration == 0)
	if kc.HealthzBindAddress != "" {
		set("healthz-bind-address", kc.HealthzBindAddress)
	}
	if kc.HealthzPort != nil {
		set("healthz-port", strconv.Itoa(int(*kc.HealthzPort)))
	}
	if kc.Address != "" {
		set("address", kc.Address)
	}
	if kc.Port != 0 {
		set("port", strconv.Itoa(int(kc.Port)))
	}
	if kc.EnableServer != nil && !*kc.EnableServer {
		set("port", "0")
	}
	if kc.TLSCertFile != "" {
		set("tls-cert-file", kc.TLSCertFile)
	}
	if kc.TLSPrivateKeyFile != "" {
		set("tls-private-key-file", kc.TLSPrivateKeyFile)
	}
	// Its default is true (SetDefaults_KubeletConfiguration), so only an
	// explicit false says anything.
	if w := kc.Authentication.Webhook.Enabled; w != nil && !*w {
		set("authentication-token-webhook", "false")
	}
	if kc.Authentication.X509.ClientCAFile != "" {
		set("client-ca-file", kc.Authentication.X509.ClientCAFile)
	}
	if kc.ImageGCHighThresholdPercent != nil {
		set("image-gc-high-threshold", strconv.Itoa(int(*kc.ImageGCHighThresholdPercent)))
	}
	if kc.ImageGCLowThresholdPercent != nil {
		set("image-gc-low-threshold", strconv.Itoa(int(*kc.ImageGCLowThresholdPercent)))
	}
	if len(kc.ClusterDNS) > 0 {
		set("cluster-dns", strings.Join(kc.ClusterDNS, ","))
	}
	if kc.ClusterDomain != "" {
		set("cluster-domain", kc.ClusterDomain)
	}
	if kc.MaxPods != 0 {
		set("max-pods", strconv.Itoa(int(kc.MaxPods)))
	}
	if kc.EvictionHard != nil {
		// The signals podrun measures; the others are reported ignored.
		var thresholds []string
		for _, signal := range sortedKeysOf(kc.EvictionHard) {
			if slices.Contains(measuredSignals, signal) {
				thresholds = append(thresholds, signal+"<"+kc.EvictionHard[signal])
			}
		}
		set("eviction-hard", strings.Join(thresholds, ","))
	}
	if kc.ContainerRuntimeEndpoint != "" {
		set("container-runtime-endpoint", kc.ContainerRuntimeEndpoint)
	}
	if len(kc.AllowedUnsafeSysctls) > 0 {
		set("allowed-unsafe-sysctls", strings.Join(kc.AllowedUnsafeSysctls, ","))
	}
	if kc.ContainerLogMaxSize != "" {
		set("container-log-max-size", kc.ContainerLogMaxSize)
	}
	if kc.ContainerLogMaxFiles != nil {
		set("container-log-max-files", strconv.Itoa(int(*kc.ContainerLogMaxFiles)))
	}
	if kc.PodPidsLimit != nil && *kc.PodPidsLimit > 0 {
		set("pod-max-pids", strconv.FormatInt(*kc.PodPidsLimit, 10))
	}

	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, nil, err
	}
	var ignored []string
	// What podrun does whatever the file says, or what it reads above.
	understood := []string{
		"apiVersion", "kind", "staticPodPath", "staticPodURL", "staticPodURLHeader",
		"syncFrequency", "fileCheckFrequency", "httpCheckFrequency",
		"nodeStatusUpdateFrequency", "nodeStatusReportFrequency",
		"healthzBindAddress", "healthzPort", "address", "port", "enableServer",
		"tlsCertFile", "tlsPrivateKeyFile",
		"authentication.x509.clientCAFile", "authentication.webhook.enabled", "authentication.webhook.cacheTTL",
		"authorization.webhook.cacheAuthorizedTTL", "authorization.webhook.cacheUnauthorizedTTL",
		"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge",
		"clusterDNS", "clusterDomain", "maxPods", "streamingConnectionIdleTimeout", "runtimeRequestTimeout", "allowedUnsafeSysctls",
		"containerLogMaxSize", "containerLogMaxFiles",
		// The engine's own cgroup driver is used.
		"cgroupDriver", "containerRuntimeEndpoint",
	}
	walkConfig("", raw, func(path string, v any) {
		switch {
		case slices.Contains(understood, path), path == "podPidsLimit",
			strings.HasPrefix(path, "evictionHard.") && slices.Contains(measuredSignals, strings.TrimPrefix(path, "evictionHard.")):
		// podrun always refuses anonymous requests and authorizes by
		// SubjectAccessReview: the settings kubeadm writes.
		case path == "authentication.anonymous.enabled" && v == false,
			path == "authorization.mode" && v == string(kubeletv1beta1.KubeletAuthorizationModeWebhook):
		case isZeroConfig(v):
		default:
			ignored = append(ignored, path)
		}
	})
	sort.Strings(ignored)
	return vals, ignored, nil
}

// walkConfig calls f with the dotted path of every leaf of v (a list is a
// leaf; so is an object whose path f knows, such as staticPodURLHeader).
func walkConfig(prefix string, v any, f func(path string, v any)) {
	m, ok := v.(map[string]any)
	if !ok || prefix == "staticPodURLHeader" || len(m) == 0 {
		f(prefix, v)
		return
	}
	for _, k := range sortedKeysOf(m) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		walkConfig(p, m[k], f)
	}
}

// isZeroConfig reports whether a config value is its type's zero: the
// kubelet's default, which sets nothing.
func isZeroConfig(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == "" || x == "0" || x == "0s"
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isZeroConfig(e) {
				return false
			}
		}
		return true
	}
	return false
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// measuredSignals are the eviction signals podrun measures.
var measuredSignals = []string{node.SignalMemoryAvailable, node.SignalNodeFSAvailable, node.SignalImageFSAvailable}
