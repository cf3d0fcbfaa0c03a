package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/errdefs"
)

// Docker 20.10's answers to a remove that leaves the container in place.
const (
	busyMsg = `driver "overlay2" failed to remove root filesystem for 0123456789ab: unlinkat /var/lib/docker/overlay2/5f2c/merged: device or resource busy`
	// What newer engines say for the same failure.
	busyMsg2       = `unable to remove filesystem: unlinkat /var/lib/docker/containers/0123456789ab/mounts/shm: device or resource busy`
	inProgressMsg  = `removal of container podrun_POD_p_default_1234abcd_0 is already in progress`
	killFailedMsg  = `could not kill container: tried to kill container, but did not receive an exit event`
	fullTestID     = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testObjectName = "podrun_POD_p-000-n_default_1234abcd_0"
)

func TestClassifyRemoval(t *testing.T) {
	for _, tc := range []struct {
		err   error
		state string
		want  RemovalReason
	}{
		{errdefs.System(errors.New(busyMsg)), "dead", RemovalBusy},
		{errdefs.System(errors.New(busyMsg2)), "dead", RemovalBusy},
		{errdefs.System(errors.New(busyMsg)), "", RemovalBusy}, // inspect failed
		{errors.New("Error response from daemon: " + strings.ToUpper(busyMsg)), "exited", RemovalBusy},
		{errdefs.Conflict(errors.New(inProgressMsg)), "removing", RemovalInProgress},
		{errdefs.Conflict(errors.New(inProgressMsg)), "", RemovalInProgress},
		// The other removal failed meanwhile: Docker marked the container dead.
		{errdefs.Conflict(errors.New(inProgressMsg)), "dead", RemovalDead},
		{errdefs.System(errors.New(killFailedMsg)), "dead", RemovalDead},
		{errdefs.System(errors.New("something else")), "removing", RemovalInProgress},
		{errdefs.System(errors.New(killFailedMsg)), "running", RemovalFailed},
		// "already in progress" only counts as Docker's conflict.
		{errdefs.System(errors.New(inProgressMsg)), "exited", RemovalFailed},
	} {
		got := classifyRemoval(tc.err, tc.state)
		if got != tc.want {
			t.Errorf("classifyRemoval(%q, %q) = %q, want %q", tc.err, tc.state, got, tc.want)
		}
		e := &RemovalError{ID: fullTestID, Name: testObjectName, State: tc.state, Reason: got, Err: tc.err}
		if e.Retryable() != (got != RemovalFailed) {
			t.Errorf("%q: Retryable() = %v", got, e.Retryable())
		}
		if msg := e.Error(); !strings.Contains(msg, testObjectName) || !strings.Contains(msg, "0123456789ab") ||
			(tc.state != "" && !strings.Contains(msg, "is "+tc.state+" in Docker")) || !strings.Contains(msg, tc.err.Error()) {
			t.Errorf("error text does not name the container, its state and Docker's answer: %s", msg)
		}
	}
}

// fakeEngine answers the Engine API calls of a remove: inspect (by ID,
// from a script of states, the last one repeated; "gone" is 404) and
// delete (with a fixed answer).
type fakeEngine struct {
	node string
	typ  string // the container's type label

	mu        sync.Mutex
	states    []string
	inspects  int
	deletes   int
	delStatus int
	delMsg    string
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p := apiPath.ReplaceAllString(req.URL.Path, "")
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
	}
	switch {
	case p == "/_ping":
		w.Header().Set("Api-Version", "1.41")
		_, _ = w.Write([]byte("OK"))
	case req.Method == http.MethodGet && p == "/containers/"+fullTestID+"/json":
		state := f.states[min(f.inspects, len(f.states)-1)]
		f.inspects++
		if state == "gone" {
			fail(http.StatusNotFound, "No such container: "+fullTestID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"Id": fullTestID, "Name": "/" + testObjectName, "Created": "2026-01-01T00:00:00Z",
			"State":  map[string]any{"Status": state, "Dead": state == "dead"},
			"Config": map[string]any{"Labels": map[string]string{LabelNode: f.node, LabelContainerType: f.typ}},
		})
	case req.Method == http.MethodDelete && p == "/containers/"+fullTestID:
		f.deletes++
		if f.delStatus == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		fail(f.delStatus, f.delMsg)
	default:
		fail(http.StatusNotFound, fmt.Sprintf("page not found: %s %s", req.Method, p))
	}
}

