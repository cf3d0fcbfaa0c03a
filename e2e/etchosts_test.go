package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The pod's /etc/hosts as the kubelet manages it (conformance: "Kubelet
// when scheduling an agnhost Pod with hostAliases should write entries to
// /etc/hosts", KubeletManagedEtcHosts), read back inside the containers.

const etcHostsPods = `apiVersion: v1
kind: Pod
metadata: {name: aliases}
spec:
  terminationGracePeriodSeconds: 1
  hostAliases:
  - ip: 123.45.67.89
    hostnames: [foo, bar]
  initContainers:
  - name: init
    image: IMAGE
    command: [sh, -c, cat /etc/hosts]
  containers:
  - name: app
    image: IMAGE
    command: [sh, -c, SHOW]
  - name: own
    image: IMAGE
    command: [sh, -c, SHOW]
    volumeMounts: [{name: hosts, mountPath: /etc/hosts}]
  volumes:
  - name: hosts
    hostPath: {path: OWN, type: File}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  terminationGracePeriodSeconds: 1
  hostNetwork: true
  hostAliases:
  - ip: 10.9.9.9
    hostnames: [alias.example]
  containers:
  - name: app
    image: IMAGE
    command: [sh, -c, SHOW]
`

// checkManagedEtcHosts runs etcHostsPods on e's engine and checks each
// container's /etc/hosts: the kubelet's file, byte for byte, with the
// pod's IP and hostname and the hostAliases line the conformance spec
// wants, in the init and the app container; the container's own volume
// where it mounts one at /etc/hosts; on the host's network, the node's
// file under the kubelet's header, with the aliases.
func checkManagedEtcHosts(t *testing.T, e *env) {
	own := filepath.Join(t.TempDir(), "hosts")
	ownContent := "10.0.0.1\tmine\n"
	if err := os.WriteFile(own, []byte(ownContent), 0o644); err != nil {
		t.Fatal(err)
	}
	show := `cat /etc/hosts; echo "== end"; trap "exit 0" TERM; sleep 3600 & wait`
	path := e.write("hosts.yaml", strings.NewReplacer("IMAGE", testImage, "SHOW", fmt.Sprintf("%q", show), "OWN", own).Replace(etcHostsPods))
	r := e.podrun(3*time.Minute, "once", path, "--wait", "running", "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	logs := func(pod, ctr string) string {
		var out string
		waitUntil(t, time.Minute, pod+"/"+ctr+" printed /etc/hosts", func() (bool, string) {
			r := e.podrun(30*time.Second, "logs", pod+"-"+e.node, "-c", ctr)
			out = r.stdout
			return r.code == 0 && (ctr == "init" || strings.HasSuffix(out, "== end\n")), fmt.Sprintf("exit %d: %q %s", r.code, out, r.stderr)
		})
		return strings.TrimSuffix(out, "== end\n")
	}

	r = e.podrun(time.Minute, "ps", "-o", "json", "--daemon=false")
	var list v1.PodList
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
		t.Fatalf("ps -o json: exit %d, %v\n%s", r.code, err, r.stderr)
	}
	podIP := ""
	for _, p := range list.Items {
		if p.Name == "aliases-"+e.node {
			podIP = p.Status.PodIP
		}
	}
	if podIP == "" {
		t.Fatalf("ps -o json: no pod IP of aliases-%s\n%s", e.node, r.stdout)
	}
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n" +
		podIP + "\taliases-" + e.node + "\n" +
		"\n# Entries added by HostAliases.\n" +
		"123.45.67.89\tfoo\tbar\n"
	for _, ctr := range []string{"init", "app"} {
		if got := logs("aliases", ctr); got != want {
			t.Errorf("container %s's /etc/hosts:\n%s\nwant the kubelet's:\n%s", ctr, got, want)
		}
	}
	if got := logs("aliases", "own"); got != ownContent {
		t.Errorf("a container that mounts its own /etc/hosts reads %q, want its own %q", got, ownContent)
	}

	node, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	want = "# Kubernetes-managed hosts file (host network).\n" + string(node) +
		"\n# Entries added by HostAliases.\n10.9.9.9\talias.example\n"
	if got := logs("hostnet", "app"); got != want {
		t.Errorf("host-network pod's /etc/hosts:\n%s\nwant:\n%s", got, want)
	}
}

// TestManagedEtcHosts: the kubelet-managed /etc/hosts on Docker.
func TestManagedEtcHosts(t *testing.T) {
	checkManagedEtcHosts(t, newEnv(t))
}

// TestCRIManagedEtcHosts: the same on containerd, which had no
// hostAliases at all before podrun wrote the file itself.
func TestCRIManagedEtcHosts(t *testing.T) {
	checkManagedEtcHosts(t, newCRIEnv(t).env)
}
