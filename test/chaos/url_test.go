//go:build chaos

package chaos

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
)

// faultServer serves the manifest URL over TLS on 127.0.0.1, with a
// handler and a certificate the test switches.
type faultServer struct {
	mu      sync.Mutex
	handler http.HandlerFunc
	cert    *tls.Certificate
	srv     *http.Server
	url     string
}

func (f *faultServer) set(h http.HandlerFunc) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func (f *faultServer) setCert(c *tls.Certificate) {
	f.mu.Lock()
	f.cert = c
	f.mu.Unlock()
}

func startFaultServer(t *testing.T, cert *tls.Certificate) *faultServer {
	t.Helper()
	f := &faultServer{cert: cert}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.cert, nil
	}})
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.handler
		f.mu.Unlock()
		h(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go f.srv.Serve(tl)
	t.Cleanup(func() { f.srv.Close() })
	f.url = "https://" + ln.Addr().String() + "/pods.yaml"
	return f
}

// certs makes a CA and a certificate for 127.0.0.1 signed by it, and a
// self-signed certificate for 127.0.0.1 that nobody trusts.
func certs(t *testing.T) (caPEM []byte, good, bad *tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podrun chaos CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, serial int64) *tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if parent == nil {
			parent, parentKey = tmpl, k
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), leaf(ca, caKey, 2), leaf(nil, nil, 3)
}

// urlFault is one way the manifest URL misbehaves, for hold.
type urlFault struct {
	name    string
	hold    time.Duration
	handler http.HandlerFunc
	badCert bool
}

func serveBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write([]byte(body))
	}
}

// TestURLFaults: a pod from a manifest URL keeps running, as last good,
// through every fault of the server; podrun's RSS stays bounded; and a
// good edit after them all is applied.
func TestURLFaults(t *testing.T) {
	sum := newSummary(t, "url-faults")
	caPEM, good, bad := certs(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	body := benchkit.Pod{Name: "urlpod"}.YAML()
	f := startFaultServer(t, good)
	f.set(serveBody(body))

	n := newNode(t, "chaos-url")
	pr, err := n.p.Start("watch", "--url", f.url, "--manifest-url-ca", caFile, "--http-check-frequency", "1s", "--healthz-port", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	ctx := ctxFor(t, 20*time.Minute)
	if _, err := n.waitConverged(ctx, 2, true, 2*time.Minute); err != nil {
		t.Fatalf("the URL's pod: %v\n%s", err, pr.Stderr(4000))
	}
	before, err := n.state(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	base, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		t.Fatal(err)
	}

	// RSS, sampled all along.
	var maxRSS atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if ps, err := benchkit.ReadProc(pr.Pid()); err == nil && ps.RSS > maxRSS.Load() {
				maxRSS.Store(ps.RSS)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	bigBody := strings.Repeat("# padding: a body over the 10 MiB limit ..............................\n", (11<<20)/72+1) + body
	var flip atomic.Int64
	hold := duration("URL_HOLD", 6*time.Second, 4*time.Second)
	faults := []urlFault{
		{name: "500", hold: hold, handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "internal error", http.StatusInternalServerError)
		}},
		{name: "hang", hold: 12 * time.Second, handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}},
		{name: "slow drip", hold: 12 * time.Second, handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			for i := 0; i < 600; i++ {
				if _, err := w.Write([]byte(body[i%len(body) : i%len(body)+1])); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}},
		{name: "11 MiB body (Content-Length)", hold: hold, handler: serveBody(bigBody)},
		{name: "11 MiB body (chunked)", hold: hold, handler: func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < len(bigBody); i += 1 << 20 {
				w.Write([]byte(bigBody[i:min(i+1<<20, len(bigBody))]))
				w.(http.Flusher).Flush()
			}
		}},
		{name: "invalid TLS", hold: hold, handler: serveBody(body), badCert: true},
		{name: "empty body", hold: hold, handler: serveBody("")},
		{name: "garbage body", hold: hold, handler: serveBody("\x00\x01\x02 not: [yaml")},
		{name: "flapping", hold: 2 * hold, handler: func(w http.ResponseWriter, r *http.Request) {
			switch flip.Add(1) % 3 {
			case 0:
				serveBody(body)(w, r)
			case 1:
				http.Error(w, "flap", http.StatusServiceUnavailable)
			default:
				serveBody("")(w, r)
			}
		}},
	}
	for _, fault := range faults {
		if fault.badCert {
			f.setCert(bad)
		}
		f.set(fault.handler)
		time.Sleep(fault.hold)
		err := n.untouched(ctx, before, pr)
		f.setCert(good)
		f.set(serveBody(body))
		time.Sleep(2 * time.Second) // a good poll in between
		if err == nil {
			err = n.untouched(ctx, before, pr)
		}
		t.Logf("%s (%s): err=%v", fault.name, fault.hold, err)
		if err != nil {
			err = fmt.Errorf("%s: %w", fault.name, err)
		}
		sum.trial(err)
	}
	close(stopSampling)
	<-sampled
	limit := base.RSS + 64<<20
	rssErr := error(nil)
	if maxRSS.Load() > limit {
		rssErr = fmt.Errorf("RSS reached %.1f MiB, over the bound of %.1f MiB (%.1f MiB before the faults + 64 MiB)",
			mib(maxRSS.Load()), mib(limit), mib(base.RSS))
	}
	sum.trial(rssErr)
	sum.note("RSS %.1f MiB before the faults, at most %.1f MiB during them (bound +64 MiB)", mib(base.RSS), mib(maxRSS.Load()))

	// After all that, a good edit is applied.
	f.set(serveBody(benchkit.Pod{Name: "urlpod", Command: []string{"sleep", "3601"}}.YAML()))
	_, err = benchkit.WaitFor(ctx, time.Minute, 200*time.Millisecond, "the edit to be applied", func() (bool, error) {
		st, err := n.state(ctx)
		if err != nil {
			return false, err
		}
		id := st.running["urlpod/app"]
		return id != "" && id != before.running["urlpod/app"] && st.running["urlpod/POD"] == before.running["urlpod/POD"], nil
	})
	if err != nil {
		err = fmt.Errorf("a good edit after the faults: %w", err)
	}
	sum.trial(err)
	sum.note("%d faults: %s", len(faults), faultNames(faults))
}

func faultNames(fs []urlFault) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.name)
	}
	return strings.Join(out, ", ")
}
