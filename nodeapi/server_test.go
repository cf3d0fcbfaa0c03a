package nodeapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
)

const testNode = "node1"

// t0 is when the fixture's log lines were written, a second apart.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	api   *fakeAPIServer
	ca    *testCA
	pods  *fakePods
	eng   *fakeEngine
	srv   *Server
	base  string
	roots *x509.CertPool
	dir   string
}

func testPods() []*v1.Pod {
	web := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + testNode, Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup", Image: "busybox"}},
			Containers:     []v1.Container{{Name: "app", Image: "busybox"}, {Name: "sidecar", Image: "busybox"}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			InitContainerStatuses: []v1.ContainerStatus{{Name: "setup", ContainerID: "docker://i1",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "docker://i1", Reason: "Completed"}}}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "app", ContainerID: "docker://c2", RestartCount: 1,
					State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
					LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "docker://c1", ExitCode: 1}}},
				{Name: "sidecar", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			},
		},
	}
	dns := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-abc", Namespace: "kube-system", UID: "u2"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "coredns", Image: "coredns"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{
			{Name: "coredns", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}},
	}
	return []*v1.Pod{web, dns}
}

func testEngine() *fakeEngine {
	e := newFakeEngine()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	e.logs["c1"] = []fakeLine{{at(0), false, "first run"}, {at(1), true, "panic: oops"}}
	e.logs["c2"] = []fakeLine{
		{at(10), false, "line 1"}, {at(11), true, "line 2 (stderr)"}, {at(12), false, "line 3"},
		{at(13), false, "line 4"}, {at(14), false, "line 5"},
	}
	e.logs["i1"] = []fakeLine{{at(0), false, "setup done"}}
	return e
}

func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	log := testLogger(t)
	h := &harness{t: t, api: newFakeAPIServer(t), ca: newTestCA(t, "cluster-ca"), eng: testEngine(), dir: t.TempDir()}
	h.pods = &fakePods{pods: testPods()}
	h.api.allow = allowUser("kube-apiserver-kubelet-client")
	caFile := h.ca.writeFile(t, h.dir)
	opts := Options{
		NodeName:      testNode,
		Addr:          "127.0.0.1:0",
		RootDir:       filepath.Join(h.dir, "root"),
		NodeIPs:       []net.IP{net.ParseIP("198.18.0.2")},
		Authenticator: NewAuthenticator(AuthenticatorOptions{ClientCAFile: caFile, Client: h.api.client()}),
		Authorizer:    NewAuthorizer(AuthorizerOptions{Client: h.api.client()}),
		Pods:          h.pods,
		Logs:          EngineLogs{Pods: h.pods, Engine: h.eng},
		Logger:        log,
		Now:           func() time.Time { return t0.Add(20 * time.Second) },
	}
	if mod != nil {
		mod(&opts)
	}
	srv, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.base = "https://" + srv.Addr()
	certPEM, err := os.ReadFile(filepath.Join(opts.RootDir, SelfSignedCertFile))
	if err == nil {
		h.roots = x509.NewCertPool()
		h.roots.AppendCertsFromPEM(certPEM)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return h
}

