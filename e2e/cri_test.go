package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/podrun/podrun/clustertest"
	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/cri"
)

// The CRI tests run podrun with --container-runtime-endpoint against the
// private containerd hack/containerd.sh sets up (and starts when it is
// not running), never the system's.
var (
	criEndpoint  = envOrDefault("PODRUN_CRI_ENDPOINT", cri.DefaultEndpoint)
	criSetupOnce sync.Once
	criSetupErr  error
)

func envOrDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// criEnv is a test's podrun world on containerd: an env whose podrun calls
// name the CRI endpoint, and whose cleanup removes every sandbox (and with
// it every container) of its node from containerd.
type criEnv struct {
	*env
	rt *cri.Runtime
}

// newCRIEnv is a criEnv, the images (besides the test image) imported
// from the local dockerd into containerd.
func newCRIEnv(t *testing.T, images ...string) *criEnv {
	t.Helper()
	criSetupOnce.Do(func() {
		if os.Getenv("PODRUN_CRI_ENDPOINT") == "" {
			criSetupErr = containerdScript()
		}
	})
	if criSetupErr != nil {
		t.Fatal(criSetupErr)
	}
	if len(images) > 0 {
		if err := containerdScript(append([]string{"import"}, images...)...); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t)
	e.extra = append(e.extra, "--container-runtime-endpoint", criEndpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The test's own view of containerd, as podrun's runtime for the node
	// (its log dir is podrun's).
	rt, err := cri.New(ctx, cri.Options{Endpoint: criEndpoint, NodeName: e.node, LogDir: filepath.Join(e.root, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	ce := &criEnv{env: e, rt: rt}
	// Registered after newEnv's: runs first.
	t.Cleanup(func() {
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sbs, err := rt.ListSandboxes(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, sb := range sbs {
			if err := rt.RemoveSandbox(ctx, sb.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return ce
}

// containerdScript runs hack/containerd.sh with args.
// criObjects counts the node's sandboxes and containers on the private
// containerd.
func criObjects(t *testing.T, e *env) (sandboxes, containers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := cri.New(ctx, cri.Options{Endpoint: criEndpoint, NodeName: e.node, LogDir: filepath.Join(e.root, "logs")})
	if err != nil {
		t.Errorf("count the node's objects on containerd: %v", err)
		return 0, 0
	}
	defer rt.Close()
	sbs, cs, err := rt.ListPodObjects(ctx, "")
	if err != nil {
		t.Errorf("count the node's objects on containerd: %v", err)
	}
	return len(sbs), len(cs)
}

func containerdScript(args ...string) error {
	out, err := exec.Command("bash", append([]string{"../hack/containerd.sh"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/containerd.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// objects lists the node's sandboxes and containers on containerd.
func (e *criEnv) objects() ([]*engine.Sandbox, []*engine.Container) {
	e.t.Helper()
	sbs, cs, err := e.rt.ListPodObjects(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return sbs, cs
}

// runningByName returns the IDs of the node's running containers by name.
func (e *criEnv) runningByName() map[string]string {
	_, cs := e.objects()
	out := map[string]string{}
	for _, c := range cs {
		if c.State == engine.StateRunning {
			out[c.Name] = c.ID
		}
	}
	return out
}

const criWebPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: ` + testImage + `
    command: ["sh", "-c", "echo VERSION; trap 'exit 0' TERM; sleep 3600 & wait"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
`

// TestCRIOnceDownPsLogs: once brings a pod up on containerd (a CRI sandbox
// with a CNI address, its container running and ready), ps and logs read it
// from containerd, a second once adopts it without a restart, and down
// removes everything it made.
func TestCRIOnceDownPsLogs(t *testing.T) {
	e := newCRIEnv(t)
	path := e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "hello-from-cri"))

	r := e.podrun(2*time.Minute, "once", path, "--wait", "ready", "--timeout", "90s")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sbs, _ := e.objects()
	if len(sbs) != 1 || sbs[0].State != engine.StateRunning || sbs[0].IP == "" {
		t.Fatalf("sandboxes on containerd: %+v, want one running with an IP", sbs)
	}
	first := e.runningByName()["web"]
	if first == "" {
		t.Fatalf("no running web container on containerd: %v", e.runningByName())
	}

	r = e.podrun(time.Minute, "ps", "-o", "wide", "--daemon=false")
	if r.code != 0 {
		t.Fatalf("ps: exit %d\n%s", r.code, r.stderr)
	}
	contains(t, "ps", r.stdout, "web-"+e.node, "Running", sbs[0].IP)

	r = e.podrun(time.Minute, "logs", "web-"+e.node)
	if r.code != 0 || r.stdout != "hello-from-cri\n" {
		t.Fatalf("logs: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	// A second once finds the pod as it is: nothing restarted.
	r = e.podrun(2*time.Minute, "once", path, "--wait", "ready", "--timeout", "90s")
	if r.code != 0 {
		t.Fatalf("second once: exit %d\n%s", r.code, r.stderr)
	}
	if again := e.runningByName()["web"]; again != first {
		t.Errorf("second once: web is %.12s, want the adopted %.12s", again, first)
	}

	r = e.podrun(2*time.Minute, "down", path)
	if r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	if sbs, cs := e.objects(); len(sbs) != 0 || len(cs) != 0 {
		t.Errorf("after down: %d sandboxes, %d containers left on containerd", len(sbs), len(cs))
	}
	if _, err := os.Stat(filepath.Join(e.root, "logs")); err == nil {
		if left, _ := os.ReadDir(filepath.Join(e.root, "logs")); len(left) != 0 {
			t.Errorf("after down: log directories left: %v", left)
		}
	}
}

// TestCRIPullWithPullSecret: on containerd, once pulls a private image
// with the pod's imagePullSecret (a Docker config keyed "127.0.0.1:port",
// as users write it) and shows the pull as on Docker: a line when it
// starts and one when it is done, with the layers' size from containerd.
func TestCRIPullWithPullSecret(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "e2e/cri-"+randSuffix())
	e := newCRIEnv(t)
	t.Cleanup(func() {
		// The names the pull made (ref, and repo@digest), not the image:
		// it is the test image, under its own name too.
		sock := strings.TrimPrefix(criEndpoint, "unix://")
		out, _ := exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "ls", "-q").Output()
		repo, _, _ := strings.Cut(ref, ":1")
		for name := range strings.FieldsSeq(string(out)) {
			if name == ref || strings.HasPrefix(name, repo+"@") {
				exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "rm", name).Run()
			}
		}
	})
	e.write("secret.yaml", reg.pullSecret("regcred", reg.pass))
	e.write("pod.yaml", privatePod("private", ref, "regcred"))

	res := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if e.runningByName()["app"] == "" {
		t.Errorf("the pod does not run on containerd: %v", e.runningByName())
	}
	contains(t, "once's stderr", res.stderr, "pulling image "+ref, "pulled "+ref+": ", " in 1 layers")
	if strings.Contains(res.stderr, "pulled "+ref+": 0B") {
		t.Errorf("the pull's size is not known:\n%s", res.stderr)
	}
	if r := e.podrun(2*time.Minute, "down", e.dir); r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCRIPodToPod: a pod on containerd reaches another pod's address
// over the CNI bridge. On a machine where dockerd has set the FORWARD
// policy to DROP (and bridged traffic goes through iptables), this needs
// the firewall plugin in the CNI chain that hack/containerd.sh writes.
func TestCRIPodToPod(t *testing.T) {
	e := newCRIEnv(t)
	e.write("server.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: server
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: `+testImage+`
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-the-other-pod > /www/index.html && exec httpd -f -p 8080 -h /www"]
`)
	e.write("client.yaml", sleepPod("client", 1))
	if r := e.podrun(2*time.Minute, "once", e.dir, "--timeout", "90s"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	sbs, _ := e.objects()
	var serverIP string
	for _, sb := range sbs {
		if sb.Pod.Name == "server-"+e.node {
			serverIP = sb.IP
		}
	}
	client := e.runningByName()["c0"]
	if serverIP == "" || client == "" {
		t.Fatalf("server address %q, client container %q: %+v", serverIP, client, sbs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []byte
	// httpd may not listen yet when once returns (no readiness probe).
	waitFor(t, "the server answers the client", 90*time.Second, func() bool {
		var code int
		var err error
		// nc, not wget: the static busybox's wget crashes here.
		code, out, err = e.rt.Exec(ctx, client, []string{"sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 ` + serverIP + " 8080"})
		return err == nil && code == 0
	})
	if !strings.Contains(string(out), "hello-from-the-other-pod") {
		t.Errorf("the client got %q", out)
	}
	if r := e.podrun(2*time.Minute, "down", e.dir); r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCRIPrivileged: a privileged container runs on containerd with
// --allow-privileged: its sandbox is made privileged, as the kubelet makes
// it (containerd refuses the container in any other).
func TestCRIPrivileged(t *testing.T) {
	e := newCRIEnv(t)
	e.write("priv.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: priv
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "3600"]
    securityContext:
      privileged: true
`)
	if r := e.podrun(2*time.Minute, "once", e.dir, "--allow-privileged", "--timeout", "90s"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s", r.code, r.stderr)
	}
	if e.runningByName()["app"] == "" {
		t.Fatalf("the privileged container does not run: %v", e.runningByName())
	}
	if r := e.podrun(2*time.Minute, "down", e.dir); r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCRIWatch: watch on containerd replaces the one container whose spec
// changed (the sandbox stays), restarts a container that dies, and removes
// the pod when its manifest goes.
func TestCRIWatch(t *testing.T) {
	e := newCRIEnv(t)
	path := e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "v1"))
	stop := e.watch()
	defer stop(syscall.SIGTERM)

	var first string
	waitFor(t, "web running", 90*time.Second, func() bool {
		first = e.runningByName()["web"]
		return first != ""
	})
	sbs, _ := e.objects()
	if len(sbs) != 1 {
		t.Fatalf("sandboxes: %+v, want one", sbs)
	}
	sandbox := sbs[0].ID

	// An edit replaces the container, in the same sandbox.
	e.write("web.yaml", strings.ReplaceAll(criWebPod, "VERSION", "v2"))
	var second string
	waitFor(t, "web replaced", 90*time.Second, func() bool {
		second = e.runningByName()["web"]
		return second != "" && second != first
	})
	if sbs, _ := e.objects(); len(sbs) != 1 || sbs[0].ID != sandbox || sbs[0].State != engine.StateRunning {
		t.Errorf("after an edit of a container: sandboxes %+v, want %.12s kept running", sbs, sandbox)
	}
	r := e.podrun(time.Minute, "logs", "web-"+e.node)
	if r.stdout != "v2\n" {
		t.Errorf("logs after the edit: %q, want v2", r.stdout)
	}

	// A container that dies is restarted (the relist sees it: containerd
	// 1.6 has no CRI event stream).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.rt.StopContainer(ctx, second, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web restarted", 90*time.Second, func() bool {
		id := e.runningByName()["web"]
		return id != "" && id != second
	})

	// The manifest's removal removes the pod.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod removed", 90*time.Second, func() bool {
		sbs, cs := e.objects()
		return len(sbs) == 0 && len(cs) == 0
	})
}

// TestCRIControlPlane: etcd and kube-apiserver as kubeadm writes them
// (hostNetwork, kube-system, priorityClassName, seccomp RuntimeDefault,
// hostPath DirectoryOrCreate, requests only, bare command names, probes on
// named ports, HTTPS without verification, startup probes gating liveness)
// come up on containerd with once --wait ready. etcd speaks plain HTTP on
// ports of the test's own, and the apiserver makes its own serving
// certificate: the PKI is not what is tested here. A loopback advertise
// address needs no endpoint reconciler.
func TestCRIControlPlane(t *testing.T) {
	etcdImage := "registry.k8s.io/etcd:3.7.0-0"
	apiImage := "registry.k8s.io/kube-apiserver:" + clustertest.Version
	e := newCRIEnv(t, etcdImage, apiImage)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pki, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	os.WriteFile(filepath.Join(pki, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
	client, peer, metrics, secure := freePort(t), freePort(t), freePort(t), freePort(t)

	e.write("etcd.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  labels: {component: etcd, tier: control-plane}
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --name=cp
    - --data-dir=/var/lib/etcd
    - --listen-client-urls=http://127.0.0.1:%[1]d
    - --advertise-client-urls=http://127.0.0.1:%[1]d
    - --listen-peer-urls=http://127.0.0.1:%[2]d
    - --initial-advertise-peer-urls=http://127.0.0.1:%[2]d
    - --initial-cluster=cp=http://127.0.0.1:%[2]d
    - --listen-metrics-urls=http://127.0.0.1:%[3]d
    image: %[4]s
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet: {host: 127.0.0.1, path: /livez, port: probe-port, scheme: HTTP}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    ports:
    - {containerPort: %[3]d, name: probe-port, protocol: TCP}
    readinessProbe:
      failureThreshold: 3
      httpGet: {host: 127.0.0.1, path: /readyz, port: probe-port, scheme: HTTP}
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests: {cpu: 100m, memory: 100Mi}
    startupProbe:
      failureThreshold: 24
      httpGet: {host: 127.0.0.1, path: /readyz, port: probe-port, scheme: HTTP}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - {mountPath: /var/lib/etcd, name: etcd-data}
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  volumes:
  - hostPath: {path: %[5]s, type: DirectoryOrCreate}
    name: etcd-data
`, client, peer, metrics, etcdImage, filepath.Join(dir, "etcd")))

	e.write("kube-apiserver.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  labels: {component: kube-apiserver, tier: control-plane}
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=127.0.0.1
    - --endpoint-reconciler-type=none
    - --allow-privileged=true
    - --authorization-mode=Node,RBAC
    - --enable-admission-plugins=NodeRestriction
    - --etcd-servers=http://127.0.0.1:%[1]d
    - --secure-port=%[2]d
    - --cert-dir=/var/run/kubernetes
    - --service-account-issuer=https://kubernetes.default.svc.cluster.local
    - --service-account-key-file=/etc/kubernetes/pki/sa.pub
    - --service-account-signing-key-file=/etc/kubernetes/pki/sa.key
    - --service-cluster-ip-range=10.96.0.0/12
    image: %[3]s
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet: {host: 127.0.0.1, path: /livez, port: probe-port, scheme: HTTPS}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: kube-apiserver
    ports:
    - {containerPort: %[2]d, name: probe-port, protocol: TCP}
    readinessProbe:
      failureThreshold: 3
      httpGet: {host: 127.0.0.1, path: /readyz, port: probe-port, scheme: HTTPS}
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests: {cpu: 250m}
    startupProbe:
      failureThreshold: 24
      httpGet: {host: 127.0.0.1, path: /livez, port: probe-port, scheme: HTTPS}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - {mountPath: /etc/kubernetes/pki, name: k8s-certs, readOnly: true}
    - {mountPath: /var/run/kubernetes, name: serving-certs}
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  volumes:
  - hostPath: {path: %[4]s, type: DirectoryOrCreate}
    name: k8s-certs
  - hostPath: {path: %[5]s, type: DirectoryOrCreate}
    name: serving-certs
`, client, secure, apiImage, pki, filepath.Join(dir, "serving")))

	r := e.podrun(4*time.Minute, "once", e.dir, "--wait", "ready", "--timeout", "3m")
	if r.code != 0 {
		for _, pod := range []string{"etcd", "kube-apiserver"} {
			l := e.podrun(time.Minute, "logs", "-n", "kube-system", pod+"-"+e.node, "--previous", "--tail", "30")
			t.Logf("%s's previous logs:\n%s%s", pod, l.stdout, l.stderr)
		}
		t.Fatalf("once --wait ready: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	running := e.runningByName()
	if running["etcd"] == "" || running["kube-apiserver"] == "" {
		t.Fatalf("running on containerd: %v, want etcd and kube-apiserver", running)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", secure))
	if err != nil {
		t.Fatalf("apiserver /readyz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("apiserver /readyz: %s %q", resp.Status, body)
	}
	if r := e.podrun(2*time.Minute, "down", e.dir); r.code != 0 {
		t.Errorf("down: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCRIKillNineAdoption: podrun watch SIGKILLed while it brings pods up
// on containerd, then started again, adopts what the first one made: every
// pod ends with one running sandbox and one running container, nothing
// duplicated; what the kill left half made is older than what runs.
func TestCRIKillNineAdoption(t *testing.T) {
	e := newCRIEnv(t)
	const n = 6
	for i := range n {
		e.write(fmt.Sprintf("p%d.yaml", i), strings.ReplaceAll(strings.ReplaceAll(criWebPod, "name: web\nspec", fmt.Sprintf("name: p%d\nspec", i)), "VERSION", "up"))
	}
	first, _ := e.start("watch", "--path", e.dir, "--healthz-port", "0")
	waitFor(t, "a first sandbox", 90*time.Second, func() bool {
		sbs, _ := e.objects()
		return len(sbs) > 0
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()

	stop := e.watch()
	defer stop(syscall.SIGTERM)
	waitFor(t, "every pod running", 2*time.Minute, func() bool { return e.runningPods() == n })
	sbs, cs := e.objects()
	perPod := map[string]int{}
	ready := map[string]int{} // pod: attempt of its running sandbox
	for _, sb := range sbs {
		if sb.State == engine.StateRunning {
			perPod[sb.Pod.Name+"/sandbox"]++
			ready[sb.Pod.Name] = sb.Attempt
		}
	}
	// A kill in the middle of RunPodSandbox leaves containerd a stopped
	// sandbox, which CRI cannot start again: podrun makes the next
	// attempt, as the kubelet does, and garbage collection removes the
	// stopped one. That is not a duplicate; a second running one would be.
	for _, sb := range sbs {
		if sb.State != engine.StateRunning && sb.Attempt >= ready[sb.Pod.Name] {
			t.Errorf("sandbox attempt %d of %s is %s, and not older than the running one (attempt %d)",
				sb.Attempt, sb.Pod.Name, sb.State, ready[sb.Pod.Name])
		}
	}
	// Likewise a container whose start the killed podrun had asked for
	// fails it (containerd 1.6 cancels a start whose caller goes away:
	// StartError, exit code 128) and runs again as the next attempt, as
	// after any failed start: what must not be is two running, or a
	// stopped one newer than the running one.
	runningAttempt := map[string]int{}
	for _, c := range cs {
		if c.State == engine.StateRunning {
			perPod[c.Pod.Name+"/"+c.Name]++
			runningAttempt[c.Pod.Name+"/"+c.Name] = c.Attempt
		}
	}
	for _, c := range cs {
		if k := c.Pod.Name + "/" + c.Name; c.State != engine.StateRunning && c.Attempt >= runningAttempt[k] {
			t.Errorf("container %s attempt %d is %s, and not older than the running one (attempt %d)",
				k, c.Attempt, c.State, runningAttempt[k])
		}
	}
	for k, count := range perPod {
		if count != 1 {
			t.Errorf("%s: %d running, want 1", k, count)
		}
	}
	if len(ready) != n || len(runningAttempt) != n {
		t.Errorf("%d running sandboxes and %d running containers, want %d of each", len(ready), len(runningAttempt), n)
	}
}

// runningPods counts the node's pods with a running container.
func (e *criEnv) runningPods() int {
	_, cs := e.objects()
	pods := map[string]bool{}
	for _, c := range cs {
		if c.State == engine.StateRunning {
			pods[c.Pod.UID] = true
		}
	}
	return len(pods)
}

// TestCRIInfo: `info` with a CRI endpoint shows the filesystem of
// containerd's images (its own root, as hack/containerd.sh configures it),
// not Docker's data root.
func TestCRIInfo(t *testing.T) {
	e := newCRIEnv(t)
	info := e.podrun(time.Minute, "info", "-o", "json")
	if info.code != 0 {
		t.Fatalf("info: exit %d\n%s", info.code, info.stderr)
	}
	var facts struct {
		Filesystems []struct {
			Use  string `json:"use"`
			Path string `json:"path"`
		} `json:"filesystems"`
	}
	if err := json.Unmarshal([]byte(info.stdout), &facts); err != nil {
		t.Fatalf("info: %v\n%s", err, info.stdout)
	}
	var images string
	for _, fs := range facts.Filesystems {
		if fs.Use == "images" {
			images = fs.Path
		}
	}
	const containerdRoot = "/var/lib/podrun-containerd/"
	if !strings.HasPrefix(images, containerdRoot) {
		t.Errorf("info's images filesystem is %q, want one under %s (stderr: %s)\n%s", images, containerdRoot, info.stderr, info.stdout)
	}
}
