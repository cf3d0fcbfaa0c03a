package cmd

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

func TestPodUpdatesTranslatesOps(t *testing.T) {
	privileged := true
	pod := func(name string, priv bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		if priv {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &privileged}
		}
		return p
	}
	var logged []string
	logError := func(msg string, _ ...any) { logged = append(logged, msg) }
	got := podUpdates([]source.PodChange{
		{Op: source.OpRemove, Pod: pod("gone", true)},
		{Op: source.OpAdd, Pod: pod("new", false)},
		{Op: source.OpUpdate, Pod: pod("edited", false)},
		{Op: source.OpAdd, Pod: pod("priv", true)},
		{Pod: pod("zero", false)}, // the zero Op is no operation
	}, false, logError)
	want := []struct {
		op   runner.Op
		name string
	}{{runner.OpRemove, "gone"}, {runner.OpAdd, "new"}, {runner.OpUpdate, "edited"}}
	if len(got) != len(want) {
		t.Fatalf("updates = %+v", got)
	}
	for i, w := range want {
		if got[i].Op != w.op || len(got[i].Pods) != 1 || got[i].Pods[0].Name != w.name {
			t.Errorf("update %d = %+v, want %v %s", i, got[i], w.op, w.name)
		}
	}
	if strings.Join(logged, "; ") != "pod refused; pod change ignored: unknown operation" {
		t.Errorf("logged %q", logged)
	}
}

func TestAllPodsFirstArgumentWins(t *testing.T) {
	opts := manifest.Options{NodeName: "node1"}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: nginx\n"
	a, err := manifest.Parse("/a.yaml", []byte(pod), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := manifest.Parse("/b.yaml", []byte(pod), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := allPods([]*manifest.Snapshot{a, b}); exitCode(err) != 2 ||
		!strings.Contains(err.Error(), "/b.yaml: pod default/web-node1 is also defined in /a.yaml") {
		t.Errorf("err = %v", err)
	}
	got, err := allPods([]*manifest.Snapshot{a})
	if err != nil || len(got) != 1 || got[0].Pod != a.Pods[0] || got[0].Source != "/a.yaml" {
		t.Errorf("allPods = %+v, %v", got, err)
	}
}
