package runner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
)

// The pod's /etc/hosts, as the kubelet manages it (kubelet_pods.go:
// makeHostsMount, managedHostsFileContent, nodeHostsFileContent): a file
// of the pod's directory, <root-dir>/pods/<uid>/etc-hosts, bind-mounted
// read-write at /etc/hosts into every init, sidecar and app container
// that mounts nothing there itself, on either engine. On the pod's
// network it names localhost, the pod's IP as its hostname (and
// hostname.domain with a subdomain) and the hostAliases; on the host's, it
// is the node's hosts file and the hostAliases. It is rewritten whenever
// containers are started, as the kubelet writes it for every container
// it starts.

const (
	// etcHostsFile is the file's name in the pod's directory (the
	// kubelet's too).
	etcHostsFile = "etc-hosts"
	etcHostsPath = "/etc/hosts"

	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// managedHostsContent is the hosts file of a pod on its own network with
// the addresses podIPs, as the kubelet writes it.
func managedHostsContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostNetworkHostsContent is the hosts file of a pod on the host's
// network: the node's, under a header of its own, and the hostAliases.
func hostNetworkHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries are the hostAliases' lines: one per alias, its IP and
// its hostnames, tab-separated.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// mountsEtcHosts reports whether c mounts a volume at /etc/hosts itself:
// it keeps that one.
func mountsEtcHosts(c *v1.Container) bool {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			return true
		}
	}
	return false
}

// etcHostsMount is the mount of the pod's hosts file, nil when none is
// given: a container that mounts its own, or a pod on its own network
// without an IP yet (the kubelet's shouldMountHostsFile).
func etcHostsMount(hostsFile string, c *v1.Container) *engine.Mount {
	if hostsFile == "" || mountsEtcHosts(c) {
		return nil
	}
	return &engine.Mount{HostPath: hostsFile, ContainerPath: etcHostsPath}
}

// writePodHostsFile writes the hosts file of pod, whose IP is podIP, and
// returns its real path; "" (and no file) for a pod on its own network
// without an IP yet.
func (r *Runner) writePodHostsFile(pod *v1.Pod, podIP string) (string, error) {
	var content []byte
	switch {
	case pod.Spec.HostNetwork:
		nodeFile := r.cfg.NodeHostsFile
		if nodeFile == "" {
			nodeFile = etcHostsPath
		}
		node, err := os.ReadFile(nodeFile)
		if err != nil {
			return "", fmt.Errorf("the node's hosts file: %w", err)
		}
		content = hostNetworkHostsContent(node, pod.Spec.HostAliases)
	case podIP == "":
		return "", nil
	default:
		content = managedHostsContent([]string{podIP}, podHostname(pod), podDomain(pod, r.cfg.ClusterDomain), pod.Spec.HostAliases)
	}
	d, err := openPodDirs(r.cfg.RootDir, string(pod.UID))
	if err != nil {
		return "", err
	}
	defer d.Close()
	p, err := d.replaceFile(nil, etcHostsFile, content, 0o644)
	if err != nil {
		return "", fmt.Errorf("pod hosts file: %w", err)
	}
	return p, nil
}
