// Package clustertest starts a real control plane for podrun's cluster-mode
// tests: etcd and kube-apiserver, the binaries hack/k8s.sh builds, run as
// plain processes on 127.0.0.1 with free ports, in the test's temporary
// directory, with a CA of their own. The apiserver authorizes with
// Node,RBAC and admits with NodeRestriction, so a node kubeconfig minted
// here (NodeKubeconfig) has exactly the rights the node authorizer gives a
// kubelet. Everything is stopped when the test ends.
//
// No fake stands in: a test that needs the binaries and cannot find them
// fails and says how to build them (bash hack/k8s.sh), it is never skipped.
package clustertest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Kubernetes release hack/k8s.sh builds and these tests run.
const Version = "v1.37.2"

// ServiceCIDR is the apiserver's --service-cluster-ip-range.
const ServiceCIDR = "10.96.0.0/12"

// BinDir is where the Kubernetes binaries are: $PODRUN_K8S_BIN, else
// hack/k8s.sh's cache, ${PODRUN_CACHE:-/var/cache/podrun}/k8s/<Version>.
func BinDir() string {
	if d := os.Getenv("PODRUN_K8S_BIN"); d != "" {
		return d
	}
	root := os.Getenv("PODRUN_CACHE")
	if root == "" {
		root = "/var/cache/podrun"
	}
	return filepath.Join(root, "k8s", Version)
}

// Binary returns the path of one of hack/k8s.sh's binaries (kubeadm,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd),
// or fails the test with the command that builds them.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(BinDir(), name)
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("clustertest: %s is missing (%v): build the Kubernetes %s binaries and images with `bash hack/k8s.sh` "+
			"(hack/test.sh does; about 6-15 min the first time), or point PODRUN_K8S_BIN at a directory holding them", p, err, Version)
	}
	return p
}

// Options change how Start runs the control plane. The zero value is fine.
type Options struct {
	// AdvertiseAddress is the apiserver's --advertise-address, which the
	// kubernetes Service's endpoints name. Empty: 127.0.0.1, with the
	// endpoint reconciler off (the API refuses loopback endpoints).
	AdvertiseAddress string
	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Dir holds the PKI, kubeconfigs, etcd's data and the processes' logs
	// (etcd.log, kube-apiserver.log).
	Dir string
	// URL is the apiserver's https://127.0.0.1:<port>.
	URL string
	// EtcdURL is etcd's client URL (plain http on 127.0.0.1).
	EtcdURL string
	// CAFile is the PEM of the CA that signed the apiserver's serving
	// certificate and every client certificate (the --client-ca-file); a
	// node API can use it as its clientCAFile.
	CAFile string
	// AdminKubeconfig is a kubeconfig of a system:masters user; Admin is the
	// same as a rest.Config.
	AdminKubeconfig string
	Admin           *rest.Config
	// KubeletClientCert and KubeletClientKey are the files of the client
	// certificate the apiserver presents to node APIs (user
	// kube-apiserver-kubelet-client, group system:masters).
	KubeletClientCert, KubeletClientKey string

	t      testing.TB
	ca     *x509.Certificate
	caKey  crypto.Signer
	mu     sync.Mutex
	api    *proc
	apiArg []string
}

// Start runs etcd and kube-apiserver and waits until the apiserver is ready
// (its /readyz passes: RBAC's bootstrap roles are in). They are stopped,
// apiserver first, when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	etcdBin := Binary(t, "etcd")
	Binary(t, "kube-apiserver") // fail early, before any work
	c := &Cluster{t: t, Dir: t.TempDir()}
	pki := filepath.Join(c.Dir, "pki")
	must(t, os.MkdirAll(pki, 0o700))

	// PKI: the CA, the serving certificate, the service-account key pair,
	// the admin and the kubelet-client certificates.
	c.ca, c.caKey = newCA(t)
	c.CAFile = filepath.Join(pki, "ca.crt")
	writePEM(t, c.CAFile, "CERTIFICATE", c.ca.Raw)
	advertise := opts.AdvertiseAddress
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	if advertise != "" {
		ips = append(ips, net.ParseIP(advertise))
	}
	servingCert, servingKey := c.issue(t, certSpec{
		cn: "kube-apiserver", ips: ips,
		dns:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		server: true,
	})
	writePEM(t, filepath.Join(pki, "apiserver.crt"), "CERTIFICATE", servingCert)
	writeKey(t, filepath.Join(pki, "apiserver.key"), servingKey)
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	writeKey(t, filepath.Join(pki, "sa.key"), saKey)
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	must(t, err)
	writePEM(t, filepath.Join(pki, "sa.pub"), "PUBLIC KEY", saPub)
	kcCert, kcKey := c.issue(t, certSpec{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}})
	c.KubeletClientCert = filepath.Join(pki, "apiserver-kubelet-client.crt")
	c.KubeletClientKey = filepath.Join(pki, "apiserver-kubelet-client.key")
	writePEM(t, c.KubeletClientCert, "CERTIFICATE", kcCert)
	writeKey(t, c.KubeletClientKey, kcKey)

	// etcd.
	ports := freePorts(t, 3)
	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	etcd := startProc(t, c.Dir, "etcd", etcdBin,
		"--name=default",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+c.EtcdURL,
		"--advertise-client-urls="+c.EtcdURL,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	t.Cleanup(etcd.stop)
	etcd.waitHTTP(t, c.EtcdURL+"/health", nil, 30*time.Second)

	// kube-apiserver.
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.apiArg = []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--etcd-servers=" + c.EtcdURL,
		"--client-ca-file=" + c.CAFile,
		"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
		"--kubelet-client-certificate=" + c.KubeletClientCert,
		"--kubelet-client-key=" + c.KubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	if advertise != "" {
		c.apiArg = append(c.apiArg, "--advertise-address="+advertise)
	} else {
		c.apiArg = append(c.apiArg, "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	c.apiArg = append(c.apiArg, opts.ExtraAPIServerArgs...)

	adminCert, adminKey := c.issue(t, certSpec{cn: "kubernetes-admin", orgs: []string{"system:masters"}})
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.conf")
	c.Admin = c.writeKubeconfig(t, c.AdminKubeconfig, "kubernetes-admin", adminCert, adminKey)

	t.Cleanup(c.StopAPIServer)
	c.StartAPIServer()
	return c
}

// StartAPIServer starts kube-apiserver again after StopAPIServer (on the
// same port, with the same flags) and waits until it is ready.
func (c *Cluster) StartAPIServer() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil {
		return
	}
	c.api = startProc(c.t, c.Dir, "kube-apiserver", Binary(c.t, "kube-apiserver"), c.apiArg...)
	c.api.waitHTTP(c.t, c.URL+"/readyz", c.Admin, 90*time.Second)
}

// StopAPIServer stops kube-apiserver (SIGTERM, SIGKILL after 15 s); etcd
// keeps running.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api != nil {
		c.api.stop()
		c.api = nil
	}
}

