package runner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostsFileContentAsTheKubeletWritesIt: the pod's /etc/hosts, byte for
// byte as the kubelet's managedHostsFileContent and nodeHostsFileContent
// write it, on the pod's network (with and without a subdomain, an IPv6
// address, hostAliases) and on the host's.
func TestHostsFileContentAsTheKubeletWritesIt(t *testing.T) {
	const localhost = "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n"
	aliases := []v1.HostAlias{
		{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}},
		{IP: "fd00::7", Hostnames: []string{"six.example"}},
	}
	const aliasLines = "\n# Entries added by HostAliases.\n" +
		"123.45.67.89\tfoo\tbar\n" +
		"fd00::7\tsix.example\n"
	for _, tt := range []struct {
		name         string
		ips          []string
		host, domain string
		aliases      []v1.HostAlias
		want         string
	}{
		{"pod network", []string{"10.88.0.2"}, "web", "", nil, localhost + "10.88.0.2\tweb\n"},
		{"subdomain", []string{"10.88.0.2"}, "h1", "sub.default.svc.cluster.local", nil,
			localhost + "10.88.0.2\th1.sub.default.svc.cluster.local\th1\n"},
		{"IPv6 pod IP", []string{"fd00::2"}, "web", "", nil, localhost + "fd00::2\tweb\n"},
		{"hostAliases", []string{"10.88.0.2"}, "web", "", aliases, localhost + "10.88.0.2\tweb\n" + aliasLines},
		{"no IP", nil, "web", "", aliases, localhost + aliasLines},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(managedHostsContent(tt.ips, tt.host, tt.domain, tt.aliases)); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}

	node := "127.0.0.1\tlocalhost\n192.0.2.1\tthe-node\n"
	if got, want := string(hostNetworkHostsContent([]byte(node), nil)),
		"# Kubernetes-managed hosts file (host network).\n"+node; got != want {
		t.Errorf("host network: got\n%q\nwant\n%q", got, want)
	}
	if got, want := string(hostNetworkHostsContent([]byte(node), aliases)),
		"# Kubernetes-managed hosts file (host network).\n"+node+aliasLines; got != want {
		t.Errorf("host network with hostAliases: got\n%q\nwant\n%q", got, want)
	}
}

// TestEtcHostsMountUnlessTheContainerHasOne: every container gets the
// pod's file at /etc/hosts, read-write, unless it mounts a volume there
// itself; none while the pod has no file (no IP yet).
func TestEtcHostsMountUnlessTheContainerHasOne(t *testing.T) {
	plain := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/etc"}}}
	own := &v1.Container{Name: "d", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/etc/hosts"}}}
	m := etcHostsMount("/root/pods/u/etc-hosts", plain)
	if m == nil || m.HostPath != "/root/pods/u/etc-hosts" || m.ContainerPath != "/etc/hosts" || m.ReadOnly {
		t.Errorf("plain container: %+v, want the pod's file at /etc/hosts, read-write", m)
	}
	if m := etcHostsMount("/root/pods/u/etc-hosts", own); m != nil {
		t.Errorf("a container that mounts /etc/hosts itself: %+v, want none", m)
	}
	if m := etcHostsMount("", plain); m != nil {
		t.Errorf("no file: %+v, want none", m)
	}
}
