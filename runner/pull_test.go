package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
)

// pullRuntime is a Runtime that only pulls: images are missing until pulled,
// and a registry that accepts only user "good".
type pullRuntime struct {
	engine.Runtime
	mu      sync.Mutex
	auths   []string
	present map[string]bool
	active  atomic.Int32
	most    atomic.Int32
	// gate, when set, holds every pull until it is closed.
	gate chan struct{}
}

func (p *pullRuntime) ImageStatus(ctx context.Context, ref string) (*engine.Image, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.present[ref] {
		return &engine.Image{ID: "id-" + ref}, nil
	}
	return nil, fmt.Errorf("image %s: %w", ref, engine.ErrNotFound)
}

func (p *pullRuntime) PullImage(ctx context.Context, ref string, auth *engine.AuthConfig) (*engine.Image, error) {
	n := p.active.Add(1)
	defer p.active.Add(-1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	if p.gate != nil {
		<-p.gate
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	user := "<anonymous>"
	if auth != nil {
		user = auth.Username
	}
	p.auths = append(p.auths, ref+" "+user)
	if strings.HasPrefix(ref, "private/") && user != "good" {
		return nil, fmt.Errorf("pull %s: unauthorized: authentication required", ref) // as engines name it
	}
	if p.present == nil {
		p.present = map[string]bool{}
	}
	p.present[ref] = true
	return &engine.Image{ID: "id-" + ref, Size: 1}, nil
}

func newPullRunner(rt engine.Runtime, secrets ...*v1.Secret) *Runner {
	r := New(Config{Runtime: rt, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.SetObjects(nil, secrets)
	return r
}

func pullPod(secrets ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}}
	for _, s := range secrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
	}
	return p
}

func TestEnsureImageCredentials(t *testing.T) {
	ctx := context.Background()
	cfg := func(user string) string {
		return `{"auths":{"docker.io":{"username":"` + user + `","password":"x"}}}`
	}
	rt := &pullRuntime{}
	r := newPullRunner(rt,
		secret("wrong", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, cfg("wrong")),
		secret("right", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, cfg("good")))
	var used []string
	node := &engine.BasicKeyring{}
	node.Add("docker.io", engine.AuthConfig{Username: "node"})
	opts := &ImageOptions{Credentials: node, Used: func(id string, _ time.Time) { used = append(used, id) }}

	// The pod's secrets first, in order, then the node's: the first that
	// works wins.
	c := &v1.Container{Name: "c", Image: "private/app:1", ImagePullPolicy: v1.PullIfNotPresent}
	if err := ensure(ctx, r, pullPod("missing", "wrong", "right"), c, opts); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rt.auths, ", "); got != "private/app:1 wrong, private/app:1 good" {
		t.Errorf("pulls: %s", got)
	}
	if fmt.Sprint(used) != "[id-private/app:1]" {
		t.Errorf("used: %v", used)
	}

	// Present: no pull, but used all the same.
	rt.auths = nil
	if err := ensure(ctx, r, pullPod(), c, opts); err != nil || len(rt.auths) != 0 || len(used) != 2 {
		t.Errorf("present image: err %v, pulls %v, used %v", err, rt.auths, used)
	}

	// All credentials refused: ErrImagePull, naming each attempt.
	c2 := &v1.Container{Name: "c", Image: "private/other:1", ImagePullPolicy: v1.PullAlways}
	err := ensure(ctx, r, pullPod("wrong"), c2, opts)
	var ie *imageError
	if !errors.As(err, &ie) || ie.reason != reasonErrImagePull || !strings.Contains(err.Error(), "as wrong") ||
		!strings.Contains(err.Error(), "as node") {
		t.Errorf("refused: %v", err)
	}

	// The engine's error names the image; the status shows it once.
	err = ensure(ctx, r, pullPod(), &v1.Container{Name: "c", Image: "private/x:1", ImagePullPolicy: v1.PullAlways}, nil)
	if want := "pull private/x:1: unauthorized: authentication required"; err == nil || err.Error() != want {
		t.Errorf("anonymous refused: %v, want %q", err, want)
	}

	// No credentials at all: anonymous.
	rt.auths = nil
	if err := ensure(ctx, r, pullPod(), &v1.Container{Name: "c", Image: "quay.io/app:1", ImagePullPolicy: v1.PullAlways}, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rt.auths, ", "); got != "quay.io/app:1 <anonymous>" {
		t.Errorf("anonymous pull: %s", got)
	}

	// Never: not pulled.
	err = ensure(ctx, r, pullPod(), &v1.Container{Name: "c", Image: "never:1", ImagePullPolicy: v1.PullNever}, opts)
	if !errors.As(err, &ie) || ie.reason != reasonErrImageNeverPull {
		t.Errorf("Never: %v", err)
	}
}