// Client is a clientset of the admin user.
func (c *Cluster) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Admin)
	must(t, err)
	return cs
}

// NodeKubeconfig writes a kubeconfig for the node agent of node name: a
// client certificate of user system:node:<name> in group system:nodes,
// signed by the cluster's CA, so it has the node authorizer's rights and
// no others. It returns the file's path and the same as a rest.Config.
func (c *Cluster) NodeKubeconfig(t testing.TB, name string) (string, *rest.Config) {
	t.Helper()
	return c.Kubeconfig(t, "system:node:"+name, "system:nodes")
}

// Kubeconfig writes a kubeconfig for user (with groups), authenticated by a
// client certificate the cluster's CA signs.
func (c *Cluster) Kubeconfig(t testing.TB, user string, groups ...string) (string, *rest.Config) {
	t.Helper()
	cert, key := c.issue(t, certSpec{cn: user, orgs: groups})
	name := strings.NewReplacer(":", "-", "/", "-").Replace(user)
	path := filepath.Join(c.Dir, name+".kubeconfig")
	if _, err := os.Stat(path); err == nil {
		f, err := os.CreateTemp(c.Dir, name+"-*.kubeconfig")
		must(t, err)
		f.Close()
		path = f.Name()
	}
	return path, c.writeKubeconfig(t, path, user, cert, key)
}

// ClientCert returns a PEM client certificate and key for user (with
// groups), signed by the cluster's CA.
func (c *Cluster) ClientCert(t testing.TB, user string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	cert, key := c.issue(t, certSpec{cn: user, orgs: groups})
	return pemBytes("CERTIFICATE", cert), keyPEMBytes(t, key)
}

func (c *Cluster) writeKubeconfig(t testing.TB, path, user string, cert []byte, key crypto.Signer) *rest.Config {
	t.Helper()
	caPEM, err := os.ReadFile(c.CAFile)
	must(t, err)
	certPEM, keyPEM := pemBytes("CERTIFICATE", cert), keyPEMBytes(t, key)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["clustertest"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["clustertest"] = &clientcmdapi.Context{Cluster: "clustertest", AuthInfo: user}
	cfg.CurrentContext = "clustertest"
	must(t, clientcmd.WriteToFile(*cfg, path))
	return &rest.Config{
		Host: c.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: caPEM, CertData: certPEM, KeyData: keyPEM,
		},
	}
}

// PKI.

type certSpec struct {
	cn     string
	orgs   []string
	ips    []net.IP
	dns    []string
	server bool
}

func newCA(t testing.TB) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "clustertest-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	return cert, key
}

func (c *Cluster) issue(t testing.TB, s certSpec) ([]byte, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if s.server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		IPAddresses:  s.ips,
		DNSNames:     s.dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, key.Public(), c.caKey)
	must(t, err)
	return der, key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	must(t, err)
	return n
}

func pemBytes(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEMBytes(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	return pemBytes("PRIVATE KEY", der)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	must(t, os.WriteFile(path, pemBytes(typ, der), 0o644))
}

func writeKey(t testing.TB, path string, key crypto.Signer) {
	t.Helper()
	must(t, os.WriteFile(path, keyPEMBytes(t, key), 0o600))
}

// Processes.

type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

func startProc(t testing.TB, dir, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("clustertest: start %s: %v", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

// stop sends SIGTERM to the process group and SIGKILL after 15 s.
func (p *proc) stop() {
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// waitHTTP polls url until it answers 200 (with cfg's TLS and credentials
// when cfg is set), failing the test with the log's tail if the process
// exits or the time runs out.
func (p *proc) waitHTTP(t testing.TB, url string, cfg *rest.Config, timeout time.Duration) {
	t.Helper()
	client := httpClient(t, cfg)
	deadline := time.Now().Add(timeout)
	var last string
	for {
		select {
		case <-p.done:
			t.Fatalf("clustertest: %s exited (%v) before it was ready; its log %s ends:\n%s", p.name, p.cmd.ProcessState, p.log, tail(p.log, 40))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := newGet(ctx, url)
		resp, err := client.Do(req)
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				cancel()
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b.String())
		} else {
			last = err.Error()
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("clustertest: %s not ready after %s (%s); its log %s ends:\n%s", p.name, timeout, last, p.log, tail(p.log, 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func httpClient(t testing.TB, cfg *rest.Config) *http.Client {
	t.Helper()
	if cfg == nil {
		return &http.Client{}
	}
	hc, err := rest.HTTPClientFor(cfg)
	must(t, err)
	return hc
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct ports free on 127.0.0.1 now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
}
