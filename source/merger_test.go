package source

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/manifest"
)

// snapAt parses data as the content of source, read at a given second (so
// config.seen differs between reads).
func snapAt(t *testing.T, source, data string, second int) *manifest.Snapshot {
	t.Helper()
	opts := testOptions()
	opts.Now = func() time.Time { return time.Date(2025, 1, 1, 0, 0, second, 0, time.UTC) }
	snap, err := manifest.Parse(source, []byte(data), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return snap
}

// changes formats changes as "ADD web-node1@image ...", for comparing.
func changes(cs []PodChange) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %s@%s", c.Op, c.Pod.Name, c.Pod.Spec.Containers[0].Image))
	}
	return strings.Join(parts, " ")
}

func expectChanges(t *testing.T, got []PodChange, want string) {
	t.Helper()
	if changes(got) != want {
		t.Errorf("changes = %q, want %q", changes(got), want)
	}
}

func TestMergerAddUpdateRemove(t *testing.T) {
	const src = "/etc/podrun/pods.yaml"
	m := NewMerger([]string{src})
	if m.Ready() {
		t.Error("ready before any update")
	}
	one := snapAt(t, src, podImage("web", "nginx:1")+"---\n"+podImage("db", "pg:1"), 1)
	expectChanges(t, m.Update(Update{Source: src, Snapshot: one}), "ADD web-node1@nginx:1 ADD db-node1@pg:1")
	if !m.Ready() {
		t.Error("not ready after a good update")
	}
	uid := m.Pods()[0].UID

	// Read again later: only config.seen differs. No change, and the pod
	// keeps the config.seen of its first read.
	again := snapAt(t, src, podImage("web", "nginx:1")+"---\n"+podImage("db", "pg:1"), 2)
	if again.Pods[0].Annotations[manifest.AnnotationConfigSeen] == one.Pods[0].Annotations[manifest.AnnotationConfigSeen] {
		t.Fatal("test setup: config.seen should differ")
	}
	expectChanges(t, m.Update(Update{Source: src, Snapshot: again}), "")
	if seen := m.Pods()[0].Annotations[manifest.AnnotationConfigSeen]; seen != one.Pods[0].Annotations[manifest.AnnotationConfigSeen] {
		t.Errorf("config.seen = %s, want the first read's", seen)
	}

	// A content change is an UPDATE of the same UID.
	edited := snapAt(t, src, podImage("web", "nginx:2")+"---\n"+podImage("db", "pg:1"), 3)
	got := m.Update(Update{Source: src, Snapshot: edited})
	expectChanges(t, got, "UPDATE web-node1@nginx:2")
	if got[0].Pod.UID != uid {
		t.Errorf("UPDATE changed the UID")
	}

	// A bad read carries the last good snapshot: nothing changes.
	expectChanges(t, m.Update(Update{Source: src, Snapshot: edited, Err: errors.New("pods.yaml:3: bad")}), "")
	if err := m.Errors()[src]; err == nil || !strings.Contains(err.Error(), "pods.yaml:3: bad") {
		t.Errorf("Errors = %v", m.Errors())
	}

	// Gone from a good snapshot: REMOVE, with the pod as last desired.
	dbOnly := snapAt(t, src, podImage("db", "pg:1"), 4)
	expectChanges(t, m.Update(Update{Source: src, Snapshot: dbOnly}), "REMOVE web-node1@nginx:2")
	if len(m.Errors()) != 0 {
		t.Errorf("Errors = %v after a good update", m.Errors())
	}
	if pods := m.Pods(); len(pods) != 1 || pods[0].Name != "db-node1" {
		t.Errorf("Pods = %v", podNames(&manifest.Snapshot{Pods: pods}))
	}
}

