package source

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/manifest"
)

// fakeSource sends what a test gives it, as a live source would.
type fakeSource struct {
	updates chan Update
	done    chan struct{}
}

func newFakeSource() *fakeSource {
	return &fakeSource{updates: make(chan Update), done: make(chan struct{})}
}

func (f *fakeSource) Run(ctx context.Context, out chan<- Update) {
	defer close(f.done)
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-f.updates:
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}

// TestMux runs two sources through a mux and checks what it hands on and
// what it answers other goroutines, after each update.
func TestMux(t *testing.T) {
	// The URL carries credentials, which /metrics must not show: its
	// series are of the URL without them.
	const dir, url = "/etc/podrun", "https://deploy:S3CRET@config.example/pods.yaml?sig=x"
	a, b := newFakeSource(), newFakeSource()
	reg := prometheus.NewRegistry()
	mux := NewMux([]Named{{Name: dir, Source: a}, {Name: url, Source: b}}, NewMetrics(reg))
	if got := strings.Join(mux.Names(), " "); got != dir+" "+url {
		t.Errorf("Names = %s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	applied := make(chan Changes)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		mux.Run(ctx, func(c Changes) { applied <- c })
	}()
	// send gives u to src and returns what the mux handed on for it.
	send := func(src *fakeSource, u Update) Changes {
		t.Helper()
		select {
		case src.updates <- u:
		case <-time.After(failAfter):
			t.Fatal("the source was not run")
		}
		select {
		case c := <-applied:
			return c
		case <-time.After(failAfter):
			t.Fatal("no changes handed on")
		}
		return Changes{}
	}

	if mux.Ready() {
		t.Error("ready before any update")
	}
	web := snapAt(t, dir, podImage("web", "nginx:1")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n", 1)
	c := send(a, Update{Source: dir, Snapshot: web})
	expectChanges(t, c.Pods, "ADD web-node1@nginx:1")
	if c.Source != dir || len(c.ConfigMaps) != 1 || c.ConfigMaps[0].Name != "conf" {
		t.Errorf("changes = %+v", c)
	}
	if mux.Ready() {
		t.Error("ready with the URL silent")
	}
	if d := mux.Desired(); len(d) != 1 || !d[string(web.Pods[0].UID)] {
		t.Errorf("Desired = %v", d)
	}

	// The URL's first fetch fails: not ready, its pods kept, its error known.
	c = send(b, Update{Source: url, Err: errors.New("connection refused"), Failing: []string{url}})
	expectChanges(t, c.Pods, "")
	if mux.Ready() || !mux.Keep(url) || mux.Keep(dir) {
		t.Errorf("ready %v, keep url %v, keep dir %v", mux.Ready(), mux.Keep(url), mux.Keep(dir))
	}
	if err := mux.Errors()[url]; err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Errors = %v", mux.Errors())
	}
	if n := gauge(t, reg, "podrun_source_errors_total", manifest.RedactedSource(url)); n != 1 {
		t.Errorf("errors of %s = %v", manifest.RedactedSource(url), n)
	}

	// It recovers with a pod of the same name: the directory comes first.
	fromURL := snapAt(t, url, podImage("web", "from-url")+"---\n"+podNamed("db"), 1)
	c = send(b, Update{Source: url, Snapshot: fromURL})
	expectChanges(t, c.Pods, "ADD db-node1@nginx:1.27")
	if !mux.Ready() || mux.Keep(url) {
		t.Errorf("ready %v, keep url %v", mux.Ready(), mux.Keep(url))
	}
	if err := mux.Errors()[url]; err == nil || !strings.Contains(err.Error(), "pod default/web conflicts") {
		t.Errorf("Errors = %v", mux.Errors())
	}
	if pods := podNames(&manifest.Snapshot{Pods: mux.Pods()}); strings.Join(pods, ",") != "web-node1,db-node1" {
		t.Errorf("Pods = %v", pods)
	}
	if n := gauge(t, reg, "podrun_source_last_success_timestamp_seconds", "https://config.example/pods.yaml"); n == 0 {
		t.Error("no last success recorded under the URL without its credentials")
	}
	expectNoCredentials(t, mux)

	// An invalid manifest at the URL: its last good pods run, and carry
	// the problem, named without the URL's credentials.
	_, err := manifest.Parse(url, []byte(podImage("db", "")), testOptions())
	if err == nil {
		t.Fatal("a pod without an image parsed")
	}
	c = send(b, Update{Source: url, Snapshot: fromURL, Err: err})
	expectChanges(t, c.Pods, "")
	expectNoCredentials(t, mux)

	cancel()
	for _, done := range []<-chan struct{}{ran, a.done, b.done} {
		select {
		case <-done:
		case <-time.After(failAfter):
			t.Fatal("Run or a source did not return after its context ended")
		}
	}
}

// expectNoCredentials checks that the mux's errors, and the pods'
// source-error annotations, name the URL of TestMux without its
// credentials. (podrun.io/source is the whole URL, which identifies the
// pods: the servers of /pods show it redacted.)
func expectNoCredentials(t *testing.T, mux *Mux) {
	t.Helper()
	var shown []string
	for _, err := range mux.Errors() {
		shown = append(shown, err.Error())
	}
	annotated := 0
	for _, p := range mux.AnnotateErrors(mux.Pods()) {
		if e, ok := p.Annotations[AnnotationSourceError]; ok {
			annotated++
			shown = append(shown, e)
		}
	}
	if len(shown) < 2 || annotated == 0 {
		t.Errorf("errors and source-error annotations %q: want the URL's", shown)
	}
	for _, s := range shown {
		if strings.Contains(s, "S3CRET") || strings.Contains(s, "sig=x") {
			t.Errorf("shown with the URL's credentials: %q", s)
		}
	}
}

// gauge is the value of the series name{source=src} in reg, or 0.
func gauge(t *testing.T, reg *prometheus.Registry, name, src string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == src {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func TestMuxWithoutMetrics(t *testing.T) {
	mux := NewMux([]Named{{Name: "/a", Source: newFakeSource()}}, nil)
	c := mux.update(Update{Source: "/a", Err: errors.New("x")})
	if len(c.Pods) != 0 || mux.Ready() {
		t.Errorf("changes %+v, ready %v", c, mux.Ready())
	}
}

func TestAnnotateErrors(t *testing.T) {
	const dir, url = "/etc/kubernetes/manifests", "https://config.example/pods.yaml"
	pod := func(name, origin string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{manifest.AnnotationSource: origin}}}
	}
	etcd := pod("etcd", dir+"/etcd.yaml")
	api := pod("api", dir+"/kube-apiserver.yaml")
	remote := pod("remote", url)
	other := pod("other", "/srv/other.yaml")
	pods := []*v1.Pod{etcd, api, remote, other}

	if got := annotateErrors(pods, []string{dir, url}, nil); &got[0] != &pods[0] {
		t.Error("no errors: the pods as they are")
	}
	errs := map[string]error{
		dir: errors.New(dir + "/etcd.yaml:12: spec.containers[0].image: Required value\n" + dir + "/other.yaml:3: bad"),
		url: errors.New("fetch manifests: connection refused"),
	}
	got := annotateErrors(pods, []string{dir, url}, errs)
	if e := got[0].Annotations[AnnotationSourceError]; e != dir+"/etcd.yaml:12: spec.containers[0].image: Required value" {
		t.Errorf("etcd: %q, want its own file's problem only", e)
	}
	if got[1] != api || got[3] != other {
		t.Error("pods without a problem of their own must be passed as they are")
	}
	if e := got[2].Annotations[AnnotationSourceError]; e != "fetch manifests: connection refused" {
		t.Errorf("remote: %q", e)
	}
	if _, set := etcd.Annotations[AnnotationSourceError]; set {
		t.Error("the caller's pod was changed")
	}
}

// TestAnnotateErrorsMatchesTheWholeFileName: in a directory, a pod gets
// only the problems of its own file, matched by the file's whole name as
// the source lists it: a.yaml is good and ba.yaml, whose name ends with
// "a.yaml", is broken; a's pod must not carry ba.yaml's problem.
func TestAnnotateErrorsMatchesTheWholeFileName(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), podNamed("a"), 0o644)
	writeFile(t, filepath.Join(dir, "ba.yaml"), "kind: [\n", 0o644)
	out := startSource(t, fileSource(t, dir).Run)
	u := waitFor(t, out, "the first scan", pods("a"))
	if u.Err == nil {
		t.Fatal("ba.yaml's problem is not reported")
	}
	mux := NewMux([]Named{{Name: dir, Source: newFakeSource()}}, nil)
	mux.update(u)
	got := mux.AnnotateErrors(mux.Pods())
	if e, set := got[0].Annotations[AnnotationSourceError]; set {
		t.Errorf("pod a (a.yaml, good) carries ba.yaml's problem: %q", e)
	}
}

