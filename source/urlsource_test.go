package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podrun/podrun/manifest"
)

// shortTimeout is the client timeout of the timeout faults. Their handlers
// block or drip until the request is given up, so any timeout is exceeded;
// it is short only to keep the tests fast. The other tests use the default.
const shortTimeout = 300 * time.Millisecond

// switchable is an httptest handler the test can swap while a source polls.
type switchable struct {
	mu sync.Mutex
	h  http.HandlerFunc
}

func (s *switchable) set(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = h
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h(w, r)
}

func serve(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }
}

// The faults a manifest server can have; each must be an error that keeps
// the last good snapshot.
var urlFaults = []struct {
	name    string
	handler http.HandlerFunc
	want    string
	short   bool // a timeout fault: use shortTimeout
}{
	{"500", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}, "the server answered 500 Internal Server Error", false},
	{"404", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}, "404 Not Found", false},
	{"timeout", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}, "Client.Timeout exceeded", true},
	{"slow body", func(w http.ResponseWriter, r *http.Request) {
		// Headers and a first line at once, then a byte at a time, forever.
		fmt.Fprint(w, "apiVersion: v1\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				fmt.Fprint(w, " ")
				w.(http.Flusher).Flush()
			}
		}
	}, "read body", true},
	{"over the limit, chunked", func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("# padding\n", 1<<16) // 640 KiB
		for range (manifest.MaxFileSize / len(chunk)) + 1 {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	}, "over the 10 MiB limit", false},
	{"over the limit, Content-Length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(manifest.MaxFileSize+1))
		// No body: the client must not wait for it.
	}, "over the 10 MiB limit", false},
	{"empty body", serve(""), "the body is empty", false},
	{"only comments and blanks", serve("\n  \n# nothing here\n---\n# nor here\n"), "the body is empty", false},
	{"null document", serve("---\nnull\n"), "the body is empty", false},
	{"204", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}, "204 No Content", false},
	{"invalid", serve("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    imagee: x\n"),
		":8: spec.containers[0].imagee: unknown field", false},
	// A close-delimited body ends where the connection does, so a cut
	// cannot be told from the end: every such body is refused, whole too.
	{"close-delimited, cut at a document boundary", closing(cutTwoPods), "neither Content-Length nor chunked encoding", false},
	{"close-delimited, cut inside a pod", closing(podNamed("web")), // its second container cut off
		"neither Content-Length nor chunked encoding", false},
	{"close-delimited, whole", closing(twoPods), "neither Content-Length nor chunked encoding", false},
	// The framed bodies a cut makes an error of.
	{"Content-Length, cut", closing(cutTwoPods, fmt.Sprintf("Content-Length: %d", len(twoPods))), "unexpected EOF", false},
	{"chunked, cut", closing(chunk(cutTwoPods), "Transfer-Encoding: chunked"), "unexpected EOF", false},
	{"gzip, close-delimited, cut midway", closing(gzipTwoPods[:len(gzipTwoPods)/2], "Content-Encoding: gzip"),
		"unexpected EOF", false},
	// Every byte of the manifest is there; only the CRC and size are not.
	{"gzip, close-delimited, cut before its trailer", closing(gzipTwoPods[:len(gzipTwoPods)-8], "Content-Encoding: gzip"),
		"unexpected EOF", false},
}

// twoPods is a manifest of two documents; cutTwoPods is what a connection
// dropped at their boundary leaves of it, itself a valid manifest.
var (
	twoPods    = podNamed("a") + "---\n" + podNamed("b")
	cutTwoPods = podNamed("a") + "---\n"

	gzipTwoPods = gzipped(twoPods)
)

// closing answers 200 with head (header lines) and body as given, byte for
// byte, then closes the connection: framings, whole or cut short, that
// net/http's server would not write.
func closing(body string, head ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, "hijack: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nConnection: close\r\n")
		for _, h := range head {
			fmt.Fprintf(buf, "%s\r\n", h)
		}
		fmt.Fprintf(buf, "\r\n%s", body)
		buf.Flush()
	}
}

// chunk is s as one chunk of a chunked body, without the last chunk that
// ends the body.
func chunk(s string) string {
	return fmt.Sprintf("%x\r\n%s\r\n", len(s), s)
}

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

func testClient(t *testing.T, short bool) *http.Client {
	t.Helper()
	client, err := NewHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	if short {
		client.Timeout = shortTimeout
	}
	return client
}

