package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hookTarget is a Target whose httpGet hooks reach srv, and the hook's
// port.
func hookTarget(t *testing.T, srv *httptest.Server) (Target, intstr.IntOrString) {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return Target{ContainerID: "c1", PodIP: host, Container: &v1.Container{Name: "app"}}, intstr.FromInt32(int32(n))
}

// TestHTTPHookPassesWhateverTheStatus: the kubelet's httpGet hook fails
// only when no answer comes; the answer's status is not looked at, so a
// postStart hook answered 404 or 500 does not kill the container.
func TestHTTPHookPassesWhateverTheStatus(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusOK, http.StatusNotFound, http.StatusInternalServerError} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
		}))
		tgt, port := hookTarget(t, srv)
		err := RunHook(context.Background(), tgt, &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/hook", Port: port}})
		srv.Close()
		if err != nil {
			t.Errorf("hook answered %d: %v, want no error", code, err)
		}
	}

	// No answer at all is a failure.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tgt, port := hookTarget(t, srv)
	srv.Close()
	if err := RunHook(context.Background(), tgt, &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: port}}); err == nil {
		t.Error("a hook whose server is gone passed")
	}
}

// TestHTTPSHookFallsBackToHTTP: an HTTPS hook that reaches a plain HTTP
// server is sent again over HTTP, without its Authorization header, as the
// kubelet does (it warns with a LifecycleHTTPFallback event).
func TestHTTPSHookFallsBackToHTTP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer srv.Close()
	tgt, port := hookTarget(t, srv)
	var fellBack []string
	tgt.OnHTTPFallback = func(host string) { fellBack = append(fellBack, host) }
	h := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: port, Scheme: v1.URISchemeHTTPS,
		HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}}}}
	if err := RunHook(context.Background(), tgt, h); err != nil {
		t.Fatalf("HTTPS hook on an HTTP server: %v, want the HTTP retry to pass", err)
	}
	mu.Lock()
	if len(auth) != 1 || auth[0] != "" {
		t.Errorf("the server saw Authorization %q, want one request without it", auth)
	}
	mu.Unlock()
	if want := srv.Listener.Addr().String(); len(fellBack) != 1 || fellBack[0] != want {
		t.Errorf("fallbacks reported %q, want [%s]", fellBack, want)
	}
	// A plain HTTP hook is no fallback.
	h.HTTPGet.Scheme = v1.URISchemeHTTP
	if err := RunHook(context.Background(), tgt, h); err != nil || len(fellBack) != 1 {
		t.Errorf("HTTP hook: %v, fallbacks reported %q, want none more", err, fellBack)
	}
}

// TestSleepHookCutShortFails: a sleep hook whose time runs out before the
// sleep is over fails, as the kubelet's ("container terminated before
// sleep hook finished").
func TestSleepHookCutShortFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RunHook(ctx, Target{}, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 3600}}); err == nil {
		t.Error("a sleep hook cut short passed")
	}
	start := time.Now()
	if err := RunHook(context.Background(), Target{}, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}); err != nil {
		t.Errorf("sleep 0: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("sleep 0 slept")
	}
}