func fakeRuntime(t *testing.T, f *fakeEngine) *Runtime {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	r, err := New(Options{NodeName: f.node, Host: "tcp://" + srv.Listener.Addr().String(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRemoveThatDockerCannotFinish: a remove that Docker answers but that
// leaves the container (dead, its overlay busy; another removal under way
// that fails) is a *RemovalError naming the container and its state; one
// that another removal finishes is no error.
func TestRemoveThatDockerCannotFinish(t *testing.T) {
	ctx := context.Background()
	defer func(d time.Duration) { removalWait = d }(removalWait)
	removalWait = 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		sandbox   bool
		states    []string // what inspect says: for the ownership check, then after the remove
		status    int
		msg       string
		wantErr   bool
		reason    RemovalReason
		state     string
		retryable bool
	}{
		{name: "busy sandbox", sandbox: true, states: []string{"exited", "dead"}, status: 500, msg: busyMsg,
			wantErr: true, reason: RemovalBusy, state: "dead", retryable: true},
		{name: "dead container", states: []string{"dead"}, status: 500, msg: busyMsg2,
			wantErr: true, reason: RemovalBusy, state: "dead", retryable: true},
		{name: "dead, kill failed", states: []string{"dead"}, status: 500, msg: killFailedMsg,
			wantErr: true, reason: RemovalDead, state: "dead", retryable: true},
		{name: "in progress, then gone", states: []string{"running", "removing", "removing", "gone"}, status: 409, msg: inProgressMsg},
		{name: "in progress, then dead", sandbox: true, states: []string{"running", "removing", "dead"}, status: 409, msg: inProgressMsg,
			wantErr: true, reason: RemovalDead, state: "dead", retryable: true},
		{name: "in progress for too long", states: []string{"running", "removing"}, status: 409, msg: inProgressMsg,
			wantErr: true, reason: RemovalInProgress, state: "removing", retryable: true},
		{name: "gone after the error", states: []string{"exited", "gone"}, status: 500, msg: busyMsg},
		{name: "refused", states: []string{"running"}, status: 500, msg: killFailedMsg,
			wantErr: true, reason: RemovalFailed, state: "running"},
		{name: "not found", states: []string{"exited"}, status: 404, msg: "No such container: " + fullTestID},
		{name: "removed", states: []string{"exited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ := "app"
			if tc.sandbox {
				typ = TypeSandbox
			}
			f := &fakeEngine{node: "n", typ: typ, states: tc.states, delStatus: tc.status, delMsg: tc.msg}
			r := fakeRuntime(t, f)
			var err error
			if tc.sandbox {
				err = r.RemoveSandbox(ctx, fullTestID)
			} else {
				err = r.RemoveContainer(ctx, fullTestID)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("remove = %v, want nil", err)
				}
				return
			}
			var rerr *RemovalError
			if !errors.As(err, &rerr) {
				t.Fatalf("remove = %v (%T), want a *RemovalError", err, err)
			}
			if rerr.Reason != tc.reason || rerr.State != tc.state || rerr.Name != testObjectName || rerr.ID != fullTestID || rerr.Retryable() != tc.retryable {
				t.Errorf("RemovalError = %+v, want reason %q, state %q, retryable %v", rerr, tc.reason, tc.state, tc.retryable)
			}
			if !strings.Contains(err.Error(), testObjectName) || !strings.Contains(err.Error(), "is "+tc.state+" in Docker") {
				t.Errorf("error does not name the container and its state: %v", err)
			}
			// What gc looks for, without importing this package.
			var st interface {
				Retryable() bool
				DockerState() string
			}
			if !errors.As(err, &st) || st.DockerState() != tc.state {
				t.Errorf("error does not expose Retryable/DockerState: %v", err)
			}
			t.Logf("%v", err)
			if f.deletes != 1 {
				t.Errorf("%d removes, want 1 (the caller retries, later)", f.deletes)
			}
		})
	}
}