// TestFetchURLFaults: every fault is an error, which names the URL
// without its userinfo and query (credentials).
func TestFetchURLFaults(t *testing.T) {
	for _, fault := range urlFaults {
		t.Run(fault.name, func(t *testing.T) {
			srv := httptest.NewServer(fault.handler)
			defer srv.Close()
			url := "http://deploy:S3CRET@" + strings.TrimPrefix(srv.URL, "http://") + "/pods.yaml?sig=x"
			snap, err := FetchURL(context.Background(), testClient(t, fault.short), url, nil, testOptions())
			if err == nil || !strings.Contains(err.Error(), fault.want) {
				t.Fatalf("FetchURL error = %v, want %q", err, fault.want)
			}
			if msg := err.Error(); strings.Contains(msg, "S3CRET") || strings.Contains(msg, "sig=x") || strings.Contains(msg, "deploy") {
				t.Errorf("FetchURL error %q shows the URL's credentials", msg)
			}
			if snap != nil && !snap.Empty() {
				t.Errorf("FetchURL returned pods with an error")
			}
		})
	}
}

func TestFetchURLGood(t *testing.T) {
	srv := httptest.NewServer(serve(podNamed("a") + "---\n" + podNamed("b")))
	defer srv.Close()
	snap, err := FetchURL(context.Background(), testClient(t, false), srv.URL+"/pods.yaml", nil, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(podNames(snap), ","); got != "a-node1,b-node1" {
		t.Errorf("pods = %s", got)
	}
	if src := snap.Pods[0].Annotations[manifest.AnnotationSource]; src != srv.URL+"/pods.yaml" {
		t.Errorf("podrun.io/source = %q", src)
	}
	if kind := snap.Pods[0].Annotations[manifest.AnnotationConfigSource]; kind != manifest.ConfigSourceHTTP {
		t.Errorf("config.source = %q", kind)
	}

	// An explicitly empty List is a good answer with no pods.
	srv2 := httptest.NewServer(serve("apiVersion: v1\nkind: List\nitems: []\n"))
	defer srv2.Close()
	snap, err = FetchURL(context.Background(), testClient(t, false), srv2.URL, nil, testOptions())
	if err != nil || !snap.Empty() {
		t.Errorf("empty List: %v, %v", snap, err)
	}
}

// TestFetchURLFramedBodies: a body whose end the client can tell from a
// dropped connection is taken, whatever tells it.
func TestFetchURLFramedBodies(t *testing.T) {
	for name, handler := range map[string]http.HandlerFunc{
		"Content-Length": closing(twoPods, fmt.Sprintf("Content-Length: %d", len(twoPods))),
		"chunked":        closing(chunk(twoPods)+"0\r\n\r\n", "Transfer-Encoding: chunked"),
		// The transport decompresses it; a cut gzip stream fails (urlFaults).
		"gzip, close-delimited": closing(gzipped(twoPods), "Content-Encoding: gzip"),
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(handler)
			defer srv.Close()
			fetchesTwoPods(t, testClient(t, false), srv.URL)
		})
	}

	t.Run("HTTP/2", func(t *testing.T) {
		// HTTP/2 frames the end of a stream: neither Content-Length nor
		// chunked encoding is needed there.
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				http.Error(w, "want HTTP/2, got "+r.Proto, http.StatusHTTPVersionNotSupported)
				return
			}
			fmt.Fprint(w, cutTwoPods)
			w.(http.Flusher).Flush() // sent before its length is known
			fmt.Fprint(w, strings.TrimPrefix(twoPods, cutTwoPods))
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		defer srv.Close()
		fetchesTwoPods(t, trustingClient(t, srv), srv.URL)
	})
}

// fetchesTwoPods fails unless url, fetched with client, is twoPods.
func fetchesTwoPods(t *testing.T, client *http.Client, url string) {
	t.Helper()
	snap, err := FetchURL(context.Background(), client, url, nil, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(podNames(snap), ","); got != "a-node1,b-node1" {
		t.Errorf("pods = %s", got)
	}
}

// TestFetchURLRefusesRedirectOutOfTLS: a redirect from https to http would
// send the request, and the credentials in its headers, in clear text.
func TestFetchURLRefusesRedirectOutOfTLS(t *testing.T) {
	reached := make(chan *http.Request, 1)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r
		fmt.Fprint(w, podNamed("web"))
	}))
	defer plain.Close()
	// A presigned URL's signature stays out of the error.
	secure := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/pods.yaml?X-Amz-Signature=SIG", http.StatusFound))
	defer secure.Close()
	header, err := ParseHeaders([]string{"Authorization: Bearer s3cret"})
	if err != nil {
		t.Fatal(err)
	}

	_, err = FetchURL(context.Background(), trustingClient(t, secure), secure.URL+"/pods.yaml?sig=x", header, testOptions())
	if want := "redirect from " + secure.URL + "/pods.yaml to " + plain.URL + "/pods.yaml:"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("FetchURL error = %v, want %q", err, want)
	}
	if err != nil && (strings.Contains(err.Error(), "SIG") || strings.Contains(err.Error(), "sig=x")) {
		t.Errorf("FetchURL error %q shows the URLs' queries", err)
	}
	select {
	case r := <-reached:
		t.Errorf("the request went to http, Authorization %q", r.Header.Get("Authorization"))
	default:
	}
}

