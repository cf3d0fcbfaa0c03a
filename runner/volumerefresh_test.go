package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

// mountedFile reads file of the volume mounted at mountPath in the pod's
// one container, on the host.
func (h *harness) mountedFile(uid, mountPath, file string) (string, os.FileMode) {
	h.t.Helper()
	cs := h.containers(uid)
	if len(cs) != 1 {
		h.t.Fatalf("%d containers, want 1", len(cs))
	}
	for _, m := range h.fake.ContainerConfig(cs[0].ID).Mounts {
		if m.ContainerPath == mountPath {
			p := filepath.Join(m.HostPath, file)
			b, err := os.ReadFile(p)
			if err != nil {
				return "", 0
			}
			fi, err := os.Stat(p)
			if err != nil {
				h.t.Fatal(err)
			}
			return string(b), fi.Mode().Perm()
		}
	}
	h.t.Fatalf("no mount at %s", mountPath)
	return "", 0
}

// waitFile waits until file of the volume at mountPath holds want.
func (h *harness) waitFile(uid, mountPath, file, want string) {
	h.t.Helper()
	waitUntil(h.t, fmt.Sprintf("%s/%s to hold %q", mountPath, file, want), func() bool {
		got, _ := h.mountedFile(uid, mountPath, file)
		return got == want
	})
}

// sameContainer checks that the pod still runs the one container it ran,
// never restarted.
func (h *harness) sameContainer(uid string, first *engine.Container) {
	h.t.Helper()
	cs := h.containers(uid)
	if len(cs) != 1 || cs[0].ID != first.ID || cs[0].State != engine.StateRunning {
		h.t.Fatalf("containers %+v; want %s alone, running", cs, first.ID)
	}
	p, _ := h.r.Pod(uid)
	if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		h.t.Fatalf("restartCount %d", rc)
	}
}

func configMap(name string, data map[string]string) *v1.ConfigMap {
	cm := &v1.ConfigMap{Data: data}
	cm.Name, cm.Namespace = name, "default"
	return cm
}

// TestEditedConfigMapReachesRunningPod: an edit of a ConfigMap rewrites
// the files of the volumes of the running pods that use it, without a
// restart, keys removed included; a re-send of the same objects, or an
// edit of one no pod uses, does nothing.
func TestEditedConfigMapReachesRunningPod(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	h.r.SetObjects([]*v1.ConfigMap{configMap("conf", map[string]string{"a": "1", "b": "1"})}, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Spec.Volumes = []v1.Volume{
		{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "conf"},
				Items: []v1.KeyToPath{{Key: "a", Path: "sub/a.conf"}}}}}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}, {Name: "proj", MountPath: "/etc/proj"}}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, Key: "a"}}}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	if got, mode := h.mountedFile("u1", "/etc/conf", "a"); got != "1" || mode != 0o644 {
		t.Fatalf("conf/a = %q, mode %v", got, mode)
	}

	// Nothing the pod uses changes: its worker is not woken.
	looks := calls(fake, "ListPodObjects")
	n := looks()
	h.r.SetObjects([]*v1.ConfigMap{configMap("conf", map[string]string{"a": "1", "b": "1"}),
		configMap("other", map[string]string{"x": "y"})}, nil)

	// The edit: a changed, b removed, c added.
	h.r.SetObjects([]*v1.ConfigMap{configMap("conf", map[string]string{"a": "2", "c": "3"}),
		configMap("other", map[string]string{"x": "y"})}, nil)
	h.waitFile("u1", "/etc/conf", "a", "2")
	h.waitFile("u1", "/etc/conf", "c", "3")
	h.waitFile("u1", "/etc/proj", "sub/a.conf", "2")
	if got, _ := h.mountedFile("u1", "/etc/conf", "b"); got != "" {
		t.Errorf("removed key b still in the volume: %q", got)
	}
	h.sameContainer("u1", first)
	if env := fake.ContainerConfig(first.ID).Env; len(env) != 1 || env[0].Value != "1" {
		t.Errorf("env %v", env)
	}
	// A rewrite is no action: the pod was not even listed for it.
	if looks() != n {
		t.Errorf("%d lists of the pod for a ConfigMap edit", looks()-n)
	}
}

// TestMissingConfigMapStartsPodWhenItAppears: a container waiting for a
// ConfigMap that does not exist (CreateContainerConfigError) starts as
// soon as it appears, not at the end of its back-off.
func TestMissingConfigMapStartsPodWhenItAppears(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Spec.Volumes = []v1.Volume{{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	h.r.SetObjects([]*v1.ConfigMap{configMap("conf", map[string]string{"a": "1"})}, nil)
	h.waitStatus("u1", "running", allRunning)
	h.waitFile("u1", "/etc/conf", "a", "1")
}

// TestDownwardAPILabelEditReachesRunningPod: a label edit rewrites the
// downwardAPI file that shows it, without a restart.
func TestDownwardAPILabelEditReachesRunningPod(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Labels = map[string]string{"tier": "a"}
	pod.Spec.Volumes = []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "info", MountPath: "/etc/info"}}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{pod}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	h.waitFile("u1", "/etc/info", "labels", `tier="a"`)

	edited := pod.DeepCopy()
	edited.Labels["tier"] = "b"
	h.updates <- runner.PodUpdate{Op: runner.OpUpdate, Pods: []*v1.Pod{edited}}
	h.waitFile("u1", "/etc/info", "labels", `tier="b"`)
	h.sameContainer("u1", first)
}

// fakeTokens is a TokenSource that issues numbered tokens on a clock.
type fakeTokens struct {
	clk *testingclock.FakeClock

	mu    sync.Mutex
	n     int
	err   error
	asked []string // "namespace/pod sa audience expirationSeconds", by call
}

