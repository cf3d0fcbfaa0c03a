package runner

import (
	"io"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine/enginetest"
)

// TestConfigErrorAfterItsInputArrivedHoldsNoBackoff: a container's
// configuration error (a Secret, a ConfigMap or the Services missing)
// holds the start back-off, unless what it waited for arrived while the
// sync that met the error ran: then the sync that arrival asked for must
// start the container, not wait out a back-off it never deserved. The
// window (between reading the store and recording the error) is too short
// to hit from outside; the Services' e2e form is
// TestServicesArrivingMidSyncStartThePodAtOnce.
func TestConfigErrorAfterItsInputArrivedHoldsNoBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	r := New(Config{Runtime: enginetest.NewFake("node1"), Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web-node1", "default", "u1"
	pod.Spec.Containers = []v1.Container{{Name: "app"}}
	c := &pod.Spec.Containers[0]
	w := newPodWorker(r, pod)
	missing := configErrorf(`secret "creds" not found`)

	w.syncBegins()
	w.recordStartError(pod, c, missing)
	if d := w.nextRetry(); d != 10*time.Second {
		t.Fatalf("after a plain config error the next try is in %v, want the 10s back-off", d)
	}

	// The Secret arrives while a sync runs; that sync then records the
	// error it met before.
	w.syncBegins()
	w.retryConfigErrorsNow()
	w.recordStartError(pod, c, missing)
	if d := w.nextRetry(); d != 0 {
		t.Errorf("the error of a sync its input overtook holds a back-off of %v", d)
	}
	if got := w.shownErrors()[c.Name].Reason; got != reasonCreateContainerConfigError {
		t.Errorf("shown as %q, want %s", got, reasonCreateContainerConfigError)
	}

	// The next sync, after the arrival, that fails again backs off again:
	// as the kubelet, one failure a period.
	w.syncBegins()
	w.recordStartError(pod, c, missing)
	if d := w.nextRetry(); d != 20*time.Second {
		t.Errorf("a config error after the arrival: next try in %v, want the back-off's next step (20s)", d)
	}
}