// TestFetchURLRedirectHeaders: the configured headers, and Authorization
// and Cookie, follow a redirect on their host and port, and no further.
func TestFetchURLRedirectHeaders(t *testing.T) {
	header, err := ParseHeaders([]string{"Authorization: Bearer s3cret", "X-Auth-Token: t0ken", "Cookie: session=c00kie"})
	if err != nil {
		t.Fatal(err)
	}
	// Two servers on 127.0.0.1: the same name, another port.
	mux := http.NewServeMux()
	origin, other := httptest.NewUnstartedServer(mux), httptest.NewUnstartedServer(mux)
	originURL, otherURL := "http://"+origin.Listener.Addr().String(), "http://"+other.Listener.Addr().String()
	seen := make(chan http.Header, 1)
	mux.HandleFunc("/pods.yaml", func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		fmt.Fprint(w, podNamed("web"))
	})
	redirect := func(path, to string) {
		mux.Handle(path, http.RedirectHandler(to, http.StatusFound))
	}
	redirect("/to-origin", originURL+"/pods.yaml")
	redirect("/to-other", otherURL+"/pods.yaml")
	redirect("/via-other", otherURL+"/to-origin")
	redirect("/loop", "/loop")
	origin.Start()
	defer origin.Close()
	other.Start()
	defer other.Close()

	for _, tc := range []struct {
		path string
		sent bool
	}{
		{"/to-origin", true},
		{"/to-other", false},
		// Back on the first host, but by another's choice.
		{"/via-other", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if _, err := FetchURL(context.Background(), testClient(t, false), originURL+tc.path, header, testOptions()); err != nil {
				t.Fatal(err)
			}
			got := <-seen
			for _, key := range []string{"Authorization", "X-Auth-Token", "Cookie"} {
				if sent := got.Get(key) != ""; sent != tc.sent {
					t.Errorf("%s sent = %v, want %v", key, sent, tc.sent)
				}
			}
			if got.Get("User-Agent") != "podrun" {
				t.Errorf("User-Agent = %q", got.Get("User-Agent"))
			}
		})
	}

	// Go's limit on redirects holds.
	_, err = FetchURL(context.Background(), testClient(t, false), originURL+"/loop", header, testOptions())
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("a redirect loop: %v", err)
	}
}

// TestFetchURLRedirectElsewhereSendsNoReferer: Go's client sends the
// previous URL as Referer on a redirect, query included (it drops only the
// userinfo), so a presigned manifest URL (?X-Amz-Signature=...) would reach
// whichever host a redirect pointed to, credentials the configured headers
// are kept from.
func TestFetchURLRedirectElsewhereSendsNoReferer(t *testing.T) {
	mux := http.NewServeMux()
	origin, other := httptest.NewUnstartedServer(mux), httptest.NewUnstartedServer(mux)
	otherURL := "http://" + other.Listener.Addr().String()
	seen := make(chan http.Header, 1)
	mux.HandleFunc("/pods.yaml", func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		fmt.Fprint(w, podNamed("web"))
	})
	mux.Handle("/presigned", http.RedirectHandler(otherURL+"/pods.yaml", http.StatusFound))
	origin.Start()
	defer origin.Close()
	other.Start()
	defer other.Close()

	url := "http://deploy:pw@" + origin.Listener.Addr().String() + "/presigned?X-Amz-Signature=S3CRET"
	if _, err := FetchURL(context.Background(), testClient(t, false), url, nil, testOptions()); err != nil {
		t.Fatal(err)
	}
	if got := (<-seen).Get("Referer"); strings.Contains(got, "S3CRET") || strings.Contains(got, "pw") {
		t.Errorf("the other host was sent Referer %q, the manifest URL's credentials", got)
	}
}

