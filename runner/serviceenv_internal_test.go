package runner

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func service(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

// TestServiceEnvVarsAsTheKubelets: the variables of the kubelet's own
// envvars test (pkg/kubelet/envvars), name for name and value for value.
func TestServiceEnvVarsAsTheKubelets(t *testing.T) {
	services := []*v1.Service{
		service("ns", "foo-bar", "1.2.3.4", v1.ServicePort{Port: 8080, Protocol: "TCP"}),
		service("ns", "abc-123", "5.6.7.8", v1.ServicePort{Name: "u-d-p", Port: 8081, Protocol: "UDP"}, v1.ServicePort{Name: "t-c-p", Port: 8081, Protocol: "TCP"}),
		service("ns", "q-u-u-x", "9.8.7.6", v1.ServicePort{Port: 8082, Protocol: "TCP"}, v1.ServicePort{Name: "8083", Port: 8083, Protocol: "TCP"}),
		service("ns", "svrc-clusterip-none", "None", v1.ServicePort{Port: 8082, Protocol: "TCP"}),
		service("ns", "svrc-clusterip-empty", "", v1.ServicePort{Port: 8082, Protocol: "TCP"}),
		service("ns", "super-ipv6", "2001:DB8::", v1.ServicePort{Name: "u-d-p", Port: 8084, Protocol: "UDP"}, v1.ServicePort{Name: "t-c-p", Port: 8084, Protocol: "TCP"}),
		service("ns", "sctp-1", "1.2.3.4", v1.ServicePort{Port: 777, Protocol: "SCTP"}),
	}
	want := map[string]string{
		"FOO_BAR_SERVICE_HOST":           "1.2.3.4",
		"FOO_BAR_SERVICE_PORT":           "8080",
		"FOO_BAR_PORT":                   "tcp://1.2.3.4:8080",
		"FOO_BAR_PORT_8080_TCP":          "tcp://1.2.3.4:8080",
		"FOO_BAR_PORT_8080_TCP_PROTO":    "tcp",
		"FOO_BAR_PORT_8080_TCP_PORT":     "8080",
		"FOO_BAR_PORT_8080_TCP_ADDR":     "1.2.3.4",
		"ABC_123_SERVICE_HOST":           "5.6.7.8",
		"ABC_123_SERVICE_PORT":           "8081",
		"ABC_123_SERVICE_PORT_U_D_P":     "8081",
		"ABC_123_SERVICE_PORT_T_C_P":     "8081",
		"ABC_123_PORT":                   "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP":          "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP_PROTO":    "udp",
		"ABC_123_PORT_8081_UDP_PORT":     "8081",
		"ABC_123_PORT_8081_UDP_ADDR":     "5.6.7.8",
		"ABC_123_PORT_8081_TCP":          "tcp://5.6.7.8:8081",
		"ABC_123_PORT_8081_TCP_PROTO":    "tcp",
		"ABC_123_PORT_8081_TCP_PORT":     "8081",
		"ABC_123_PORT_8081_TCP_ADDR":     "5.6.7.8",
		"Q_U_U_X_SERVICE_HOST":           "9.8.7.6",
		"Q_U_U_X_SERVICE_PORT":           "8082",
		"Q_U_U_X_SERVICE_PORT_8083":      "8083",
		"Q_U_U_X_PORT":                   "tcp://9.8.7.6:8082",
		"Q_U_U_X_PORT_8082_TCP":          "tcp://9.8.7.6:8082",
		"Q_U_U_X_PORT_8082_TCP_PROTO":    "tcp",
		"Q_U_U_X_PORT_8082_TCP_PORT":     "8082",
		"Q_U_U_X_PORT_8082_TCP_ADDR":     "9.8.7.6",
		"Q_U_U_X_PORT_8083_TCP":          "tcp://9.8.7.6:8083",
		"Q_U_U_X_PORT_8083_TCP_PROTO":    "tcp",
		"Q_U_U_X_PORT_8083_TCP_PORT":     "8083",
		"Q_U_U_X_PORT_8083_TCP_ADDR":     "9.8.7.6",
		"SUPER_IPV6_SERVICE_HOST":        "2001:DB8::",
		"SUPER_IPV6_SERVICE_PORT":        "8084",
		"SUPER_IPV6_SERVICE_PORT_U_D_P":  "8084",
		"SUPER_IPV6_SERVICE_PORT_T_C_P":  "8084",
		"SUPER_IPV6_PORT":                "udp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_UDP":       "udp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_UDP_PROTO": "udp",
		"SUPER_IPV6_PORT_8084_UDP_PORT":  "8084",
		"SUPER_IPV6_PORT_8084_UDP_ADDR":  "2001:DB8::",
		"SUPER_IPV6_PORT_8084_TCP":       "tcp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_TCP_PROTO": "tcp",
		"SUPER_IPV6_PORT_8084_TCP_PORT":  "8084",
		"SUPER_IPV6_PORT_8084_TCP_ADDR":  "2001:DB8::",
		"SCTP_1_SERVICE_HOST":            "1.2.3.4",
		"SCTP_1_SERVICE_PORT":            "777",
		"SCTP_1_PORT":                    "sctp://1.2.3.4:777",
		"SCTP_1_PORT_777_SCTP":           "sctp://1.2.3.4:777",
		"SCTP_1_PORT_777_SCTP_PROTO":     "sctp",
		"SCTP_1_PORT_777_SCTP_PORT":      "777",
		"SCTP_1_PORT_777_SCTP_ADDR":      "1.2.3.4",
	}
	if got := serviceEnvVars(services, "ns", true); !maps.Equal(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s = %q, not the kubelet's", k, got[k])
			}
		}
	}
}

// TestServiceEnvVarsWhichServices: a pod sees the Services of its own
// namespace with enableServiceLinks, and the kubernetes Service of
// namespace default always; its own namespace's service of that name
// wins.
func TestServiceEnvVarsWhichServices(t *testing.T) {
	tcp := v1.ServicePort{Port: 443, Protocol: "TCP"}
	services := []*v1.Service{
		service("default", "kubernetes", "10.96.0.1", tcp),
		service("default", "other", "10.96.0.2", tcp),
		service("ns", "mine", "10.96.0.3", tcp),
		service("elsewhere", "theirs", "10.96.0.4", tcp),
	}
	got := serviceEnvVars(services, "ns", true)
	if got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["MINE_SERVICE_HOST"] != "10.96.0.3" ||
		got["OTHER_SERVICE_HOST"] != "" || got["THEIRS_SERVICE_HOST"] != "" {
		t.Errorf("with links: %v", got)
	}
	got = serviceEnvVars(services, "ns", false)
	if got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["MINE_SERVICE_HOST"] != "" {
		t.Errorf("without links: %v", got)
	}
	got = serviceEnvVars(append(services, service("ns", "kubernetes", "10.0.0.9", tcp)), "ns", true)
	if got["KUBERNETES_SERVICE_HOST"] != "10.0.0.9" {
		t.Errorf("own namespace's kubernetes Service: %v", got["KUBERNETES_SERVICE_HOST"])
	}
	if got := serviceEnvVars(nil, "ns", true); len(got) != 0 {
		t.Errorf("no services: %v", got)
	}
}
