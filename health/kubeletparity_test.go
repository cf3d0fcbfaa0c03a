package health

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
)

// The tests in this file hold podrun's httpGet handlers to the kubelet's
// own prober (k8s.io/kubernetes/pkg/probe/http), run against the same
// server.

// cutShortServer answers every request with a 200 that promises a body of
// 100 bytes, sends 3 of them and closes the connection.
func cutShortServer(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for { // the request's head
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"))
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

// stallingServer answers with a 200 and the start of its body, then sends
// nothing until the request ends.
func stallingServer(t *testing.T) *net.TCPAddr {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("abc"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr)
}

// kubeletHTTPProbeErrs runs the kubelet's HTTP prober against addr and reports
// whether its prober errs, which makes the kubelet discard the run
// (pkg/kubelet/prober: "Prober error, throw away the result").
func kubeletHTTPProbeErrs(t *testing.T, scheme string, addr *net.TCPAddr) bool {
	t.Helper()
	u := &url.URL{Scheme: scheme, Host: addr.String(), Path: "/"}
	req, err := httpprobe.NewProbeRequest(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = httpprobe.New(false).Probe(req, probeTimeout(&v1.Probe{TimeoutSeconds: 1}))
	return err != nil
}

// An answer whose body cannot be read (cut short, or stalled past the
// timeout) came with a good status: the kubelet's prober errs, so the run
// counts neither way. podrun's too: it returns an error, which the
// manager discards (TestManagerUnknownResultsDoNotCount).
func TestHTTPGetProbeBodyUnreadableIsNoResult(t *testing.T) {
	t.Parallel()
	for name, addr := range map[string]*net.TCPAddr{"cut short": cutShortServer(t), "stalled": stallingServer(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !kubeletHTTPProbeErrs(t, "http", addr) {
				t.Fatal("the kubelet's prober did not err: the server does not do what the test needs")
			}
			p := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(addr.Port)}}}
			res, msg, err := RunProbe(context.Background(), Target{PodIP: addr.IP.String()}, p)
			if err == nil {
				t.Errorf("podrun's probe: %s (%q), no error; the kubelet's prober errs and the run is discarded", res, msg)
			}
		})
	}
}

// An httpGet hook fails only when the exchange fails, as the kubelet's
// (pkg/kubelet/lifecycle runHTTPHandler discards the body, errors and
// all): a body cut short after a 200 is a hook that ran.
func TestHTTPGetHookPassesWhenTheBodyIsCutShort(t *testing.T) {
	t.Parallel()
	addr := cutShortServer(t)
	h := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(addr.Port)}}
	if err := RunHook(t.Context(), Target{PodIP: addr.IP.String()}, h); err != nil {
		t.Errorf("hook: %v, want it to pass", err)
	}
}

// HTTPS probes offer HTTP/2, as the kubelet's transport does: a server
// that serves only HTTP/2 passes both.
func TestHTTPSProbeOffersHTTP2(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "HTTP/2 only", http.StatusHTTPVersionNotSupported)
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().(*net.TCPAddr)

	if kubeletHTTPProbeErrs(t, "https", addr) {
		t.Fatal("the kubelet's prober erred")
	}
	p := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(addr.Port), Scheme: v1.URISchemeHTTPS}}}
	if res, msg, err := RunProbe(t.Context(), Target{PodIP: addr.IP.String()}, p); res != Success || err != nil {
		t.Errorf("probe: %s %q %v, want success", res, msg, err)
	}
}

// httpGetURL asks for what the kubelet asks for, path by path: a path is
// parsed alone, and one that does not parse is sent escaped.
func TestHTTPGetURLAsTheKubelet(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "/", "/healthz", "healthz", "/a?x=1&y=%20", "/a b", "/a#frag", "/%2F", "/a%zz", "//double", "/a/../b", "?only=query"} {
		g := &v1.HTTPGetAction{Path: path, Port: intstr.FromInt(8080), Scheme: v1.URISchemeHTTPS}
		want, err := httpprobe.NewRequestForHTTPGetAction(g, &v1.Container{}, "10.0.0.1", "probe")
		if err != nil {
			t.Fatalf("path %q: the kubelet: %v", path, err)
		}
		got, err := httpGetURL(Target{PodIP: "10.0.0.1"}, g)
		if err != nil {
			t.Errorf("path %q: %v; the kubelet asks for %s", path, err, want.URL)
			continue
		}
		if got.String() != want.URL.String() {
			t.Errorf("path %q: %s, the kubelet asks for %s", path, got, want.URL)
		}
	}
}

// A host that the API server takes (it does not validate httpGet.host) but
// that makes no request: the kubelet's prober returns Unknown with an
// error, and the run is discarded; podrun's too, not a failure.
func TestHTTPGetProbeWithoutARequestIsNoResult(t *testing.T) {
	t.Parallel()
	g := &v1.HTTPGetAction{Host: "a b", Path: "/", Port: intstr.FromInt(8080)}
	if _, err := httpprobe.NewRequestForHTTPGetAction(g, &v1.Container{}, "10.0.0.1", "probe"); err == nil {
		t.Fatal("the kubelet makes a request of this: the test needs another host")
	}
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: g}}
	if res, msg, err := RunProbe(t.Context(), Target{PodIP: "10.0.0.1"}, p); res != Unknown || err == nil {
		t.Errorf("probe: %s %q %v, want Unknown with an error", res, msg, err)
	}
}
