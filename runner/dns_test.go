package runner

import (
	"reflect"
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