// TestAnnotateWarnings: a pod whose manifest had fields dropped carries the
// warnings of its own definition (for /pods and `ps -o wide`); the others
// are passed as they are.
func TestAnnotateWarnings(t *testing.T) {
	const path = "/etc/kubernetes/manifests/pods.yaml"
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: img:1\n    colour: blue\n" +
		"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\nspec:\n  containers:\n  - name: c\n    image: img:1\n"
	snap, err := manifest.Parse(path, []byte(data), manifest.Options{NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	mux := NewMux([]Named{{Name: path, Source: newFakeSource()}}, nil)
	mux.update(Update{Source: path, Snapshot: snap})
	pods := mux.Pods()
	got := mux.AnnotateWarnings(pods)
	if len(got) != 2 {
		t.Fatalf("pods = %d", len(got))
	}
	want := path + ":9: spec.containers[0].colour: unknown field, ignored"
	if w := got[0].Annotations[AnnotationManifestWarnings]; w != want {
		t.Errorf("a: %q, want %q", w, want)
	}
	if got[1] != pods[1] {
		t.Error("b has no warnings: it must be passed as it is")
	}
	if _, set := pods[0].Annotations[AnnotationManifestWarnings]; set {
		t.Error("the caller's pod was changed")
	}

	// The next version of the manifest, fixed: no warning is left.
	fixed, err := manifest.Parse(path, []byte(strings.Replace(data, "    colour: blue\n", "", 1)), manifest.Options{NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	mux.update(Update{Source: path, Snapshot: fixed})
	if w := mux.AnnotateWarnings(mux.Pods())[0].Annotations[AnnotationManifestWarnings]; w != "" {
		t.Errorf("after the fix: %q", w)
	}
}

func TestFromSource(t *testing.T) {
	const dir = "/etc/kubernetes/manifests"
	cases := []struct {
		origin, src string
		want        bool
	}{
		{dir + "/etcd.yaml", dir, true},
		{dir + "/etcd.yaml", dir + "/", true},
		{dir + "/etcd.yaml", dir + "/etcd.yaml", true},
		{dir + "/etcd.yaml", dir + "/kube-apiserver.yaml", false},
		{dir + "/sub/etcd.yaml", dir, false}, // not recursive
		{"/etc/kubernetes/other.yaml", dir, false},
		{"https://config.example/pods.yaml", "https://config.example/pods.yaml", true},
		{"https://config.example/pods.yaml", "https://config.example/other.yaml", false},
		{"-", "-", true},
		{"-", dir, false},
	}
	for _, c := range cases {
		if got := FromSource(c.origin, c.src); got != c.want {
			t.Errorf("FromSource(%q, %q) = %v, want %v", c.origin, c.src, got, c.want)
		}
	}
}

// A directory source given as "." (podrun run . in the manifests
// directory) names its files bare: "a.yaml:" is inside "ba.yaml:", and a
// pod of a.yaml must still not carry ba.yaml's problem.
func TestAnnotateErrorsOfASourceGivenAsDot(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), podNamed("a"), 0o644)
	writeFile(t, filepath.Join(dir, "ba.yaml"), "kind: [\n", 0o644)
	t.Chdir(dir)
	out := startSource(t, fileSource(t, ".").Run)
	u := waitFor(t, out, "the first scan", pods("a"))
	if u.Err == nil {
		t.Fatal("ba.yaml's problem is not reported")
	}
	mux := NewMux([]Named{{Name: ".", Source: newFakeSource()}}, nil)
	mux.update(u)
	got := mux.AnnotateErrors(mux.Pods())
	if e, set := got[0].Annotations[AnnotationSourceError]; set {
		t.Errorf("pod a (a.yaml, good) carries ba.yaml's problem: %q", e)
	}
}