// TestSerializedPulls: serialized, one pull at a time; else all at once.
// Every pull is held until the test lets them go, so the pulls that would
// overlap do, however slowly the goroutines come: parallel, the three
// pulls run at once; serialized, the first runs while the others are seen
// waiting for its slot (each has selected on its context's Done there),
// and only it.
func TestSerializedPulls(t *testing.T) {
	for _, serialize := range []bool{true, false} {
		t.Run(fmt.Sprintf("serialize=%v", serialize), func(t *testing.T) {
			rt := &pullRuntime{gate: make(chan struct{})}
			r := newPullRunner(rt)
			opts := &ImageOptions{SerializePulls: serialize}
			var wg sync.WaitGroup
			defer wg.Wait()
			var once sync.Once
			open := func() { once.Do(func() { close(rt.gate) }) }
			defer open()
			ctxs := make([]*doneCounter, 3)
			for i := range ctxs {
				ctxs[i] = &doneCounter{Context: context.Background()}
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &v1.Container{Name: "c", Image: fmt.Sprintf("app%d:1", i), ImagePullPolicy: v1.PullIfNotPresent}
					if err := ensure(ctxs[i], r, pullPod(), c, opts); err != nil {
						t.Error(err)
					}
				}()
			}
			held := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for !cond() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s: %d pulls at once", what, rt.active.Load())
					}
					time.Sleep(time.Millisecond)
				}
			}
			if !serialize {
				held("the three pulls at once", func() bool { return rt.active.Load() == 3 })
				return
			}
			// Each of the others at the slot, or (the failure) pulling too.
			held("a pull, the others at the slot", func() bool {
				n := rt.active.Load()
				if n > 1 {
					return true
				}
				for _, c := range ctxs {
					if c.calls.Load() == 0 {
						return false
					}
				}
				return n == 1
			})
			if n := rt.active.Load(); n != 1 {
				t.Fatalf("serialized: %d pulls at once", n)
			}
			open()
			wg.Wait()
			if most := rt.most.Load(); most != 1 {
				t.Errorf("serialized: %d pulls at once", most)
			}
			if len(rt.auths) != 3 {
				t.Errorf("pulls: %v, want three", rt.auths)
			}
		})
	}
}

// doneCounter is a context that counts the calls of its Done: a pull
// that waits for the serialized pulls' slot selects on it.
type doneCounter struct {
	context.Context
	calls atomic.Int32
}

func (c *doneCounter) Done() <-chan struct{} {
	c.calls.Add(1)
	return c.Context.Done()
}

func TestAdmitError(t *testing.T) {
	err := fmt.Errorf("admit: %w", refusal("OutOfDisk"))
	if reason, ok := AdmitReason(err); !ok || reason != "OutOfDisk" {
		t.Errorf("AdmitReason = %q, %v", reason, ok)
	}
	if _, ok := AdmitReason(errors.New("x")); ok {
		t.Error("AdmitReason of another error")
	}
}

func secret(name string, typ v1.SecretType, key, data string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Type: typ,
		Data: map[string][]byte{key: []byte(data)}}
}

// refusal is an admitter's error, as node's disk check returns.
type refusal string

func (r refusal) Error() string       { return string(r) + ": refused" }
func (r refusal) AdmitReason() string { return string(r) }

// ensure is ensureImage for a container's image.
func ensure(ctx context.Context, r *Runner, pod *v1.Pod, c *v1.Container, opts *ImageOptions) error {
	_, err := r.ensureImage(ctx, pod, c.Name, c.Image, c.ImagePullPolicy, opts, nil)
	return err
}

// TestInvalidImageNameAsksTheEngineNothing: an image that is no image
// reference waits as InvalidImageName, as with the kubelet, and the
// engine is asked nothing about it: Docker takes a ref into its API's URL
// path, where "x/../../containers/<id>" would inspect a container.
func TestInvalidImageNameAsksTheEngineNothing(t *testing.T) {
	ctx := context.Background()
	for _, image := range []string{"x/../../containers/c0ffee", "app/Upper:1", "app:1 ", "a@sha256:short"} {
		rt := &pullRuntime{present: map[string]bool{image: true}}
		r := newPullRunner(rt)
		for _, policy := range []v1.PullPolicy{v1.PullIfNotPresent, v1.PullAlways} {
			err := ensure(ctx, r, pullPod(), &v1.Container{Name: "c", Image: image, ImagePullPolicy: policy}, nil)
			var ie *imageError
			if !errors.As(err, &ie) || ie.reason != reasonInvalidImageName || errorReason(err) != "InvalidImageName" {
				t.Errorf("%q, %s: %v, want InvalidImageName", image, policy, err)
			}
		}
		if len(rt.auths) != 0 {
			t.Errorf("%q was pulled: %v", image, rt.auths)
		}
		pod := pullPod()
		pod.Spec.Containers = []v1.Container{{Name: "c", Image: image}}
		if looked := r.lookUpImages(ctx, &podActions{StartApps: []*v1.Container{&pod.Spec.Containers[0]}}); len(looked) != 0 {
			t.Errorf("%q was looked up", image)
		}
	}
}
