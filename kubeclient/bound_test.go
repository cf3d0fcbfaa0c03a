package kubeclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// stallFirst answers each request of a path with obj, but the first one
// it takes and never answers: it holds it until the client gives up (its
// request's context ends as the connection closes, once its body is
// read), or the test ends (stop).
func stallFirst(t *testing.T, stop <-chan struct{}, obj any) http.HandlerFunc {
	var seen atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(obj); err != nil {
			t.Errorf("answer %s %s: %v", r.Method, r.URL.Path, err)
		}
	}
}

// TestAStalledRequestEndsAndTheNextGoesThrough: an apiserver that takes a
// pod status update, or an Event, and never answers ends the call when the
// bound passes, with an error that says so, rather than holding the
// status manager or the event sink for good; the update tried again, and
// the next Event, go through.
func TestAStalledRequestEndsAndTheNextGoesThrough(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-bound-node", Namespace: "default"}}
	event := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-bound-node.1", Namespace: "default"}}
	stop := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("PATCH /api/v1/namespaces/default/pods/web-bound-node/status", stallFirst(t, stop, pod))
	mux.Handle("POST /api/v1/namespaces/default/events", stallFirst(t, stop, event))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(stop) // first: Close waits for the handlers
	// Long enough for a loopback answer on a busy machine, short for a
	// test: each stalled call waits it out once.
	const bound = time.Second
	c, err := newForConfig(&rest.Config{Host: srv.URL}, bound)
	if err != nil {
		t.Fatal(err)
	}

	patch := func() error {
		_, err := c.Pods("default").Patch(context.Background(), pod.Name, types.StrategicMergePatchType,
			[]byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
		return err
	}
	sink := EventSink{Client: c}
	for _, call := range []struct {
		what string
		do   func() error
	}{
		{"the pod status update", patch},
		{"the Event", func() error { _, err := sink.Create(event.DeepCopy()); return err }},
	} {
		err := returns(t, call.what, call.do)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from the apiserver within 1s") {
			t.Errorf("%s, never answered: %v; want it ended by the bound, saying so", call.what, err)
		}
		if err := returns(t, call.what+" again", call.do); err != nil {
			t.Errorf("%s again: %v", call.what, err)
		}
	}
}

// returns is do's error; the minute only keeps a call that never returns
// from hanging the test.
func returns(t *testing.T, what string, do func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- do() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits for an answer that never comes", what)
		return nil
	}
}

// deadlines is a transport that records, per request, whether its
// context had a deadline.
type deadlines struct {
	next http.RoundTripper
	seen chan bool
}

func (d *deadlines) RoundTrip(req *http.Request) (*http.Response, error) {
	_, bounded := req.Context().Deadline()
	d.seen <- bounded
	return d.next.RoundTrip(req)
}

// TestWatchesAreNotBounded: the bound is each request's, not the
// client's, and a watch is not bounded: informers' watches stay open as
// long as the apiserver keeps them. With a bound that has passed before
// any answer can come, a list fails at once and a watch still streams.
func TestWatchesAreNotBounded(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/default/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		// The event comes when the test has seen the list fail: after
		// the bound.
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-watch-node", Namespace: "default", ResourceVersion: "2"}}
		raw, _ := json.Marshal(pod)
		json.NewEncoder(w).Encode(&metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: raw}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rec := &deadlines{next: http.DefaultTransport, seen: make(chan bool, 4)}
	c, err := newForConfig(&rest.Config{Host: srv.URL, Transport: rec}, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	pods := c.Pods("default")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if bounded := <-rec.seen; bounded {
		t.Error("the watch request carried a deadline")
	}
	if _, err := pods.List(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("list with a bound that has passed: %v, want it ended by the bound", err)
	}
	if bounded := <-rec.seen; !bounded {
		t.Error("the list request carried no deadline")
	}
	close(release)
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != watch.Added {
		t.Fatalf("watch after the bound: %v, open %v; want the pod added", ev, ok)
	}
	if p, _ := ev.Object.(*corev1.Pod); p == nil || p.Name != "web-watch-node" {
		t.Errorf("watch event of %#v, want pod web-watch-node", ev.Object)
	}
}