// client is an HTTP client that trusts the node's self-signed certificate
// and presents cert (sent even when the server does not list its CA) or
// the bearer token.
func (h *harness) client(cert *tls.Certificate, token string) *http.Client {
	cfg := &tls.Config{RootCAs: h.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	h.t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if token != "" {
		rt = bearer{token: token, next: tr}
	}
	return &http.Client{Transport: rt, Timeout: 20 * time.Second}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (h *harness) get(c *http.Client, path string) (int, string) {
	h.t.Helper()
	resp, err := c.Get(h.base + path)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("GET %s: read: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// apiserverClient is the apiserver's kubelet client: a certificate of the
// cluster CA in system:masters.
func (h *harness) apiserverClient() *http.Client {
	cert := h.ca.client(h.t, "kube-apiserver-kubelet-client", "system:masters")
	return h.client(&cert, "")
}

func TestClientCertificateFromTheClusterCAIsAuthorized(t *testing.T) {
	h := newHarness(t, nil)
	code, body := h.get(h.apiserverClient(), "/pods")
	if code != 200 {
		t.Fatalf("GET /pods = %d %q", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || len(list.Items) != 2 || list.Items[0].Name != "web-node1" || list.Items[1].Namespace != "kube-system" {
		t.Fatalf("/pods = %+v", list)
	}
	if list.Items[0].Kind != "Pod" || list.Items[0].Status.ContainerStatuses[0].ContainerID != "docker://c2" {
		t.Errorf("/pods lost the live status: %+v", list.Items[0])
	}
	sar := h.api.lastSAR()
	want := authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "pods", Name: testNode}
	// The groups are the certificate's O, then system:authenticated, which
	// the kubelet adds to every authenticated user
	// (group.NewAuthenticatedGroupAdder in DelegatingAuthenticatorConfig.New).
	if sar.User != "kube-apiserver-kubelet-client" || !slices.Equal(sar.Groups, []string{"system:masters", user.AllAuthenticated}) ||
		sar.ResourceAttributes == nil || *sar.ResourceAttributes != want {
		t.Errorf("SubjectAccessReview = %+v %+v, want user from CN, groups from O and system:authenticated, and %+v", sar, sar.ResourceAttributes, want)
	}
	if _, ok := sar.Extra["authentication.kubernetes.io/credential-id"]; !ok {
		t.Errorf("SubjectAccessReview lost the user's extra: %+v", sar.Extra)
	}
}

func TestClientCertificateFromAnotherCAIsUnauthorized(t *testing.T) {
	h := newHarness(t, nil)
	other := newTestCA(t, "other-ca").client(t, "kube-apiserver-kubelet-client", "system:masters")
	code, body := h.get(h.client(&other, ""), "/pods")
	if code != http.StatusUnauthorized {
		t.Fatalf("GET /pods with a foreign CA's certificate = %d %q, want 401", code, body)
	}
	if _, sars := h.api.counts(); sars != 0 {
		t.Errorf("an unauthenticated request was sent to authorization (%d reviews)", sars)
	}
}

func TestAnonymousIsUnauthorized(t *testing.T) {
	h := newHarness(t, nil)
	c := h.client(nil, "")
	for _, p := range []string{"/pods", "/healthz", "/containerLogs/default/web-node1/app", "/exec/default/web-node1/app", "/nothing"} {
		if code, body := h.get(c, p); code != http.StatusUnauthorized || !strings.Contains(body, "Unauthorized") {
			t.Errorf("anonymous GET %s = %d %q, want 401", p, code, body)
		}
	}
}

func TestBearerTokenIsReviewedOnceAndCached(t *testing.T) {
	h := newHarness(t, nil)
	h.api.set(func(f *fakeAPIServer) {
		f.tokens["good"] = authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:scraper", UID: "sa1", Groups: []string{"system:serviceaccounts"}}
		f.allow = allowUser("system:serviceaccount:monitoring:scraper")
	})
	c := h.client(nil, "good")
	for i := 0; i < 3; i++ {
		if code, body := h.get(c, "/healthz"); code != 200 || body != "ok" {
			t.Fatalf("GET /healthz with a good token = %d %q", code, body)
		}
	}
	trs, sars := h.api.counts()
	if trs != 1 || sars != 1 {
		t.Errorf("3 requests made %d TokenReviews and %d SubjectAccessReviews, want 1 of each (cached)", trs, sars)
	}
	sar := h.api.lastSAR()
	if sar.User != "system:serviceaccount:monitoring:scraper" || sar.UID != "sa1" || sar.ResourceAttributes.Subresource != "healthz" ||
		!slices.Equal(sar.Groups, []string{"system:serviceaccounts", user.AllAuthenticated}) {
		t.Errorf("SubjectAccessReview = %+v %+v", sar, sar.ResourceAttributes)
	}

	bad := h.client(nil, "bad")
	for i := 0; i < 2; i++ {
		if code, _ := h.get(bad, "/pods"); code != http.StatusUnauthorized {
			t.Fatalf("GET /pods with a bad token = %d, want 401", code)
		}
	}
	if trs, _ := h.api.counts(); trs != 2 {
		t.Errorf("a refused token was reviewed %d times in all, want once more (cached)", trs-1)
	}
}

// Without a TokenReview client (the kubelet's authentication.webhook.enabled
// false) a bearer token is not reviewed: 401.
func TestBearerTokenWithoutTokenReviewIsUnauthorized(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		// The harness's CA file, beside the root dir.
		o.Authenticator = NewAuthenticator(AuthenticatorOptions{ClientCAFile: filepath.Join(o.RootDir, "..", "ca-cluster-ca.crt")})
	})
	h.api.set(func(f *fakeAPIServer) {
		f.tokens["good"] = authenticationv1.UserInfo{Username: "kube-apiserver-kubelet-client"}
	})
	if code, body := h.get(h.client(nil, "good"), "/healthz"); code != http.StatusUnauthorized {
		t.Errorf("GET /healthz with a token and no TokenReview = %d %q, want 401", code, body)
	}
	if code, body := h.get(h.apiserverClient(), "/healthz"); code != 200 {
		t.Errorf("GET /healthz with a client certificate = %d %q, want 200", code, body)
	}
	if trs, _ := h.api.counts(); trs != 0 {
		t.Errorf("%d TokenReviews, want none", trs)
	}
}

func TestUnreachableAPIServerIsUnauthorizedForTokensAndErrorForAuthorization(t *testing.T) {
	h := newHarness(t, nil)
	h.api.set(func(f *fakeAPIServer) { f.fail = true })
	if code, _ := h.get(h.client(nil, "good"), "/pods"); code != http.StatusUnauthorized {
		t.Errorf("a token the apiserver could not review = %d, want 401", code)
	}
	code, body := h.get(h.apiserverClient(), "/pods")
	if code != http.StatusInternalServerError || !strings.Contains(body, "Authorization error") {
		t.Errorf("a request the apiserver could not authorize = %d %q, want 500 Authorization error", code, body)
	}
	// Errors are not cached: the apiserver back, the same requests pass.
	h.api.set(func(f *fakeAPIServer) {
		f.fail = false
		f.tokens["good"] = authenticationv1.UserInfo{Username: "kube-apiserver-kubelet-client"}
	})
	if code, body := h.get(h.client(nil, "good"), "/pods"); code != 200 {
		t.Errorf("after the apiserver came back: %d %q", code, body)
	}
}

func TestDeniedIsForbidden(t *testing.T) {
	h := newHarness(t, nil)
	cert := h.ca.client(t, "jane", "developers")
	code, body := h.get(h.client(&cert, ""), "/containerLogs/default/web-node1/app")
	if code != http.StatusForbidden || !strings.Contains(body, "Forbidden") || !strings.Contains(body, "user=jane") {
		t.Fatalf("a denied request = %d %q, want 403 Forbidden naming the user", code, body)
	}
	sar := h.api.lastSAR()
	if sar.ResourceAttributes.Subresource != "proxy" || sar.ResourceAttributes.Verb != "get" || sar.ResourceAttributes.Name != testNode {
		t.Errorf("containerLogs was authorized as %+v, want get nodes/proxy %s", sar.ResourceAttributes, testNode)
	}
	// A denial is remembered (30 s): asked again, the apiserver is not.
	_, before := h.api.counts()
	if code, _ := h.get(h.client(&cert, ""), "/containerLogs/default/web-node1/app"); code != http.StatusForbidden {
		t.Errorf("asked again: %d, want 403", code)
	}
	if _, after := h.api.counts(); after != before {
		t.Errorf("a denial was not cached: %d more reviews", after-before)
	}
	// /pods: nodes/pods first, then nodes/proxy; allowed by the second.
	joe := h.ca.client(t, "joe")
	h.api.set(func(f *fakeAPIServer) {
		f.allow = func(s authorizationv1.SubjectAccessReviewSpec) bool {
			return s.ResourceAttributes.Subresource == "proxy"
		}
	})
	if code, body := h.get(h.client(&joe, ""), "/pods"); code != 200 {
		t.Errorf("/pods allowed as nodes/proxy = %d %q", code, body)
	}
}

// TestRefusalWithAnUnsentBodyIsAnsweredAndClosed: a request the guard
// refuses, whose declared body never comes, gets its answer at once, and
// the server closes its connection, rather than waiting on the body with
// no read deadline, holding the connection and its goroutine for ever.
func TestRefusalWithAnUnsentBodyIsAnsweredAndClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		user    string // a certificate of the cluster CA; "": anonymous
		failAPI bool
		framing string
		code    int
	}{
		{"unauthenticated/content-length", "", false, "Content-Length: 10", http.StatusUnauthorized},
		{"unauthenticated/chunked", "", false, "Transfer-Encoding: chunked", http.StatusUnauthorized},
		{"forbidden", "alice", false, "Content-Length: 10", http.StatusForbidden},
		{"authorization error", "kube-apiserver-kubelet-client", true, "Content-Length: 10", http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.api.set(func(f *fakeAPIServer) { f.fail = tc.failAPI })
			cfg := &tls.Config{RootCAs: h.roots, MinVersion: tls.VersionTLS12} // no ALPN: HTTP/1.1
			if tc.user != "" {
				cfg.Certificates = []tls.Certificate{h.ca.client(t, tc.user)}
			}
			request := fmt.Sprintf("POST /run/default/web-%s/app?cmd=id HTTP/1.1\r\nHost: node\r\n%s\r\n\r\n", testNode, tc.framing)
			expectAnsweredAndClosed(t, h.srv.Addr(), cfg, request, tc.code)
		})
	}
}

