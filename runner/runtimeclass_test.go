package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/runner"
)

func TestRuntimeClassResolve(t *testing.T) {
	rc := runner.NewRuntimeClasses(map[string]string{"fast": "runc", "both": "from-flag"})
	rc.Set([]*nodev1.RuntimeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "safe"}, Handler: "runsc"},
		{ObjectMeta: metav1.ObjectMeta{Name: "both"}, Handler: "from-object"},
	})
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		class *string
		want  string
	}{
		{nil, ""}, {name(""), ""}, {name("fast"), "runc"}, {name("safe"), "runsc"}, {name("both"), "from-flag"},
	} {
		if got, err := rc.Resolve(tc.class); err != nil || got != tc.want {
			t.Errorf("Resolve(%v) = %q, %v; want %q", tc.class, got, err, tc.want)
		}
	}
	_, err := rc.Resolve(name("nope"))
	if err == nil || !strings.Contains(err.Error(), `RuntimeClass "nope" not found`) ||
		!strings.Contains(err.Error(), "--runtime-class nope=RUNTIME") || !strings.Contains(err.Error(), "node.k8s.io/v1") {
		t.Errorf("unknown class: %v", err)
	}
	// The sources' classes are replaced as a whole.
	rc.Set(nil)
	if _, err := rc.Resolve(name("safe")); err == nil {
		t.Error("a class of the sources outlived them")
	}
}

// TestRuntimeClassResolveCluster: the cluster's classes are used beside
// the flag's and the manifests': the flag wins over the cluster, the
// cluster over a manifest; each set is replaced as a whole.
func TestRuntimeClassResolveCluster(t *testing.T) {
	rc := runner.NewRuntimeClasses(map[string]string{"flagged": "from-flag"})
	object := func(n, h string) *nodev1.RuntimeClass {
		return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: n}, Handler: h}
	}
	rc.Set([]*nodev1.RuntimeClass{object("local", "from-manifest"), object("shared", "from-manifest"), object("flagged", "from-manifest")})
	rc.SetCluster([]*nodev1.RuntimeClass{object("api", "from-api"), object("shared", "from-api"), object("flagged", "from-api")})
	name := func(s string) *string { return &s }
	for class, want := range map[string]string{
		"flagged": "from-flag", "shared": "from-api", "api": "from-api", "local": "from-manifest",
	} {
		if got, err := rc.Resolve(name(class)); err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", class, got, err, want)
		}
	}
	rc.SetCluster(nil)
	if got, err := rc.Resolve(name("shared")); err != nil || got != "from-manifest" {
		t.Errorf("Resolve(shared) without the cluster's = %q, %v; want the manifest's", got, err)
	}
	if _, err := rc.Resolve(name("api")); err == nil {
		t.Error("a class of the cluster outlived it")
	}
}

// TestPodRunsWithItsRuntimeClass: the sandbox (and so each container) of
// a pod gets the runtime its RuntimeClass names; a class nobody declared,
// or one whose runtime the engine lacks, keeps the containers waiting with
// CreateContainerConfigError and makes no sandbox, until it is declared.
func TestPodRunsWithItsRuntimeClass(t *testing.T) {
	fake := newFake(t)
	fake.SetRuntimeHandlers("runc", "runsc")
	h := start(t, fake, func(c *runner.Config) {
		c.RuntimeClasses = runner.NewRuntimeClasses(map[string]string{"fast": "runc", "kata": "kata-runtime"})
	})
	h.r.SetRuntimeClasses([]*nodev1.RuntimeClass{{ObjectMeta: metav1.ObjectMeta{Name: "safe"}, Handler: "runsc"}})
	pods := map[string]string{"u1": "fast", "u2": "safe", "u3": "nope", "u4": "kata"}
	var list []*v1.Pod
	for _, uid := range []string{"u1", "u2", "u3", "u4"} {
		p := newPod(uid, pods[uid]+"-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
		class := pods[uid]
		p.Spec.RuntimeClassName = &class
		list = append(list, p)
	}
	h.updates <- runner.PodUpdate{Op: runner.OpAdd, Pods: list}
	h.waitStatus("u1", "fast running", allRunning)
	h.waitStatus("u2", "safe running", allRunning)
	configError := func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	}
	p := h.waitStatus("u3", "nope refused", configError)
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, `RuntimeClass "nope" not found`) {
		t.Errorf("nope: %q", msg)
	}
	p = h.waitStatus("u4", "kata refused", configError)
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg,
		`RuntimeClass "kata" names runtime "kata-runtime", which the container engine does not have (it has: runc, runsc)`) {
		t.Errorf("kata: %q", msg)
	}

	sbs, err := fake.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runtimes := map[string]string{}
	for _, sb := range sbs {
		runtimes[sb.Pod.UID] = fake.SandboxConfig(sb.ID).Runtime
	}
	if len(runtimes) != 2 || runtimes["u1"] != "runc" || runtimes["u2"] != "runsc" {
		t.Errorf("sandbox runtimes by pod %v, want u1 runc, u2 runsc and no other sandbox", runtimes)
	}

	// Declared now: tried again at the end of the back-off, and runs.
	h.r.SetRuntimeClasses([]*nodev1.RuntimeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "safe"}, Handler: "runsc"},
		{ObjectMeta: metav1.ObjectMeta{Name: "nope"}, Handler: "runc"},
	})
	h.stepUntilStatus("u3", "nope running once declared", time.Second, allRunning)

	// The class of a running pod goes from the sources: its sandbox keeps
	// the runtime it was made with, and a crashed container of it is
	// restarted there, not refused.
	h.r.SetRuntimeClasses([]*nodev1.RuntimeClass{{ObjectMeta: metav1.ObjectMeta{Name: "nope"}, Handler: "runc"}})
	var app string
	for _, c := range h.containers("u2") {
		if c.State == engine.StateRunning {
			app = c.ID
		}
	}
	if err := fake.Exit(app, 1); err != nil {
		t.Fatal(err)
	}
	h.stepUntilStatus("u2", "safe restarted without its class", time.Second, func(p *v1.Pod) bool {
		return allRunning(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
}