func (f *fakeTokens) Token(ctx context.Context, pod *v1.Pod, sa, audience string, exp int64) (string, time.Time, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, fmt.Sprintf("%s/%s %s %q %d", pod.Namespace, pod.Name, sa, audience, exp))
	if f.err != nil {
		return "", time.Time{}, time.Time{}, f.err
	}
	f.n++
	now := f.clk.Now()
	return fmt.Sprintf("token-%d", f.n), now, now.Add(time.Duration(exp) * time.Second), nil
}

func (f *fakeTokens) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeTokens) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

// apiAccessPod is a pod with the kube-api-access volume the API gives
// every pod: a token, the cluster's CA and the namespace.
func apiAccessPod() *v1.Pod {
	pod := newPod("u1", "kube-proxy-abcde", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	pod.Namespace = "kube-system"
	pod.Spec.ServiceAccountName = "kube-proxy"
	exp := int64(3607)
	mode := int32(0o644)
	pod.Spec.Volumes = []v1.Volume{{Name: "kube-api-access-x1", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "kube-api-access-x1",
		MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	return pod
}

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func rootCA() []*v1.ConfigMap {
	cm := configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"})
	cm.Namespace = "kube-system"
	return []*v1.ConfigMap{cm}
}

// TestServiceAccountTokenIsWrittenAndRefreshed: the token of a projected
// serviceAccountToken source is written with the volume's mode, and
// replaced, without a restart, when 80 % of its life has passed (a timer
// of the worker on the clock); a refresh that fails keeps the token that
// was and is tried again 5 s later.
func TestServiceAccountTokenIsWrittenAndRefreshed(t *testing.T) {
	fake := newFake(t)
	tokens := &fakeTokens{clk: clockOf(t, fake)}
	h := startQuiet(t, fake, fake, func(c *runner.Config) {
		c.Tokens = tokens
		// The test steps the clock by hours: nothing but the token's
		// timer may wake the worker.
		c.RelistPeriod, c.SyncFrequency, c.HousekeepingPeriod = 100*time.Hour, 100*time.Hour, 100*time.Hour
	})
	h.r.SetObjects(rootCA(), nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{apiAccessPod()}}
	h.waitStatus("u1", "running", allRunning)
	first := h.containers("u1")[0]
	if got, mode := h.mountedFile("u1", saDir, "token"); got != "token-1" || mode != 0o644 {
		t.Fatalf("token %q, mode %v", got, mode)
	}
	if got, _ := h.mountedFile("u1", saDir, "ca.crt"); got != "CA" {
		t.Errorf("ca.crt %q", got)
	}
	if got, _ := h.mountedFile("u1", saDir, "namespace"); got != "kube-system" {
		t.Errorf("namespace %q", got)
	}
	if want := `kube-system/kube-proxy-abcde kube-proxy "" 3607`; tokens.asked[0] != want {
		t.Errorf("asked %q, want %q", tokens.asked[0], want)
	}

	// 80 % of 3607 s: the worker's only timer, on the clock.
	h.waitIdle("token requests", tokens.calls, 1)
	h.expectWait(3607 * time.Second * 8 / 10)
	h.waitFile("u1", saDir, "token", "token-2")
	h.sameContainer("u1", first)

	// The next refresh fails: the token stays, and is tried again.
	h.waitIdle("token requests", tokens.calls, 2)
	tokens.set(errors.New("apiserver unreachable"))
	h.expectWait(3607 * time.Second * 8 / 10)
	h.waitIdle("token requests", tokens.calls, 3)
	if got, _ := h.mountedFile("u1", saDir, "token"); got != "token-2" {
		t.Errorf("token after a failed refresh: %q", got)
	}
	tokens.set(nil)
	h.expectWait(5 * time.Second)
	h.waitFile("u1", saDir, "token", "token-3")
	h.sameContainer("u1", first)
}

// TestFailingTokenSourceHoldsTheStart: a token the source does not give
// keeps the containers from starting, waiting as ContainerCreating with
// the error as the message, and is tried again every 10 s.
func TestFailingTokenSourceHoldsTheStart(t *testing.T) {
	fake := newFake(t)
	tokens := &fakeTokens{clk: clockOf(t, fake), err: errors.New("no kubeconfig yet")}
	h := startQuiet(t, fake, fake, func(c *runner.Config) { c.Tokens = tokens })
	h.r.SetObjects(rootCA(), nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{apiAccessPod()}}
	p := h.waitStatus("u1", "ContainerCreating", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Message != ""
	})
	w := p.Status.ContainerStatuses[0].State.Waiting
	if w.Reason != "ContainerCreating" || !strings.Contains(w.Message, `volume "kube-api-access-x1"`) ||
		!strings.Contains(w.Message, "no kubeconfig yet") {
		t.Errorf("waiting %+v", w)
	}
	if n := len(h.containers("u1")); n != 0 {
		t.Errorf("%d containers made without a token", n)
	}
	h.waitIdle("token requests", tokens.calls, 1)
	tokens.set(nil)
	h.expectWait(10 * time.Second)
	h.waitStatus("u1", "running", allRunning)
	h.waitFile("u1", saDir, "token", "token-1")
}

// TestTokenVolumeWithoutTokenSource: without a TokenSource (no cluster) a
// token volume is refused, clearly.
func TestTokenVolumeWithoutTokenSource(t *testing.T) {
	fake := newFake(t)
	h := startQuiet(t, fake, fake, nil)
	h.r.SetObjects(rootCA(), nil)
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: []*v1.Pod{apiAccessPod()}}
	p := h.waitStatus("u1", "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if w := p.Status.ContainerStatuses[0].State.Waiting; !strings.Contains(w.Message, "serviceAccountToken needs a cluster") {
		t.Errorf("waiting %+v", w)
	}
}