// expectAnsweredAndClosed sends request, whose declared body does not all
// come, over a new HTTP/1.1 connection and expects an answer of code that
// closes the connection.
func expectAnsweredAndClosed(t *testing.T, addr string, cfg *tls.Config, request string, code int) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Generous: the answer comes at once; only a broken server makes the
	// test wait this long.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, request)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a request whose body never came: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != code || !resp.Close {
		t.Errorf("request whose body never came = %d %q (Connection: close %v), %v; want %d closing the connection", resp.StatusCode, body, resp.Close, err, code)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the answer: %q, %v; want the server to close the connection (EOF)", rest, err)
	}
}

// TestAuthorizedRequestWithAnUnsentBodyIsAnsweredAndClosed: no route
// reads a request body, so an authorized request that declares one and
// sends only part of it gets its 413 at once, and the server closes its
// connection, rather than draining the body with no read deadline and
// holding the connection and its goroutine for ever.
func TestAuthorizedRequestWithAnUnsentBodyIsAnsweredAndClosed(t *testing.T) {
	h, _ := newExecHarness(t)
	cert := h.ca.client(t, "kube-apiserver-kubelet-client", "system:masters")
	for _, route := range []string{
		"GET /pods", "GET /healthz", "GET /containerLogs/default/web-node1/app",
		"POST /run/default/web-node1/app?cmd=id", "POST /exec/default/web-node1/app?command=id&output=1",
		"GET /attach/default/web-node1/app", "POST /portForward/default/web-node1",
	} {
		for _, framing := range []struct{ name, header, body string }{
			// Up to 256 KiB, net/http drains an unread body to keep the
			// connection; past that it closes the connection instead.
			{"content-length", "Content-Length: 1000", "0123456789"},
			{"large content-length", "Content-Length: 1000000", "0123456789"},
			{"chunked", "Transfer-Encoding: chunked", "a\r\n0123456789\r\n"}, // no last chunk
		} {
			t.Run(route+"/"+framing.name, func(t *testing.T) {
				method, path, _ := strings.Cut(route, " ")
				request := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: node\r\n%s\r\n\r\n%s", method, path, framing.header, framing.body)
				cfg := &tls.Config{RootCAs: h.roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12} // no ALPN: HTTP/1.1
				expectAnsweredAndClosed(t, h.srv.Addr(), cfg, request, http.StatusRequestEntityTooLarge)
			})
		}
	}
	// Over HTTP/2 a body is a stream's, so the connection is not pinned;
	// the answer still comes at once, and the stream ends: the client's
	// transport stops sending the body, which it does only once the
	// server is done with the stream. The body is many times the server's
	// flow-control window (1 MiB for a stream, and for the connection):
	// what the client sends before the answer, unread, fits in the window
	// and proves nothing; the rest goes only if the server reads it.
	t.Run("HTTP/2", func(t *testing.T) {
		const size = 16 << 20
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("GET", h.base+"/pods", pr)
		req.ContentLength = size
		wrote := make(chan error, 1)
		go func() {
			if _, err := pw.Write([]byte("0123456789")); err != nil {
				wrote <- err
				return
			}
			_, err := pw.Write(make([]byte, size-10)) // blocks until the stream ends
			wrote <- err
		}()
		resp, err := h.apiserverClient().Do(req) // its Timeout (20 s) guards
		if err != nil {
			t.Fatalf("no answer to a request whose body never came: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Proto != "HTTP/2.0" {
			t.Errorf("request with a body = %d %q over %s, %v; want 413 over HTTP/2.0", resp.StatusCode, body, resp.Proto, err)
		}
		select {
		case err := <-wrote:
			if err == nil {
				t.Error("the server read the whole body")
			}
		case <-time.After(10 * time.Second):
			t.Error("the stream was not ended: the client still sends its body")
		}
	})
}

// TestPodsShowsAURLSourceWithoutCredentials: /pods goes to whoever the
// apiserver lets read nodes/pods, so a pod's podrun.io/source names its
// URL without the userinfo and query that may carry credentials; the pod
// podrun holds keeps the whole URL, which identifies it.
func TestPodsShowsAURLSourceWithoutCredentials(t *testing.T) {
	const url = "https://deploy:S3CRET@config.example/pods.yaml?sig=x"
	h := newHarness(t, nil)
	h.pods.mu.Lock()
	held := h.pods.pods[0]
	held.Annotations = map[string]string{"podrun.io/source": url}
	h.pods.mu.Unlock()
	code, body := h.get(h.apiserverClient(), "/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("/pods = %d %q, %v", code, body, err)
	}
	if got := list.Items[0].Annotations["podrun.io/source"]; got != "https://config.example/pods.yaml" {
		t.Errorf("/pods shows podrun.io/source %q, want the URL without its credentials", got)
	}
	if held.Annotations["podrun.io/source"] != url {
		t.Errorf("the pod held became %q, want the whole URL", held.Annotations["podrun.io/source"])
	}
}

func TestCAFileWrittenAfterStartIsRead(t *testing.T) {
	missing := ""
	h := newHarness(t, func(o *Options) {
		missing = filepath.Join(filepath.Dir(o.RootDir), "later", "ca.crt")
		o.Authenticator = NewAuthenticator(AuthenticatorOptions{ClientCAFile: missing})
	})
	c := h.apiserverClient()
	if code, _ := h.get(c, "/healthz"); code != http.StatusUnauthorized {
		t.Fatalf("with no CA file yet: %d, want 401", code)
	}
	if err := os.MkdirAll(filepath.Dir(missing), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(missing, h.ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := h.get(c, "/healthz"); code != 200 {
		t.Fatalf("once the CA file is written: %d %q, want 200", code, body)
	}
}

func TestNotImplementedStreams(t *testing.T) {
	h := newHarness(t, nil)
	c := h.apiserverClient()
	for _, p := range []string{"/exec/default/web-node1/app?command=sh", "/attach/default/web-node1/app", "/run/default/web-node1/app", "/portForward/default/web-node1"} {
		resp, err := c.Post(h.base+p, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "not implemented") {
			t.Errorf("POST %s = %d %q, want 501", p, resp.StatusCode, body)
		}
	}
	if sar := h.api.lastSAR(); sar.ResourceAttributes.Verb != "create" || sar.ResourceAttributes.Subresource != "proxy" {
		t.Errorf("exec was authorized as %+v, want create nodes/proxy", sar.ResourceAttributes)
	}
}

// HEAD is not GET: the kubelet's routes are GET (or POST) only, so HEAD
// is 405 with the path's methods in Allow, authorized with the verb ""
// and no log is read (net/http's "GET /path" pattern would match HEAD).
// Only /healthz, a plain handler in the kubelet, answers HEAD.
func TestHeadIsNotAllowedButOnHealthz(t *testing.T) {
	h := newHarness(t, nil)
	c := h.apiserverClient()
	for _, tc := range []struct {
		path  string
		code  int
		allow string
	}{
		{"/containerLogs/default/web-node1/app", 405, "GET"},
		{"/pods", 405, "GET"},
		{"/exec/default/web-node1/app", 405, "GET, POST"},
		{"/run/default/web-node1/app", 405, "POST"},
		{"/attach/default/web-node1/app", 405, "GET, POST"},
		{"/healthz", 200, ""},
		{"/nothing", 404, ""},
	} {
		resp, err := c.Head(h.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("HEAD %s = %d Allow %q, want %d Allow %q", tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
		if sar := h.api.lastSAR(); sar.ResourceAttributes == nil || sar.ResourceAttributes.Verb != "" {
			t.Errorf("HEAD %s was authorized as %+v, want the verb \"\"", tc.path, sar.ResourceAttributes)
		}
	}
	if id, _ := h.eng.lastCall(); id != "" {
		t.Errorf("a HEAD read the log of %q", id)
	}
	// Another method is answered the same way, HEAD not among those allowed.
	req, _ := http.NewRequest(http.MethodPut, h.base+"/containerLogs/default/web-node1/app", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Errorf("PUT /containerLogs = %d Allow %q, want 405 Allow \"GET\"", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestHealthz(t *testing.T) {
	var sick error
	h := newHarness(t, func(o *Options) { o.Healthy = func() error { return sick } })
	c := h.apiserverClient()
	if code, body := h.get(c, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	sick = errors.New("sync loop stuck")
	if code, body := h.get(c, "/healthz"); code != 500 || !strings.Contains(body, "sync loop stuck") {
		t.Errorf("/healthz when sick = %d %q", code, body)
	}
}

func TestContainerLogs(t *testing.T) {
	h := newHarness(t, nil)
	c := h.apiserverClient()
	for _, tc := range []struct {
		name, path string
		code       int
		want       string // the body, or a part of it for an error
		engineID   string // the ID the engine was asked for
	}{
		{"current run", "/containerLogs/default/web-node1/app", 200, "line 1\nline 2 (stderr)\nline 3\nline 4\nline 5\n", "c2"},
		{"tail", "/containerLogs/default/web-node1/app?tailLines=2", 200, "line 4\nline 5\n", "c2"},
		{"old tail parameter", "/containerLogs/default/web-node1/app?tail=1", 200, "line 5\n", "c2"},
		{"tail all", "/containerLogs/default/web-node1/app?tail=all", 200, "line 1\nline 2 (stderr)\nline 3\nline 4\nline 5\n", "c2"},
		{"tail 0", "/containerLogs/default/web-node1/app?tailLines=0", 200, "", "c2"},
		{"previous", "/containerLogs/default/web-node1/app?previous=true", 200, "first run\npanic: oops\n", "c1"},
		{"timestamps", "/containerLogs/default/web-node1/app?timestamps=1&tailLines=1", 200, "2030-01-02T03:04:14.000000000Z line 5\n", "c2"},
		// Now is t0+20s: the last 7 s are lines 4 and 5 (t0+13s, +14s).
		{"sinceSeconds", "/containerLogs/default/web-node1/app?sinceSeconds=7", 200, "line 4\nline 5\n", "c2"},
		{"sinceTime", "/containerLogs/default/web-node1/app?sinceTime=2030-01-02T03:04:12Z&timestamps=true", 200,
			"2030-01-02T03:04:12.000000000Z line 3\n2030-01-02T03:04:13.000000000Z line 4\n2030-01-02T03:04:14.000000000Z line 5\n", "c2"},
		{"limitBytes", "/containerLogs/default/web-node1/app?limitBytes=10", 200, "line 1\nlin", "c2"},
		{"init container", "/containerLogs/default/web-node1/setup", 200, "setup done\n", "i1"},
		// stream as the kubelet with PodLogsQuerySplitStreams on.
		{"stdout", "/containerLogs/default/web-node1/app?stream=Stdout", 200, "line 1\nline 3\nline 4\nline 5\n", "c2"},
		{"stderr", "/containerLogs/default/web-node1/app?stream=Stderr", 200, "line 2 (stderr)\n", "c2"},
		{"stderr since", "/containerLogs/default/web-node1/app?stream=Stderr&sinceSeconds=9", 200, "line 2 (stderr)\n", "c2"},
		{"stdout since", "/containerLogs/default/web-node1/app?stream=Stdout&sinceSeconds=9", 200, "line 3\nline 4\nline 5\n", "c2"},
		{"all streams", "/containerLogs/default/web-node1/app?stream=All&tailLines=2", 200, "line 4\nline 5\n", "c2"},
		{"unknown stream", "/containerLogs/default/web-node1/app?stream=Bogus", 422, "stream", ""},
		{"stream and tail", "/containerLogs/default/web-node1/app?stream=Stderr&tailLines=1", 422, "mutually exclusive", ""},
		{"unknown pod", "/containerLogs/default/nope/app", 404, `pod "nope" does not exist`, ""},
		{"pod in another namespace", "/containerLogs/kube-system/web-node1/app", 404, "does not exist", ""},
		{"unknown container", "/containerLogs/default/web-node1/nope", 404, `container "nope" not found in pod "web-node1"`, ""},
		{"waiting container", "/containerLogs/default/web-node1/sidecar", 400, "is waiting to start: ContainerCreating", ""},
		{"image not pulled", "/containerLogs/kube-system/coredns-abc/coredns", 400, "waiting to start: image can't be pulled", ""},
		{"no previous run", "/containerLogs/default/web-node1/setup?previous=true", 400, "previous terminated container", ""},
		{"bad tail", "/containerLogs/default/web-node1/app?tailLines=x", 400, "not an integer", ""},
		{"empty tail", "/containerLogs/default/web-node1/app?tailLines=", 400, "not an integer", ""},
		{"null sinceTime", "/containerLogs/default/web-node1/app?sinceTime=null", 200, "line 1\nline 2 (stderr)\nline 3\nline 4\nline 5\n", "c2"},
		{"negative tail", "/containerLogs/default/web-node1/app?tailLines=-1", 422, "tailLines", ""},
		{"two sinces", "/containerLogs/default/web-node1/app?sinceSeconds=1&sinceTime=2030-01-02T03:04:12Z", 422, "at most one", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Get(h.base + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("GET %s = %d %q, want %d", tc.path, resp.StatusCode, body, tc.code)
			}
			if tc.code == 200 {
				if string(body) != tc.want {
					t.Errorf("GET %s = %q, want %q", tc.path, body, tc.want)
				}
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("Content-Type %q", ct)
				}
			} else if !strings.Contains(string(body), tc.want) {
				t.Errorf("GET %s = %q, want it to say %q", tc.path, body, tc.want)
			}
			if tc.engineID != "" {
				if id, _ := h.eng.lastCall(); id != tc.engineID {
					t.Errorf("the engine was asked for %q, want %q", id, tc.engineID)
				}
			}
		})
	}
}

func TestContainerLogsFollowStreamsUntilTheClientGoes(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) { testFollow(t, proto) })
	}
}

func testFollow(t *testing.T, proto string) {
	h := newHarness(t, nil)
	follow := make(chan string)
	h.eng.mu.Lock()
	h.eng.follow["c2"] = follow
	h.eng.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/containerLogs/default/web-node1/app?follow=true&tailLines=1", nil)
	c := h.apiserverClient()
	if proto == "HTTP/1.1" {
		c.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
		c.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != proto {
		t.Fatalf("follow = %d over %s, want 200 over %s", resp.StatusCode, resp.Proto, proto)
	}
	r := bufio.NewReader(resp.Body)
	readLine := func() string {
		t.Helper()
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read a followed line: %v", err)
		}
		return line
	}
	if got := readLine(); got != "line 5\n" {
		t.Fatalf("first line %q", got)
	}
	// Each line reaches the client as it is written (flushed), not when
	// the stream ends.
	for _, s := range []string{"line 6", "line 7"} {
		select {
		case follow <- s:
		case <-time.After(10 * time.Second):
			t.Fatal("the engine's follow was not reading")
		}
		if got := readLine(); got != s+"\n" {
			t.Fatalf("followed %q, want %q", got, s)
		}
	}
	if _, opts := h.eng.lastCall(); !opts.Follow || opts.Tail != 1 {
		t.Errorf("engine options %+v", opts)
	}
	// The client goes: the engine's read ends.
	cancel()
	select {
	case <-h.eng.returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine's follow did not end when the client went away")
	}
}

// A followed log whose container writes nothing yet has its 200 and
// headers at once: EngineLogs writes zero bytes once it has found the
// run, as the kubelet's GetKubeletContainerLogs does through its flush
// writer, and the server sends the status with that write.
func TestContainerLogsFollowSendsHeadersAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.mu.Lock()
	h.eng.follow["c2"] = make(chan string)
	h.eng.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/containerLogs/default/web-node1/app?follow=true&tailLines=0", nil)
	resp, err := h.apiserverClient().Do(req)
	if err != nil {
		t.Fatalf("no response headers for a silent followed log (the kubelet sends them at once): %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("silent follow = %d %q, want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// Once the run is found the 200 is sent, so an error of the engine after
// it ends the body, as the kubelet's response.WriteError does after its
// zero-byte write.
func TestContainerLogsEngineErrorEndsTheBody(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.mu.Lock()
	delete(h.eng.logs, "c2")
	h.eng.mu.Unlock()
	code, body := h.get(h.apiserverClient(), "/containerLogs/default/web-node1/app")
	if code != 200 || !strings.Contains(body, `the log of container "app" in pod "web-node1" is gone`) {
		t.Errorf("a removed container's log = %d %q, want 200 and the error", code, body)
	}
}

func TestContainerLogsLimitBytesEndsAFollow(t *testing.T) {
	h := newHarness(t, nil)
	follow := make(chan string)
	h.eng.mu.Lock()
	h.eng.follow["c2"] = follow
	h.eng.mu.Unlock()
	resp, err := h.apiserverClient().Get(h.base + "/containerLogs/default/web-node1/app?follow=true&tailLines=1&limitBytes=10")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		select {
		case follow <- "line 6":
		case <-time.After(10 * time.Second):
		}
	}()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "line 5\nlin" {
		t.Errorf("follow with limitBytes=10: %q %v, want the first 10 bytes and the end", body, err)
	}
	select {
	case <-h.eng.returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine's follow did not end at limitBytes")
	}
}

func TestServeStopsFollowedLogs(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.mu.Lock()
	h.eng.follow["c2"] = make(chan string)
	h.eng.mu.Unlock()
	resp, err := h.apiserverClient().Get(h.base + "/containerLogs/default/web-node1/app?follow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.eng.returned:
	case <-time.After(10 * time.Second):
		t.Fatal("a followed log outlived the server")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %v", d)
	}
}

func TestServeShutsDownWithAFollowInFlight(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.mu.Lock()
	h.eng.follow["c2"] = make(chan string)
	h.eng.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A second server on the same handler, whose Serve this test ends.
	srv, err := Listen(Options{
		NodeName: testNode, Addr: "127.0.0.1:0", RootDir: filepath.Join(h.dir, "root"),
		NodeIPs:       []net.IP{net.ParseIP("198.18.0.2")},
		Authenticator: NewAuthenticator(AuthenticatorOptions{ClientCAFile: filepath.Join(h.dir, "ca-cluster-ca.crt")}),
		Authorizer:    AlwaysAllow, Pods: h.pods, Logs: EngineLogs{Pods: h.pods, Engine: h.eng},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	resp, err := h.apiserverClient().Get("https://" + srv.Addr() + "/containerLogs/default/web-node1/app?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("Serve did not return with a followed log in flight")
	}
}

func TestSelfSignedCertificateIsKeptAndNamesTheNode(t *testing.T) {
	h := newHarness(t, nil)
	root := filepath.Join(h.dir, "root")
	first, err := os.ReadFile(filepath.Join(root, SelfSignedCertFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, SelfSignedKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi.Mode(), err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(root, SelfSignedCertFile), filepath.Join(root, SelfSignedKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{testNode, "localhost", "127.0.0.1", "198.18.0.2"} {
		if err := cert.Leaf.VerifyHostname(name); err != nil {
			t.Errorf("the serving certificate does not name %s: %v", name, err)
		}
	}
	// The client verified the server against this certificate over TLS 1.2+.
	resp, err := h.apiserverClient().Get(h.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("TLS %+v", resp.TLS)
	}

	again := func(node string, ips ...net.IP) []byte {
		t.Helper()
		s, err := Listen(Options{NodeName: node, Addr: "127.0.0.1:0", RootDir: root, NodeIPs: ips,
			Authenticator: NewAuthenticator(AuthenticatorOptions{}), Authorizer: AlwaysAllow, Pods: h.pods, Logs: EngineLogs{}})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		b, err := os.ReadFile(filepath.Join(root, SelfSignedCertFile))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if string(again(testNode, net.ParseIP("198.18.0.2"))) != string(first) {
		t.Error("a restart made a new certificate although the old one fits")
	}
	if string(again("node2", net.ParseIP("198.18.0.2"))) == string(first) {
		t.Error("a new node name kept a certificate that does not name it")
	}
}

func TestServingCertificateFromFiles(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := makeSelfSigned("given", []string{"given.example"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, certPEM, 0o644)
	os.WriteFile(keyFile, keyPEM, 0o600)
	h := newHarness(t, func(o *Options) {
		o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
		o.RootDir = filepath.Join(dir, "root")
	})
	if _, err := os.Stat(filepath.Join(dir, "root", SelfSignedCertFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a self-signed certificate was made although one was given: %v", err)
	}
	h.roots = x509.NewCertPool()
	h.roots.AppendCertsFromPEM(certPEM)
	if code, _ := h.get(h.apiserverClient(), "/healthz"); code != 200 {
		t.Errorf("/healthz over the given certificate = %d", code)
	}

	if _, err := Listen(Options{NodeName: testNode, Addr: "127.0.0.1:0", TLSCertFile: certFile,
		Authenticator: NewAuthenticator(AuthenticatorOptions{}), Authorizer: AlwaysAllow, Pods: h.pods, Logs: EngineLogs{}}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}

func TestListenRefusesIncompleteOptions(t *testing.T) {
	pods := &fakePods{}
	ok := Options{NodeName: testNode, Addr: "127.0.0.1:0", RootDir: t.TempDir(),
		Authenticator: NewAuthenticator(AuthenticatorOptions{}), Authorizer: AlwaysAllow, Pods: pods, Logs: EngineLogs{Pods: pods}}
	for name, mod := range map[string]func(*Options){
		"no node":          func(o *Options) { o.NodeName = "" },
		"no authenticator": func(o *Options) { o.Authenticator = nil },
		"no authorizer":    func(o *Options) { o.Authorizer = nil },
		"no pods":          func(o *Options) { o.Pods = nil },
		"no logs":          func(o *Options) { o.Logs = nil },
	} {
		o := ok
		mod(&o)
		if s, err := Listen(o); err == nil {
			s.Close()
			t.Errorf("%s: Listen accepted it", name)
		}
	}
	s, err := Listen(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	taken := ok
	taken.Addr = s.Addr()
	if s2, err := Listen(taken); err == nil {
		s2.Close()
		t.Error("a port already taken was not an error at Listen")
	}
}