// urlSource polls srv every few milliseconds.
func urlSource(t *testing.T, url string) *URLSource {
	logger, _ := testLogger(t)
	return &URLSource{URL: url, Client: testClient(t, false), Interval: 5 * time.Millisecond, Options: testOptions(), Logger: logger}
}

func TestURLSourceKeepsLastGoodOnEveryFault(t *testing.T) {
	for _, fault := range urlFaults {
		t.Run(fault.name, func(t *testing.T) {
			h := &switchable{h: serve(podImage("web", "nginx:1"))}
			srv := httptest.NewServer(h)
			defer srv.Close()
			s := urlSource(t, srv.URL)
			s.Client = testClient(t, fault.short)
			out := startSource(t, s.Run)
			// On a slow machine a first fetch may time out: the next poll
			// retries, so wait for the good one.
			good := waitFor(t, out, "the good content", and(pods("web"), noErr))

			h.set(fault.handler)
			kept := func(t *testing.T, u Update) {
				t.Helper()
				if u.Snapshot != good.Snapshot || len(u.Failing) != 0 {
					t.Errorf("a fault changed what runs or marked a URL good once as Failing:\n%s", describeUpdate(u))
				}
			}
			waitFor(t, out, "the fault reported", errContains(fault.want), kept)

			h.set(serve(podImage("web", "nginx:2")))
			u := waitFor(t, out, "the recovery", and(noErr, pods("web")), keptOrNew(good))
			if podHashes(u)["web-node1"] == podHashes(good)["web-node1"] {
				t.Errorf("the new content was not taken")
			}
		})
	}
}

// keptOrNew accepts updates that keep good or bring new good content.
func keptOrNew(good Update) func(*testing.T, Update) {
	return func(t *testing.T, u Update) {
		t.Helper()
		if u.Snapshot == nil || (u.Err != nil && u.Snapshot != good.Snapshot) {
			t.Errorf("update:\n%s", describeUpdate(u))
		}
	}
}

func TestURLSourceFirstFetchFailsIsNotReady(t *testing.T) {
	h := &switchable{h: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusBadGateway) }}
	srv := httptest.NewServer(h)
	defer srv.Close()
	out := startSource(t, urlSource(t, srv.URL).Run)

	u := waitFor(t, out, "the first fetch", func(Update) bool { return true })
	if u.Snapshot != nil || !errContains("502 Bad Gateway")(u) || !slices.Equal(u.Failing, []string{srv.URL}) {
		t.Fatalf("a URL failing from the start: no snapshot, the error, and Failing:\n%s", describeUpdate(u))
	}
	h.set(serve(podNamed("web")))
	u = waitFor(t, out, "the recovery", and(pods("web"), noErr))
	if len(u.Failing) != 0 {
		t.Errorf("Failing = %v", u.Failing)
	}
}

func TestURLSourceEmptyListRemovesPods(t *testing.T) {
	h := &switchable{h: serve(podNamed("web"))}
	srv := httptest.NewServer(h)
	defer srv.Close()
	out := startSource(t, urlSource(t, srv.URL).Run)
	waitFor(t, out, "the pod", and(pods("web"), noErr))
	h.set(serve("# all pods moved away\napiVersion: v1\nkind: List\nitems: []\n"))
	u := waitFor(t, out, "no pods", and(pods(), noErr))
	if u.Snapshot == nil || !u.Snapshot.Empty() {
		t.Errorf("update:\n%s", describeUpdate(u))
	}
}

// TestURLSourceWarnsOfATypoThatChangesNothing: as the file source, a new
// body whose one change is a misspelt field (dropped) changes no pod, and
// its warning is logged, once.
func TestURLSourceWarnsOfATypoThatChangesNothing(t *testing.T) {
	h := &switchable{h: serve(podNamed("web"))}
	srv := httptest.NewServer(h)
	defer srv.Close()
	logger, logs := testLogger(t)
	p := newProbe()
	s := &URLSource{URL: srv.URL, Client: testClient(t, false), Interval: 5 * time.Millisecond, Options: testOptions(),
		Logger: logger, hooks: p.hooks(false)}
	out := startSource(t, s.Run)
	waitFor(t, out, "the pod", and(pods("web"), noErr))
	h.set(serve(podNamed("web") + "  restartPolicyy: Never\n"))
	p.waitScans(t, 5)
	if n := countLines(logs.String(), `level=WARN msg="manifest warning"`, "restartPolicyy"); n != 1 {
		t.Errorf("the misspelt field was warned of %d times, want once:\n%s", n, logs.String())
	}
}

