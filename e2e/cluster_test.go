package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podrun/podrun/clustertest"
)

// The node's address for the kubeadm test: a test-only address (TEST-NET
// benchmarking range) put on lo for the test, since kubeadm refuses a
// loopback advertise address. No traffic leaves the machine.
const clusterNodeIP = "198.18.0.2"

// kubeadm writes these fixed paths.
const (
	kubeadmEtc      = "/etc/kubernetes"
	kubeadmKubelet  = "/var/lib/kubelet"
	kubeadmManifest = "/etc/kubernetes/manifests"
)

// TestKubeadmInitWithPodrun is issue 12's target: `podrun watch` started
// first, in the kubelet's place, then the real `kubeadm init` (hack/k8s.sh
// builds it and the control-plane images) exits 0; the node is Ready in the
// API, and the four control-plane static pods are mirror pods, Running.
//
// It takes the machine's kubeadm paths (/etc/kubernetes, /var/lib/kubelet)
// and the control plane's fixed ports, refuses to run when they are in use,
// and removes everything it made afterwards.
func TestKubeadmInitWithPodrun(t *testing.T) {
	kubeadm := clustertest.Binary(t, "kubeadm")
	clustertest.Binary(t, "kubectl")
	e := newEnv(t)
	claimKubeadmHost(t)
	addLoopbackAddress(t, clusterNodeIP)

	// podrun in the kubelet's place: it starts before kubeadm writes
	// kubelet.conf and the manifests, and connects when they appear.
	// kubeadm's kube-proxy DaemonSet is privileged, which the kubelet allows
	// by default and podrun only when told; the node API listens on the
	// test's address only, not on the machine's.
	args := []string{"--path", kubeadmManifest,
		"--kubeconfig", filepath.Join(kubeadmEtc, "kubelet.conf"), "--node-ip", clusterNodeIP,
		"--allow-privileged", "--address", clusterNodeIP}
	podrunLog := filepath.Join(t.TempDir(), "podrun.log")
	watch := startLogged(t, podrunLog, podrunBin, e.args("watch", args...)...)
	t.Cleanup(func() {
		// Stop podrun (it leaves the pods running), then take every pod
		// down as a user would, and check nothing of the node is left.
		watch.Process.Signal(syscall.SIGTERM)
		waitOrKill(watch, 30*time.Second)
		if r := e.podrun(3*time.Minute, "down", "--all", "--grace-period", "5s"); r.code != 0 {
			t.Errorf("podrun down --all: exit %d\n%s", r.code, r.stderr)
		}
		if left := e.containers(); len(left) > 0 {
			var names []string
			for _, c := range left {
				names = append(names, strings.Join(c.Names, ",")+" "+c.State)
			}
			t.Errorf("podrun down --all left %d containers of node %s: %v", len(left), e.node, names)
		}
		if t.Failed() {
			t.Logf("podrun's log ends:\n%s", tailFile(podrunLog, 60))
		}
	})
	waitHealthz(t, "http://127.0.0.1:10248/healthz", 30*time.Second)

	// kubeadm, with a configuration that names the node and the address,
	// keeps etcd's data and the PKI in the test's directory, and names a
	// CRI socket so that kubeadm does not probe for one (preflight, which
	// would talk to it, is skipped).
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kubeadm.yaml")
	writeFile(t, cfg, fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
  bindPort: 6443
nodeRegistration:
  name: %[2]s
  criSocket: unix:///run/podrun/cri.sock
  kubeletExtraArgs:
  - name: node-ip
    value: %[1]s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[3]s
clusterName: podrun-e2e
certificatesDir: %[4]s
etcd:
  local:
    dataDir: %[5]s
`, clusterNodeIP, e.node, clustertest.Version, filepath.Join(dir, "pki"), filepath.Join(dir, "etcd")))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var out bytes.Buffer
	kc := exec.CommandContext(ctx, kubeadm, "init", "--skip-phases=preflight", "--config", cfg, "--v=1")
	kc.Stdout, kc.Stderr = &out, &out
	err := kc.Run()
	t.Logf("kubeadm init (%s, %v):\n%s", time.Since(start).Round(time.Second), err, out.String())
	if err != nil {
		t.Errorf("kubeadm init failed: %v", err)
	}

	admin := filepath.Join(kubeadmEtc, "admin.conf")
	if _, statErr := os.Stat(admin); statErr != nil {
		t.Fatalf("kubeadm wrote no %s: %v", admin, statErr)
	}
	rc, cerr := clientcmd.BuildConfigFromFlags("", admin)
	if cerr != nil {
		t.Fatal(cerr)
	}
	rc.Timeout = 10 * time.Second
	cs, cerr := kubernetes.NewForConfig(rc)
	if cerr != nil {
		t.Fatal(cerr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			o, _ := exec.Command(clustertest.Binary(t, "kubectl"), "--kubeconfig", admin, "--request-timeout=10s",
				"get", "nodes,pods", "-A", "-o", "wide").CombinedOutput()
			t.Logf("kubectl get nodes,pods -A:\n%s", o)
		}
	})
	// The cheap checks of issue 12's first "Done when", polled together
	// until all pass (each reports its own last state), for at most two
	// minutes; less when kubeadm failed, as the node has had its minute.
	wait := 2 * time.Minute
	if err != nil {
		wait = 30 * time.Second
	}
	ctx = context.Background()
	var renewed *metav1.MicroTime
	checks := []clusterCheck{
		{name: "node Ready with cAdvisor capacity", f: func() (bool, string) {
			n, err := cs.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods} {
				if q, ok := n.Status.Capacity[r]; !ok || q.Sign() <= 0 {
					return false, fmt.Sprintf("capacity %s is %v", r, n.Status.Capacity)
				}
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady {
					return c.Status == v1.ConditionTrue, fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
				}
			}
			return false, "no Ready condition"
		}},
		{name: "node Lease renewing", f: func() (bool, string) {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, e.node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if l.Spec.RenewTime == nil {
				return false, "no renewTime"
			}
			if renewed == nil {
				renewed = l.Spec.RenewTime
				return false, "renewTime " + renewed.String() + ", waiting for the next renewal"
			}
			return l.Spec.RenewTime.After(renewed.Time), "renewTime still " + renewed.String()
		}},
		{name: "control-plane mirror pods Running with the node's IP", f: func() (bool, string) {
			var bad []string
			for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				name := c + "-" + e.node
				p, err := cs.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case p.Annotations[v1.MirrorPodAnnotationKey] == "":
					bad = append(bad, name+" is not a mirror pod")
				case p.Status.Phase != v1.PodRunning:
					bad = append(bad, fmt.Sprintf("%s is %q", name, p.Status.Phase))
				case p.Status.PodIP != clusterNodeIP:
					// hostNetwork: the kubelet reports the node's IP.
					bad = append(bad, fmt.Sprintf("%s has podIP %q, want the node's %s", name, p.Status.PodIP, clusterNodeIP))
				}
			}
			return len(bad) == 0, strings.Join(bad, "; ")
		}},
		{name: "kube-proxy (API pod, stand-in image) Running with the node's IP", f: func() (bool, string) {
			pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
			if err != nil {
				return false, err.Error()
			}
			if len(pods.Items) == 0 {
				return false, "no kube-proxy pod"
			}
			p := pods.Items[0]
			return p.Status.Phase == v1.PodRunning && p.Status.PodIP == clusterNodeIP,
				fmt.Sprintf("%s is %q with podIP %q", p.Name, p.Status.Phase, p.Status.PodIP)
		}},
		{name: "CoreDNS shows ErrImagePull/ImagePullBackOff", f: func() (bool, string) {
			pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if w := c.State.Waiting; w != nil {
						if w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
							return true, ""
						}
						seen = append(seen, p.Name+": "+w.Reason)
					}
				}
				if len(p.Status.ContainerStatuses) == 0 {
					seen = append(seen, fmt.Sprintf("%s: %q, no container status", p.Name, p.Status.Phase))
				}
			}
			return false, fmt.Sprintf("%d pods: %v", len(pods.Items), seen)
		}},
	}
	runClusterChecks(t, wait, checks)
}

type clusterCheck struct {
	name string
	f    func() (ok bool, state string)
	ok   bool
	last string
}

// runClusterChecks polls every check once a second until all have passed
// (a check that passed is not asked again) or d has passed, and fails the
// test for each that never passed, with its last state.
func runClusterChecks(t *testing.T, d time.Duration, checks []clusterCheck) {
	t.Helper()
	poll(d, func() bool {
		all := true
		for i := range checks {
			c := &checks[i]
			if !c.ok {
				c.ok, c.last = c.f()
				all = all && c.ok
			}
		}
		return all
	})
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not after %s: %s", c.name, d, c.last)
		}
	}
}

// claimKubeadmHost fails the test unless the machine is free for kubeadm:
// no manifests in /etc/kubernetes/manifests, nothing listening on the
// control plane's and the kubelet's ports. It removes, after the test,
// whatever it finds new under /etc/kubernetes and /var/lib/kubelet.
func claimKubeadmHost(t *testing.T) {
	t.Helper()
	if ents, err := os.ReadDir(kubeadmManifest); err == nil && len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("%s already holds %v: this machine runs (or ran) a control plane; the test would overwrite it. "+
			"Remove them (kubeadm reset) or run the test elsewhere", kubeadmManifest, names)
	}
	for _, f := range []string{"admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf", "scheduler.conf"} {
		if p := filepath.Join(kubeadmEtc, f); fileExists(p) {
			t.Fatalf("%s exists: this machine runs (or ran) a control plane, and kubeadm would reuse it. "+
				"Remove it (kubeadm reset) or run the test elsewhere", p)
		}
	}
	for _, addr := range []string{"127.0.0.1:10248", "127.0.0.1:10250", "127.0.0.1:2379", "127.0.0.1:2381",
		"127.0.0.1:6443", "127.0.0.1:10257", "127.0.0.1:10259"} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("something listens on %s already; kubeadm's control plane needs it", addr)
		}
	}
	for _, d := range []string{kubeadmEtc, kubeadmKubelet} {
		before := map[string]bool{}
		_, statErr := os.Stat(d)
		existed := statErr == nil
		if existed {
			filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
				if err == nil {
					before[p] = true
				}
				return nil
			})
		}
		t.Cleanup(func() {
			if !existed {
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("remove %s: %v", d, err)
				}
				return
			}
			// Remove what is new, deepest first.
			var added []string
			filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
				if err == nil && !before[p] {
					added = append(added, p)
				}
				return nil
			})
			for i := len(added) - 1; i >= 0; i-- {
				if err := os.RemoveAll(added[i]); err != nil {
					t.Errorf("remove %s: %v", added[i], err)
				}
			}
		})
	}
}

// addLoopbackAddress puts ip/32 on lo for the test. An address there
// already means another run is using it: that is a failure, not a share.
func addLoopbackAddress(t *testing.T, ip string) {
	t.Helper()
	if out, err := exec.Command("ip", "-o", "addr", "show", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr show dev lo: %v\n%s", err, out)
	} else if bytes.Contains(out, []byte(" "+ip+"/")) {
		t.Fatalf("%s is on lo already: another test run is using it (or one was killed: ip addr del %s/32 dev lo)", ip, ip)
	}
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s/32 dev lo: %v\n%s", ip, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Errorf("ip addr del %s/32 dev lo: %v\n%s", ip, err, out)
		}
	})
}

// startLogged runs bin in the background with its output in logPath; the
// test's cleanup kills it if it still runs.
func startLogged(t *testing.T, logPath, bin string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { waitOrKill(cmd, 0) })
	return cmd
}

// waitOrKill waits up to d for cmd to exit, then kills it. Safe to call
// twice.
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	if cmd.ProcessState != nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
	}
}

func waitHealthz(t *testing.T, url string, d time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	var last error
	if !poll(d, func() bool {
		resp, err := c.Get(url)
		if err != nil {
			last = err
			return false
		}
		resp.Body.Close()
		last = errors.New(resp.Status)
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("podrun's %s: %v", url, last)
	}
}

// poll calls f every second until it is true or d passes.
func poll(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Second)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
