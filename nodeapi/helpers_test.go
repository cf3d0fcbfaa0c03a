package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/podrun/podrun/engine"

	"github.com/podrun/podrun/kubeclient"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client issues a client certificate for user cn in groups orgs.
func (ca *testCA) client(t *testing.T, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func (ca *testCA) writeFile(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ca-"+ca.cert.Subject.CommonName+".crt")
	if err := os.WriteFile(p, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeAPIServer answers TokenReviews and SubjectAccessReviews as the
// apiserver does, over HTTP, so the real client-go code runs.
type fakeAPIServer struct {
	srv *httptest.Server

	mu sync.Mutex
	// tokens maps a token to its user; others are not authenticated.
	tokens map[string]authenticationv1.UserInfo
	// allow says whether a SubjectAccessReview is allowed; nil: denied.
	allow func(authorizationv1.SubjectAccessReviewSpec) bool
	// fail makes every review a 500.
	fail         bool
	tokenReviews int
	sars         []authorizationv1.SubjectAccessReviewSpec
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{tokens: map[string]authenticationv1.UserInfo{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if f.fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(&metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "etcd is down",
		})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authenticationv1.TokenReview
		if err := decodeBody(r, &tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.tokenReviews++
		if u, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		json.NewEncoder(w).Encode(&tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authorizationv1.SubjectAccessReview
		if err := decodeBody(r, &sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.sars = append(f.sars, sar.Spec)
		if f.allow != nil && f.allow(sar.Spec) {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "test allows"}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "test denies"}
		}
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		json.NewEncoder(w).Encode(&sar)
	default:
		http.Error(w, "no such path "+r.URL.Path, http.StatusNotFound)
	}
}

// decodeBody decodes a request as the apiserver does, in whatever
// serialization client-go chose (protobuf by default, or JSON).
func decodeBody(r *http.Request, into runtime.Object) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	info, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(kubeclient.Scheme).SupportedMediaTypes(), mt)
	if !ok {
		return fmt.Errorf("unsupported content type %q", mt)
	}
	_, _, err = info.Serializer.Decode(body, nil, into)
	return err
}

func (f *fakeAPIServer) client() ClientFunc {
	c, err := kubeclient.NewForConfig(&rest.Config{Host: f.srv.URL})
	return func() (Client, error) { return c, err }
}

func (f *fakeAPIServer) counts() (tokenReviews, sars int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenReviews, len(f.sars)
}

func (f *fakeAPIServer) lastSAR() authorizationv1.SubjectAccessReviewSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sars) == 0 {
		return authorizationv1.SubjectAccessReviewSpec{}
	}
	return f.sars[len(f.sars)-1]
}

func (f *fakeAPIServer) set(fn func(f *fakeAPIServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// allowUser allows user everything on nodes.
func allowUser(user string) func(authorizationv1.SubjectAccessReviewSpec) bool {
	return func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.User == user && s.ResourceAttributes != nil && s.ResourceAttributes.Resource == "nodes"
	}
}

// fakePods is a PodLister.
type fakePods struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (f *fakePods) Pods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.pods...)
}

// fakeEngine is an EngineLogReader: each container ID has lines, written
// with their times when Timestamps is asked, and with Follow whatever is
// sent on its follow channel, until ctx ends or the channel closes.
type fakeEngine struct {
	mu      sync.Mutex
	logs    map[string][]fakeLine
	follow  map[string]chan string
	calls   []engine.LogOptions
	callIDs []string
	// returned is sent to when a ContainerLogs call returns, unless it
	// is full (a test that makes many calls does not wait on it).
	returned chan error
}

type fakeLine struct {
	at     time.Time
	stderr bool
	text   string
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{logs: map[string][]fakeLine{}, follow: map[string]chan string{}, returned: make(chan error, 16)}
}

const dockerTime = "2006-01-02T15:04:05.000000000Z07:00"

func (f *fakeEngine) ContainerLogs(ctx context.Context, id string, opts engine.LogOptions, stdout, stderr io.Writer) (err error) {
	defer func() {
		select {
		case f.returned <- err:
		default:
		}
	}()
	f.mu.Lock()
	lines, ok := f.logs[id]
	follow := f.follow[id]
	f.calls = append(f.calls, opts)
	f.callIDs = append(f.callIDs, id)
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("logs %s: %w", id, engine.ErrNotFound)
	}
	if opts.Tail >= 0 && opts.Tail < len(lines) {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, l := range lines {
		w := stdout
		if l.stderr {
			w = stderr
		}
		s := l.text + "\n"
		if opts.Timestamps {
			s = l.at.UTC().Format(dockerTime) + " " + s
		}
		if _, err := io.WriteString(w, s); err != nil {
			return err
		}
	}
	if !opts.Follow || follow == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-follow:
			if !ok {
				return nil
			}
			if opts.Timestamps {
				s = time.Now().UTC().Format(dockerTime) + " " + s
			}
			if _, err := io.WriteString(stdout, s+"\n"); err != nil {
				return err
			}
		}
	}
}

func (f *fakeEngine) lastCall() (string, engine.LogOptions) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return "", engine.LogOptions{}
	}
	return f.callIDs[len(f.callIDs)-1], f.calls[len(f.calls)-1]
}

// testLogger logs to the test's output until the test ends (cleanups
// run last to first: call it before starting what logs).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