// TestURLSourceHandsOnWarningsThatAloneChanged: as the file source, a
// body whose one change is a misspelt field removed changes no pod but
// the pod's warnings, shown from the Mux: an update must carry them.
func TestURLSourceHandsOnWarningsThatAloneChanged(t *testing.T) {
	const bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: img:1\n    colour: blue\n"
	h := &switchable{h: serve(bad)}
	srv := httptest.NewServer(h)
	defer srv.Close()
	p := newProbe()
	s := urlSource(t, srv.URL)
	s.hooks = p.hooks(false)
	out := startSource(t, s.Run)
	mux := NewMux([]Named{{Name: srv.URL, Source: newFakeSource()}}, nil)
	mux.update(waitFor(t, out, "the first fetch", pods("web")))
	if w := mux.AnnotateWarnings(mux.Pods())[0].Annotations[AnnotationManifestWarnings]; !strings.Contains(w, "colour") {
		t.Fatalf("first: warnings %q, want the colour one", w)
	}
	h.set(serve(strings.Replace(bad, "    colour: blue\n", "", 1)))
	p.waitScans(t, 1) // a poll that may have begun before the change
	if changed := p.waitScans(t, 10); !slices.Contains(changed, true) {
		t.Fatalf("10 polls after the fix, none sent an update (changed = %v)", changed)
	}
	mux.update(<-out)
	if w := mux.AnnotateWarnings(mux.Pods())[0].Annotations[AnnotationManifestWarnings]; w != "" {
		t.Errorf("after the fix, the pod still carries the warning %q", w)
	}
}

// TestURLSourceSeesAChangeWithinTheSameSecond: a manifest changed twice
// within one second (a tool writing it in two steps) is served the second
// time with the same Last-Modified (one-second resolution) and, from
// nginx, the same ETag (the mtime's seconds and the size). A conditional
// GET would be answered 304 and never see the second version; the kubelet
// (http.go, extractFromURL) sends no conditional header and compares the
// bodies, and so must podrun.
func TestURLSourceSeesAChangeWithinTheSameSecond(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var (
		mu          sync.Mutex
		body        = podImage("web", "nginx:1")
		modtime     = base.Add(100 * time.Millisecond)
		conditional atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-Modified-Since") != "" || r.Header.Get("If-None-Match") != "" {
			conditional.Add(1)
		}
		mu.Lock()
		b, m := body, modtime
		mu.Unlock()
		// As nginx: ETag "mtime-size", in hex, the mtime in seconds.
		w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, m.Unix(), len(b)))
		http.ServeContent(w, r, "pods.yaml", m, strings.NewReader(b))
	}))
	defer srv.Close()
	p := newProbe()
	s := urlSource(t, srv.URL)
	s.hooks = p.hooks(false)
	out := startSource(t, s.Run)
	first := waitFor(t, out, "the first fetch", and(pods("web"), noErr))

	// The second step, 600 ms later in the same second, the same size.
	mu.Lock()
	body, modtime = podImage("web", "nginx:2"), base.Add(700*time.Millisecond)
	mu.Unlock()
	p.waitScans(t, 1) // a poll that may have begun before the change
	if changed := p.waitScans(t, 20); !slices.Contains(changed, true) {
		t.Fatalf("20 polls after the manifest changed, none saw the change (changed = %v)", changed)
	}
	u := waitFor(t, out, "the new content", func(Update) bool { return true })
	if podHashes(u)["web-node1"] == podHashes(first)["web-node1"] {
		t.Errorf("update without the new content:\n%s", describeUpdate(u))
	}
	if n := conditional.Load(); n != 0 {
		t.Errorf("%d requests were conditional (If-Modified-Since or If-None-Match), want none", n)
	}
}

func TestURLSourceSendsHeaders(t *testing.T) {
	header, err := ParseHeaders([]string{"Authorization: Bearer s3cret", "X-Node:node1", "X-Multi: a", "X-Multi: b: c", "Host: manifests.example"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *http.Request, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		fmt.Fprint(w, podNamed("web"))
	}))
	defer srv.Close()
	s := urlSource(t, srv.URL)
	s.Header = header
	waitFor(t, startSource(t, s.Run), "the pod", pods("web"))
	r := <-got
	if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Node") != "node1" ||
		!slices.Equal(r.Header.Values("X-Multi"), []string{"a", "b: c"}) || r.Host != "manifests.example" ||
		r.Header.Get("User-Agent") != "podrun" {
		t.Errorf("request headers = %v, host %q", r.Header, r.Host)
	}
}

