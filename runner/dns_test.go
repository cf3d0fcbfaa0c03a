package runner

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
)

func TestDNSConfigAsTheKubeletMakesIt(t *testing.T) {
	ndots := "2"
	clusterDNS := []string{"10.96.0.10"}
	// The cluster's search path, then the host's.
	search := []string{"web.svc.cluster.local", "svc.cluster.local", "cluster.local", "host.example"}
	tests := []struct {
		name        string
		policy      v1.DNSPolicy
		hostNetwork bool
		clusterDNS  []string
		dnsConfig   *v1.PodDNSConfig
		want        *engine.DNSConfig
	}{
		{"ClusterFirst", v1.DNSClusterFirst, false, clusterDNS, nil,
			&engine.DNSConfig{Servers: clusterDNS, Searches: search, Options: []string{"ndots:5"}}},
		{"unset is ClusterFirst", "", false, clusterDNS, nil,
			&engine.DNSConfig{Servers: clusterDNS, Searches: search, Options: []string{"ndots:5"}}},
		{"ClusterFirst without cluster DNS is the host's", v1.DNSClusterFirst, false, nil, nil, nil},
		{"ClusterFirst on the host network is the host's", v1.DNSClusterFirst, true, clusterDNS, nil, nil},
		{"ClusterFirstWithHostNet", v1.DNSClusterFirstWithHostNet, true, clusterDNS, nil,
			&engine.DNSConfig{Servers: clusterDNS, Searches: search, Options: []string{"ndots:5"}}},
		{"Default", v1.DNSDefault, false, clusterDNS, nil, nil},
		{"None", v1.DNSNone, false, clusterDNS, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}},
			&engine.DNSConfig{Servers: []string{"1.1.1.1"}}},
		{"Default with dnsConfig: the host's first, loopback servers left out", v1.DNSDefault, false, clusterDNS,
			&v1.PodDNSConfig{Nameservers: []string{"192.0.2.9", "10.0.0.2"}, Searches: []string{"corp", "host.example"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}}},
			&engine.DNSConfig{Servers: []string{"10.0.0.2", "192.0.2.9"}, Searches: []string{"host.example", "corp"},
				Options: []string{"edns0", "ndots:2"}}},
		{"ClusterFirst without cluster DNS, with dnsConfig, is Default's", v1.DNSClusterFirst, false, nil,
			&v1.PodDNSConfig{Nameservers: []string{"192.0.2.9"}},
			&engine.DNSConfig{Servers: []string{"10.0.0.2", "192.0.2.9"}, Searches: []string{"host.example"},
				Options: []string{"ndots:1", "edns0"}}},
		{"Default on the host's network keeps the host's loopback server", v1.DNSDefault, true, nil,
			&v1.PodDNSConfig{Searches: []string{"corp"}},
			&engine.DNSConfig{Servers: []string{"127.0.0.53", "10.0.0.2"}, Searches: []string{"host.example", "corp"},
				Options: []string{"ndots:1", "edns0"}}},
		{"dnsConfig on top, its ndots replacing the default", v1.DNSClusterFirst, false, clusterDNS,
			&v1.PodDNSConfig{Searches: []string{"corp"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}, {Name: "edns0"}}},
			&engine.DNSConfig{Servers: clusterDNS, Searches: append(append([]string(nil), search...), "corp"), Options: []string{"ndots:2", "edns0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web"},
				Spec: v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork, DNSConfig: tt.dnsConfig}}
			host := &engine.DNSConfig{Servers: []string{"127.0.0.53", "10.0.0.2"}, Searches: []string{"host.example"},
				Options: []string{"ndots:1", "edns0"}}
			got := dnsConfig(pod, tt.clusterDNS, "cluster.local", host)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPodDomainAsTheKubeletMakesIt(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web"}}
	if got := podDomain(pod, "cluster.local"); got != "" {
		t.Errorf("no subdomain: domain %q, want none", got)
	}
	pod.Spec.Subdomain = "db"
	for domain, want := range map[string]string{"cluster.local": "db.web.svc.cluster.local", "": "db.web.svc"} {
		if got := podDomain(pod, domain); got != want {
			t.Errorf("cluster domain %q: %q, want %q", domain, got, want)
		}
	}
}

// TestHostnameOverrideIsTheWholeName: spec.hostnameOverride is the pod's
// hostname whatever spec.hostname says, and it has no domain, as the
// kubelet's GeneratePodHostNameAndDomain makes them; without it the
// hostname is spec.hostname, else the pod's name.
func TestHostnameOverrideIsTheWholeName(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node", Namespace: "web"}, Spec: v1.PodSpec{Subdomain: "db"}}
	if got := podHostname(pod); got != "web-node" {
		t.Errorf("no hostname: %q, want the pod's name", got)
	}
	pod.Spec.Hostname = "custom-host"
	if got := podHostname(pod); got != "custom-host" {
		t.Errorf("hostname: %q, want custom-host", got)
	}
	override := "override.example.host"
	pod.Spec.HostnameOverride = &override
	if got, domain := podHostname(pod), podDomain(pod, "cluster.local"); got != override || domain != "" {
		t.Errorf("override: hostname %q, domain %q; want %q and none", got, domain, override)
	}
}

// TestDNSConfigFitsTheKubeletsLimits: 3 nameservers, 32 search domains of
// 253 characters at most, 2048 characters in all; the host's search
// domains that the cluster's already name are not repeated.
func TestDNSConfigFitsTheKubeletsLimits(t *testing.T) {
	host := &engine.DNSConfig{Servers: []string{"10.0.0.1", "10.0.0.2"}, Searches: []string{"cluster.local", "lan"}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web"}, Spec: v1.PodSpec{DNSPolicy: v1.DNSDefault,
		DNSConfig: &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2"}}}}
	if got := dnsConfig(pod, nil, "", host).Servers; !reflect.DeepEqual(got, []string{"10.0.0.1", "10.0.0.2", "192.0.2.1"}) {
		t.Errorf("servers %v, want the first 3", got)
	}
	long := strings.Repeat("a", 250) + ".com" // 254 characters
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, fmt.Sprintf("d%02d.%s", i, strings.Repeat("x", 60)))
	}
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Searches: append([]string{long}, many...)}
	got := dnsConfig(pod, nil, "", host).Searches
	if slices.Contains(got, long) || len(strings.Join(got, " ")) > 2048 || len(got) > 32 || got[0] != "cluster.local" {
		t.Errorf("searches: %d, %d characters, first %q", len(got), len(strings.Join(got, " ")), got[0])
	}
	pod.Spec = v1.PodSpec{DNSPolicy: v1.DNSClusterFirst}
	want := []string{"web.svc.cluster.local", "svc.cluster.local", "cluster.local", "lan"}
	if got := dnsConfig(pod, []string{"10.96.0.10"}, "cluster.local", host).Searches; !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterFirst searches %v, want %v", got, want)
	}
}