func TestMergerConflictFirstSourceWinsWithoutFlapping(t *testing.T) {
	const first, second = "/etc/kubernetes/manifests", "https://config.example/pods.yaml"
	m := NewMerger([]string{first, second})
	fromSecond := snapAt(t, second, podImage("web", "from-url"), 1)
	fromFirst := snapAt(t, first, podImage("web", "from-file"), 1)

	// The second source speaks first: its pod runs...
	expectChanges(t, m.Update(Update{Source: second, Snapshot: fromSecond}), "ADD web-node1@from-url")
	// ... until the first source defines the same name: the first wins.
	expectChanges(t, m.Update(Update{Source: first, Snapshot: fromFirst}), "REMOVE web-node1@from-url ADD web-node1@from-file")
	err := m.Errors()[second]
	if err == nil || !strings.Contains(err.Error(), "pod default/web conflicts with the one defined at "+first+":4 (source "+first+" comes first)") {
		t.Errorf("Errors = %v", m.Errors())
	}
	if _, bad := m.Errors()[first]; bad {
		t.Errorf("the winner has no error")
	}
	// Both sources keep sending: nothing flaps.
	for i := range 3 {
		expectChanges(t, m.Update(Update{Source: second, Snapshot: snapAt(t, second, podImage("web", "from-url"), 10+i)}), "")
		expectChanges(t, m.Update(Update{Source: first, Snapshot: snapAt(t, first, podImage("web", "from-file"), 10+i)}), "")
	}
	// The first source drops it: the second's runs again.
	expectChanges(t, m.Update(Update{Source: first, Snapshot: snapAt(t, first, "apiVersion: v1\nkind: List\nitems: []\n", 20)}),
		"REMOVE web-node1@from-file ADD web-node1@from-url")
	if len(m.Errors()) != 0 {
		t.Errorf("Errors = %v", m.Errors())
	}
}

// TestMergerConflictNamesAURLWithoutCredentials: a conflict with a URL
// source that comes first names it, and where it defines the pod, without
// the URL's credentials.
func TestMergerConflictNamesAURLWithoutCredentials(t *testing.T) {
	const first, second = "https://deploy:S3CRET@config.example/pods.yaml?sig=x", "/etc/kubernetes/manifests"
	m := NewMerger([]string{first, second})
	m.Update(Update{Source: first, Snapshot: snapAt(t, first, podImage("web", "from-url"), 1)})
	m.Update(Update{Source: second, Snapshot: snapAt(t, second, podImage("web", "from-file"), 1)})
	err := m.Errors()[second]
	const want = "conflicts with the one defined at https://config.example/pods.yaml:4 (source https://config.example/pods.yaml comes first)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Errors = %v, want the conflict named %q", m.Errors(), want)
	}
}

func TestMergerReadyWaitsForEverySource(t *testing.T) {
	const a, b = "/etc/podrun", "https://config.example/pods.yaml"
	m := NewMerger([]string{a, b})
	m.Update(Update{Source: a, Snapshot: snapAt(t, a, podNamed("web"), 1)})
	if m.Ready() {
		t.Error("ready with source b silent")
	}
	// b's first fetch fails: it has spoken, but has nothing usable.
	changes := m.Update(Update{Source: b, Err: errors.New("connection refused"), Failing: []string{b}})
	if m.Ready() || len(changes) != 0 {
		t.Errorf("ready = %v, changes = %v after a failed first fetch", m.Ready(), changes)
	}
	if !m.Failing()[b] || len(m.Failing()) != 1 {
		t.Errorf("Failing = %v", m.Failing())
	}
	m.Update(Update{Source: b, Snapshot: snapAt(t, b, "apiVersion: v1\nkind: List\nitems: []\n", 1)})
	if !m.Ready() {
		t.Error("not ready once every source delivered")
	}
	if len(m.Failing()) != 0 {
		t.Errorf("Failing = %v", m.Failing())
	}
	// A source nobody configured does not hold readiness back.
	m.Update(Update{Source: "/other", Err: errors.New("x")})
	if !m.Ready() {
		t.Error("an unconfigured source held readiness back")
	}
}