func TestParseHeadersErrors(t *testing.T) {
	for in, want := range map[string]string{
		"Authorization Bearer x": `want "Key: Value"`,
		": value":                "the name before the colon is empty",
		"X Y: z":                 `may not contain " "`,
		"X-Ok: a\r\nX-Evil: b":   "control character",
	} {
		_, err := ParseHeaders([]string{in})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHeaders(%q) = %v, want %q", in, err, want)
		}
	}
	// The error reaches stderr and the journal: a header that does not
	// parse may be a bearer token that lost its colon, and is not quoted.
	for _, in := range []string{"Authorization Bearer s3cret", "Authorization Bearer s3cret:x", "s3cret"} {
		if _, err := ParseHeaders([]string{"X-Ok: 1", in}); err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "#2") {
			t.Errorf("ParseHeaders(%q) = %v, want an error naming header #2 without its value", in, err)
		}
	}
	h, err := ParseHeaders([]string{"X-Empty:"})
	if err != nil || h.Get("X-Empty") != "" || len(h.Values("X-Empty")) != 1 {
		t.Errorf("an empty value: %v, %v", h, err)
	}
}

func TestNewHTTPClientTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(serve(podNamed("web")))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshakes
	srv.StartTLS()
	defer srv.Close()

	// Verification is on: the test server's certificate is not trusted.
	client, err := NewHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	if client.Timeout != DefaultHTTPTimeout {
		t.Errorf("Timeout = %v", client.Timeout)
	}
	_, err = FetchURL(context.Background(), client, srv.URL, nil, testOptions())
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted server: err = %v", err)
	}

	// The URL source keeps reporting it, with no snapshot.
	logger, _ := testLogger(t)
	u := waitFor(t, startSource(t, (&URLSource{URL: srv.URL, Client: client, Interval: time.Hour, Options: testOptions(), Logger: logger}).Run),
		"the TLS error", func(Update) bool { return true })
	if u.Snapshot != nil || !errContains("certificate")(u) {
		t.Errorf("update:\n%s", describeUpdate(u))
	}

	// Its CA (here the self-signed certificate itself) in --manifest-url-ca.
	snap, err := FetchURL(context.Background(), trustingClient(t, srv), srv.URL, nil, testOptions())
	if err != nil || len(snap.Pods) != 1 {
		t.Errorf("with the CA: %v, %v", snap, err)
	}

	if _, err := NewHTTPClient(filepath.Join(t.TempDir(), "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing CA file: %v", err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	if _, err := NewHTTPClient(notPEM); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a file without PEM: %v", err)
	}
}

// trustingClient is NewHTTPClient with srv's self-signed certificate in
// --manifest-url-ca.
func trustingClient(t *testing.T, srv *httptest.Server) *http.Client {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := NewHTTPClient(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func TestURLSourceStopsDuringARequest(t *testing.T) {
	// A request in flight when the context ends is abandoned: Run returns
	// (startSource's cleanup checks it) without reporting the abort.
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	logger, _ := testLogger(t)
	client, _ := NewHTTPClient("")
	s := &URLSource{URL: srv.URL, Client: client, Options: testOptions(), Logger: logger}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, out)
	}()
	select {
	case <-started:
	case <-time.After(failAfter):
		t.Fatal("no request")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(failAfter):
		t.Fatal("Run did not return")
	}
	noUpdate(t, out)
}

// TestFetchURLThatDoesNotParseHidesItsPassword: a password with an
// unescaped '/', '?' or '#' makes the URL unparsable, and net/url's own
// message quotes what it read as a port: the password. The error (logged,
// shown on pods and by ps) says only that the URL does not parse.
func TestFetchURLThatDoesNotParseHidesItsPassword(t *testing.T) {
	for _, u := range []string{
		"https://deploy:S3CRET/x@config.example/pods.yaml",
		"https://deploy:S3CRET?x@config.example/pods.yaml",
		"https://deploy:S3CRET#x@config.example/pods.yaml",
	} {
		_, err := FetchURL(context.Background(), testClient(t, false), u, nil, testOptions())
		if err == nil || strings.Contains(err.Error(), "S3CRET") || !strings.Contains(err.Error(), "does not parse") {
			t.Errorf("%s: %v, want an error that says the URL does not parse, without its password", u, err)
		}
		// Said once: the URL has no part to show.
		if err != nil && strings.Count(err.Error(), "does not parse") != 1 {
			t.Errorf("%s: %q says it more than once", u, err)
		}
	}
}
