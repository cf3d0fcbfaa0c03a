package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	sigsyaml "sigs.k8s.io/yaml"
)

// realWorldOutcome is what podrun makes of one static pod manifest that a
// real project publishes (testdata/realworld, each file's provenance in its
// header). A manifest either runs, with exactly the warnings listed, or is
// refused, with exactly the refusals listed. Each warning or refusal is
// written "line: field: message", as podrun prints it after the file name.
type realWorldOutcome struct {
	warnings []string
	refused  []string
}

// realWorld declares the outcome of every file in testdata/realworld. A file
// missing from the table, or an entry without its file, fails the test.
//
// Every one of these manifests is one a kubelet runs: kube-apiserver's
// validation accepts each (TestRealWorldManifests checks it apart from
// podrun), and the kubelet drops unknown fields. So podrun must run each one
// or refuse it only with a refusal of its own ("Forbidden: podrun ..."),
// naming a field it cannot honour; never with a validation error.
var realWorld = map[string]realWorldOutcome{
	// kubeadm's HA guide (docs/ha-considerations.md).
	"kubeadm-ha-keepalived.yaml":   {},
	"kubeadm-ha-haproxy.yaml":      {},
	"kubeadm-ha-kube-vip-bgp.yaml": {},

	// kube-vip.
	"kube-vip-manifest-pod-arp.yaml": {},
	"kube-vip-e2e-arp.yaml":          {},

	// kubespray's node and control-plane static pods.
	"kubespray-haproxy.yaml":     {},
	"kubespray-nginx-proxy.yaml": {},
	"kubespray-kube-vip.yaml":    {},

	// kube-up on GCE.
	"gce-etcd.yaml":                    {},
	"gce-kube-apiserver.yaml":          {},
	"gce-kube-controller-manager.yaml": {},
	"gce-kube-scheduler.yaml":          {},
	"gce-kube-addon-manager.yaml":      {},
	"gce-kube-proxy.yaml":              {},
	// Two real mistakes of the template, which the kubelet drops without a
	// word: `component:` written in metadata rather than under labels, and
	// the sed that fills `{{ container_security_context }}:` with
	// "securityContext:", leaving the key "securityContext:" (two colons),
	// so the container's allowPrivilegeEscalation: false and drop: [ALL]
	// never apply. The warnings are the point of podrun's behaviour here.
	"gce-konnectivity-server.yaml": {warnings: []string{
		`23: metadata.component: unknown field, ignored`,
		`36: spec.containers[0].securityContext:: unknown field (did you mean "securityContext"?), ignored`,
	}},

	// kops.
	"kops-kube-apiserver.yaml":                   {},
	"kops-kube-proxy.yaml":                       {},
	"kops-etcd-manager-main-initcontainers.yaml": {},
	// kops mounts the etcd images as image volumes on every cluster it
	// supports (Kubernetes >= 1.32); podrun mounts a read-only copy.
	"kops-etcd-manager-main.yaml": {},

	// OpenShift.
	"openshift-kube-apiserver.yaml":           {},
	"openshift-bootstrap-kube-apiserver.yaml": {},

	// RKE2.
	"rke2-etcd.yaml":           {},
	"rke2-kube-apiserver.yaml": {},
	// RKE2 with `selinux: true` labels its pods' processes.
	"rke2-etcd-cis-selinux.yaml": {refused: []string{
		`106: spec.securityContext.seLinuxOptions: Forbidden: podrun does not support this field: podrun does not pass SELinux labels to Docker yet`,
	}},

	// Typhoon (terraform-render-bootstrap).
	"typhoon-kube-apiserver.yaml":          {},
	"typhoon-kube-controller-manager.yaml": {},
	"typhoon-kube-scheduler.yaml":          {},

	// Talos.
	"talos-kube-apiserver.yaml":          {},
	"talos-kube-controller-manager.yaml": {},
	"talos-kube-scheduler.yaml":          {},
}

func TestRealWorldManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/realworld/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range realWorld {
		if !slices.Contains(names, name) {
			t.Errorf("%s: declared in realWorld, but testdata/realworld has no such file", name)
		}
	}
	for _, name := range names {
		want, declared := realWorld[name]
		t.Run(name, func(t *testing.T) {
			if !declared {
				t.Fatalf("no outcome declared in realWorld for testdata/realworld/%s", name)
			}
			data, err := os.ReadFile(filepath.Join("testdata/realworld", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("# Provenance: ")) {
				t.Errorf("the file does not start with its provenance (# Provenance: ...)")
			}
			kubeAPIServerAccepts(t, data)

			snap, err := Parse(name, data, testOptions())
			if len(want.refused) > 0 {
				checkRefused(t, name, snap, err, want.refused)
				return
			}
			if err != nil {
				t.Fatalf("a manifest a kubelet runs must run: %v", err)
			}
			if got := withoutSource(name, snap.Warnings); !slices.Equal(got, want.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", got, want.warnings)
			}
			checkRuns(t, snap)

			// --strict makes exactly the warnings errors.
			strict := testOptions()
			strict.Strict = true
			_, err = Parse(name, data, strict)
			var wantStrict []string
			for _, w := range want.warnings {
				wantStrict = append(wantStrict, strings.TrimSuffix(w, ", ignored")+" (--strict)")
			}
			if got := errorLines(t, err); !slices.Equal(got, wantStrict) {
				t.Errorf("with Strict, errors:\n got %q\nwant %q", got, wantStrict)
			}

			// A JSON manifest is read as the kubelet reads it on the
			// machine, without the provenance comment: as JSON.
			if body := withoutLeadingComments(data); len(body) > 0 && body[0] == '{' {
				jsnap, err := Parse(name, body, testOptions())
				if err != nil {
					t.Fatalf("as JSON: %v", err)
				}
				if len(jsnap.Warnings) != len(snap.Warnings) || len(jsnap.Pods) != 1 {
					t.Fatalf("as JSON: %d pods, warnings %q", len(jsnap.Pods), jsnap.Warnings)
				}
				if !equality.Semantic.DeepEqual(jsnap.Pods[0].Spec, snap.Pods[0].Spec) {
					t.Errorf("as JSON the pod differs from the pod read as YAML")
				}
			}
		})
	}
}

// kubeAPIServerAccepts checks, apart from podrun's own decoding, that
// kube-apiserver's validation accepts the manifest as the kubelet decodes it
// (unknown fields dropped): the premise that a kubelet runs it.
func kubeAPIServerAccepts(t *testing.T, data []byte) {
	t.Helper()
	var pod v1.Pod
	if err := sigsyaml.Unmarshal(data, &pod); err != nil {
		t.Fatalf("the kubelet's decoding fails: %v", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if errs := apiValidatePod(&pod); len(errs) > 0 {
		t.Errorf("kube-apiserver's validation rejects the manifest, so it is no test of podrun: %v", errs.ToAggregate())
	}
}

// checkRuns checks that the snapshot holds the one pod, as a static pod of
// the node.
func checkRuns(t *testing.T, snap *Snapshot) {
	t.Helper()
	if len(snap.Pods) != 1 {
		t.Fatalf("got %d pods, want 1", len(snap.Pods))
	}
	pod := snap.Pods[0]
	if pod.Spec.NodeName != "node1" || !strings.HasSuffix(pod.Name, "-node1") || pod.UID == "" {
		t.Errorf("pod %s/%s (uid %q, node %q) lacks its static identity", pod.Namespace, pod.Name, pod.UID, pod.Spec.NodeName)
	}
}

// checkRefused checks that a refused manifest is refused with exactly the
// refusals wanted, each one of podrun's own.
func checkRefused(t *testing.T, name string, snap *Snapshot, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("runs, want refused with %q", want)
	}
	got := errorLines(t, err)
	if !slices.Equal(got, want) {
		t.Errorf("refusals:\n got %q\nwant %q", got, want)
	}
	var list ErrorList
	errors.As(err, &list)
	for _, e := range list {
		if e.Source != name {
			t.Errorf("error names source %q, want %q", e.Source, name)
		}
		if !strings.HasPrefix(e.Message, "Forbidden: podrun ") {
			t.Errorf("%s: not a podrun refusal: a kubelet runs this manifest, so only a field podrun cannot honour may refuse it", e)
		}
	}
	if len(snap.Pods) != 0 {
		t.Errorf("a refused manifest yields %d pods", len(snap.Pods))
	}
}

// errorLines returns the problems of err as "line: field: message".
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error is not an ErrorList: %v", err)
	}
	var lines []string
	for _, e := range list {
		lines = append(lines, fmt.Sprintf("%d: %s: %s", e.Line, e.Field, e.Message))
	}
	return lines
}

// withoutSource drops the "source:" that begins each warning.
func withoutSource(source string, warnings []string) []string {
	var out []string
	for _, w := range warnings {
		out = append(out, strings.TrimPrefix(w, source+":"))
	}
	return out
}

// withoutLeadingComments drops the comment lines a file starts with.
func withoutLeadingComments(data []byte) []byte {
	for bytes.HasPrefix(data, []byte("#")) {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
	return data
}

// The corpus covers the projects it was collected from: a check that no
// project's manifests are lost by accident when files are renamed.
func TestRealWorldCorpusCoversProjects(t *testing.T) {
	for _, prefix := range []string{"kubeadm-ha-", "kube-vip-", "kubespray-", "gce-", "kops-", "openshift-", "rke2-", "typhoon-", "talos-"} {
		n := 0
		for name := range realWorld {
			if strings.HasPrefix(name, prefix) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no manifest named %s*", prefix)
		}
	}
}
