package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine/enginetest"
	"github.com/podrun/podrun/runner"
)

// etcHostsMounts are the host files mounted at /etc/hosts in each
// container of the pod, by container name.
func (h *harness) etcHostsMounts(uid string) map[string][]string {
	h.t.Helper()
	out := map[string][]string{}
	for _, c := range h.containers(uid) {
		for _, m := range h.fake.ContainerConfig(c.ID).Mounts {
			if m.ContainerPath == "/etc/hosts" {
				if m.ReadOnly {
					h.t.Errorf("container %s: /etc/hosts mounted read-only, want read-write as the kubelet", c.Name)
				}
				out[c.Name] = append(out[c.Name], m.HostPath)
			}
		}
	}
	return out
}

// TestPodsGetTheKubeletManagedEtcHosts: the init container, the sidecar
// and the app container of a pod get the pod's hosts file at /etc/hosts,
// written in its directory with the sandbox's IP, the subdomain's name and
// the hostAliases as the kubelet writes them; a container that mounts a
// volume at /etc/hosts keeps that one alone; a pod on the host's network
// gets the node's hosts file under the kubelet's header, with its aliases.
func TestPodsGetTheKubeletManagedEtcHosts(t *testing.T) {
	fake := newFake(t)
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n192.0.2.10\tnode1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var root string
	h := start(t, fake, func(c *runner.Config) {
		c.NodeHostsFile = nodeHosts
		c.ClusterDomain = "cluster.local"
		root = c.RootDir
	})
	own := filepath.Join(t.TempDir(), "own-hosts")
	if err := os.WriteFile(own, []byte("10.0.0.1 mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	pod := newPod("u1", "web", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}, "own": {"run"}})
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{
		{Name: "setup", Image: image, Command: []string{enginetest.FakeScript, "exit", "0"}, ImagePullPolicy: v1.PullIfNotPresent},
		{Name: "proxy", Image: image, Command: []string{"run"}, ImagePullPolicy: v1.PullIfNotPresent, RestartPolicy: &always},
	}
	pod.Spec.Hostname, pod.Spec.Subdomain = "h1", "sub"
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	pod.Spec.Volumes = []v1.Volume{{Name: "hosts", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: own}}}}
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}

	hostNet := newPod("u2", "hostnet", v1.RestartPolicyAlways, map[string][]string{"app": {"run"}})
	hostNet.Spec.HostNetwork = true
	hostNet.Spec.HostAliases = []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"alias.example"}}}

	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod, hostNet}}
	h.waitStatus("u1", "running", allRunning)
	h.waitStatus("u2", "running", allRunning)

	file := filepath.Join(root, "pods", "u1", "etc-hosts")
	if real, err := filepath.EvalSymlinks(root); err == nil {
		file = filepath.Join(real, "pods", "u1", "etc-hosts")
	}
	mounts := h.etcHostsMounts("u1")
	for _, name := range []string{"setup", "proxy", "app"} {
		if got := mounts[name]; len(got) != 1 || got[0] != file {
			t.Errorf("container %s: /etc/hosts from %v, want %s alone", name, got, file)
		}
	}
	if got := mounts["own"]; len(got) != 1 || got[0] != own {
		t.Errorf("container own: /etc/hosts from %v, want its own volume %s alone", got, own)
	}
	p, _ := h.r.Pod("u1")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The whole of the kubelet's format is TestHostsFileContentAsTheKubeletWritesIt's.
	head := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
	tail := "\n" + p.Status.PodIP + "\th1.sub.default.svc.cluster.local\th1\n" +
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
	if got := string(b); p.Status.PodIP == "" || !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) {
		t.Errorf("pod IP %q; %s holds\n%q\nwant it to start with\n%q\nand end with\n%q", p.Status.PodIP, file, got, head, tail)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v, %v; want mode 0644", file, fi.Mode(), err)
	}

	hm := h.etcHostsMounts("u2")["app"]
	if len(hm) != 1 {
		t.Fatalf("host-network pod: /etc/hosts from %v, want the pod's file", hm)
	}
	b, err = os.ReadFile(hm[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.10\tnode1\n" +
		"\n# Entries added by HostAliases.\n10.9.9.9\talias.example\n"
	if string(b) != want {
		t.Errorf("host-network pod's /etc/hosts:\n%q\nwant\n%q", b, want)
	}
}