func TestMergerFailingIsTheUnion(t *testing.T) {
	m := NewMerger([]string{"/d", "http://u"})
	m.Update(Update{Source: "/d", Snapshot: &manifest.Snapshot{}, Err: errors.New("x"), Failing: []string{"/d/a.yaml", "/d/b.yaml"}})
	m.Update(Update{Source: "http://u", Err: errors.New("y"), Failing: []string{"http://u"}})
	if f := m.Failing(); len(f) != 3 || !f["/d/a.yaml"] || !f["/d/b.yaml"] || !f["http://u"] {
		t.Errorf("Failing = %v", f)
	}
	m.Update(Update{Source: "/d", Snapshot: &manifest.Snapshot{}})
	if f := m.Failing(); len(f) != 1 || !f["http://u"] {
		t.Errorf("Failing = %v", f)
	}
}

func TestMergerObjects(t *testing.T) {
	cm := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  k: " + value + "\n"
	}
	const a, b = "/a", "/b"
	m := NewMerger([]string{a, b})
	m.Update(Update{Source: b, Snapshot: snapAt(t, b, cm("from-b")+"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  p: w\n", 1)})
	m.Update(Update{Source: a, Snapshot: snapAt(t, a, cm("from-a"), 1)})
	cms, secrets := m.Objects()
	if len(cms) != 1 || cms[0].Data["k"] != "from-a" || len(secrets) != 1 || string(secrets[0].Data["p"]) != "w" {
		t.Errorf("Objects = %v, %v", cms, secrets)
	}
	if err := m.Errors()[b]; err == nil || !strings.Contains(err.Error(), "ConfigMap default/conf conflicts") {
		t.Errorf("Errors = %v", m.Errors())
	}
	// Conflicts: the same problem, with its kind, for the caller to report.
	conflicts := m.Conflicts()
	if len(conflicts) != 1 || conflicts[0].Source != b || conflicts[0].Kind != "ConfigMap" ||
		conflicts[0].Problem.Error() != m.Errors()[b].Error() ||
		!strings.Contains(conflicts[0].Problem.Error(), "(source "+a+" comes first); the first one is kept") {
		t.Errorf("Conflicts = %+v", conflicts)
	}
	// Copies: the caller may not change the merger's state.
	cms[0].Data["k"] = "changed"
	if cms, _ := m.Objects(); cms[0].Data["k"] != "from-a" {
		t.Error("Objects returned the merger's own ConfigMap")
	}
}

// TestMergerAPIObjectsApartFromLocalOnes: a ConfigMap or Secret of the
// apiserver and one of a manifest named alike do not conflict, as each
// serves only its own source's pods; both are kept, each marked with its
// source (a manifest cannot mark its objects as the API's).
func TestMergerAPIObjectsApartFromLocalOnes(t *testing.T) {
	const local = "/etc/kubernetes/manifests"
	m := NewMerger([]string{local, DefaultAPIServerSourceName})
	m.Update(Update{Source: local, Snapshot: snapAt(t, local, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"+
		"  annotations: {kubernetes.io/config.source: api}\nstringData:\n  p: local\n", 1)})
	api := &v1.Secret{Data: map[string][]byte{"p": []byte("api")}}
	api.Name, api.Namespace = "s", "default"
	manifest.SetConfigSource(api, manifest.ConfigSourceAPI)
	m.Update(Update{Source: DefaultAPIServerSourceName, Snapshot: &manifest.Snapshot{Source: DefaultAPIServerSourceName, Secrets: []*v1.Secret{api}}})

	if c := m.Conflicts(); len(c) != 0 {
		t.Errorf("Conflicts = %+v, want none", c)
	}
	_, secrets := m.Objects()
	byValue := map[string]bool{}
	for _, s := range secrets {
		byValue[string(s.Data["p"])] = manifest.FromAPI(s)
	}
	if len(secrets) != 2 || byValue["local"] || !byValue["api"] {
		t.Errorf("Secrets by value, marked the API's: %v; want local (not the API's) and api", byValue)
	}
}

// TestMergerRuntimeClasses: RuntimeClasses are merged as ConfigMaps are,
// by name alone: the first source's wins, the other is a conflict.
func TestMergerRuntimeClasses(t *testing.T) {
	rc := func(name, handler string) string {
		return "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: " + name + "\nhandler: " + handler + "\n"
	}
	const a, b = "/a", "/b"
	m := NewMerger([]string{a, b})
	m.Update(Update{Source: b, Snapshot: snapAt(t, b, rc("fast", "crun")+"---\n"+rc("safe", "runsc"), 1)})
	m.Update(Update{Source: a, Snapshot: snapAt(t, a, rc("fast", "runc"), 1)})
	got := map[string]string{}
	for _, rc := range m.RuntimeClasses() {
		got[rc.Name] = rc.Handler
	}
	if len(got) != 2 || got["fast"] != "runc" || got["safe"] != "runsc" {
		t.Errorf("RuntimeClasses = %v", got)
	}
	conflicts := m.Conflicts()
	if len(conflicts) != 1 || conflicts[0].Source != b || conflicts[0].Kind != "RuntimeClass" ||
		!strings.Contains(conflicts[0].Problem.Error(), "RuntimeClass fast conflicts") {
		t.Errorf("Conflicts = %+v", conflicts)
	}
	m.RuntimeClasses()[0].Handler = "changed"
	if m.RuntimeClasses()[0].Handler == "changed" {
		t.Error("RuntimeClasses returned the merger's own object")
	}
	// A change of a RuntimeClass alone is a new update to send.
	u1 := Update{Source: a, Snapshot: snapAt(t, a, rc("fast", "runc"), 1)}
	u2 := Update{Source: a, Snapshot: snapAt(t, a, rc("fast", "crun"), 1)}
	if fingerprint(u1) == fingerprint(u2) {
		t.Error("the fingerprint does not see a RuntimeClass's handler")
	}
}

func TestMergerReturnsCopies(t *testing.T) {
	m := NewMerger([]string{"/a"})
	snap := snapAt(t, "/a", podNamed("web"), 1)
	got := m.Update(Update{Source: "/a", Snapshot: snap})
	got[0].Pod.Spec.Containers[0].Image = "changed"
	m.Pods()[0].Spec.Containers[0].Image = "changed"
	if snap.Pods[0].Spec.Containers[0].Image == "changed" || m.Pods()[0].Spec.Containers[0].Image == "changed" {
		t.Error("a change of a returned pod reached the merger or the snapshot")
	}
}

func TestMergerUIDConflict(t *testing.T) {
	// metadata.uid, when set, wins: two sources may then give one UID to
	// pods of different names.
	withUID := func(name string) string {
		return strings.Replace(podNamed(name), "metadata:\n", "metadata:\n  uid: 0b8d3c2e-0000-4000-8000-000000000001\n", 1)
	}
	m := NewMerger([]string{"/a", "/b"})
	m.Update(Update{Source: "/a", Snapshot: snapAt(t, "/a", withUID("one"), 1)})
	expectChanges(t, m.Update(Update{Source: "/b", Snapshot: snapAt(t, "/b", withUID("two"), 1)}), "")
	if err := m.Errors()["/b"]; err == nil || !strings.Contains(err.Error(), "pod UID 0b8d3c2e-0000-4000-8000-000000000001 conflicts") {
		t.Errorf("Errors = %v", m.Errors())
	}
}

// TestMergerWithFileSource runs a directory source into a merger, as
// `podrun watch` does.
func TestMergerWithFileSource(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/web.yaml", podImage("web", "nginx:1"), 0o644)
	out := startSource(t, fileSource(t, dir).Run)
	m := NewMerger([]string{dir})
	u := waitFor(t, out, "the first scan", pods("web"))
	expectChanges(t, m.Update(u), "ADD web-node1@nginx:1")
	atomicWrite(t, dir+"/web.yaml", "kind: [\n")
	u = waitFor(t, out, "the error", errContains("invalid YAML"))
	expectChanges(t, m.Update(u), "")
	atomicWrite(t, dir+"/web.yaml", podImage("web", "nginx:2"))
	u = waitFor(t, out, "the fix", noErr)
	expectChanges(t, m.Update(u), "UPDATE web-node1@nginx:2")
}
