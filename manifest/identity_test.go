package manifest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func parsePod(t *testing.T, source, data string, opts Options) *Snapshot {
	t.Helper()
	snap, err := Parse(source, []byte(data), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(snap.Pods) != 1 {
		t.Fatalf("got %d pods", len(snap.Pods))
	}
	return snap
}

func TestStaticPodIdentity(t *testing.T) {
	opts := testOptions()
	base := parsePod(t, "/etc/podrun/web.yaml", minimalPod, opts).Pods[0]

	if base.Name != "web-node1" || base.Namespace != "default" || base.Spec.NodeName != "node1" {
		t.Errorf("identity = %s/%s on %s", base.Namespace, base.Name, base.Spec.NodeName)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(string(base.UID)) {
		t.Errorf("UID %q is not a version 8 UUID", base.UID)
	}
	want := map[string]string{
		AnnotationConfigSource: "file",
		AnnotationSource:       "/etc/podrun/web.yaml",
		AnnotationConfigSeen:   "2025-01-02T03:04:05.000000006Z",
		AnnotationConfigHash:   ContentHash(base),
	}
	for k, v := range want {
		if got := base.Annotations[k]; got != v {
			t.Errorf("annotation %s = %q, want %q", k, got, v)
		}
	}

	t.Run("same manifest, same UID and hash", func(t *testing.T) {
		later := opts
		later.Now = func() time.Time { return time.Now() }
		again := parsePod(t, "/etc/podrun/web.yaml", minimalPod, later).Pods[0]
		if again.UID != base.UID || again.Annotations[AnnotationConfigHash] != base.Annotations[AnnotationConfigHash] {
			t.Errorf("UID %s/%s, hash %s/%s", again.UID, base.UID, again.Annotations[AnnotationConfigHash], base.Annotations[AnnotationConfigHash])
		}
	})
	t.Run("content edit: same UID, new hash", func(t *testing.T) {
		edited := parsePod(t, "/etc/podrun/web.yaml", strings.Replace(minimalPod, "nginx:1.27", "nginx:1.28", 1), opts).Pods[0]
		if edited.UID != base.UID {
			t.Errorf("UID changed on a content edit: %s -> %s", base.UID, edited.UID)
		}
		if edited.Annotations[AnnotationConfigHash] == base.Annotations[AnnotationConfigHash] {
			t.Errorf("config hash did not change on a content edit")
		}
	})
	t.Run("a default written out is the same content", func(t *testing.T) {
		explicit := strings.Replace(minimalPod, "    image: nginx:1.27\n", "    image: nginx:1.27\n    imagePullPolicy: IfNotPresent\n", 1)
		same := parsePod(t, "/etc/podrun/web.yaml", explicit, opts).Pods[0]
		if same.Annotations[AnnotationConfigHash] != base.Annotations[AnnotationConfigHash] {
			t.Errorf("hash differs for a manifest that spells out a default")
		}
	})
	t.Run("different source, different UID", func(t *testing.T) {
		other := parsePod(t, "/etc/podrun/other/web.yaml", minimalPod, opts).Pods[0]
		if other.UID == base.UID {
			t.Errorf("two sources share UID %s", base.UID)
		}
	})
	t.Run("different node, different UID", func(t *testing.T) {
		o := opts
		o.NodeName = "node2"
		other := parsePod(t, "/etc/podrun/web.yaml", minimalPod, o).Pods[0]
		if other.UID == base.UID || other.Name != "web-node2" {
			t.Errorf("node2: UID %s, name %s", other.UID, other.Name)
		}
	})
	t.Run("explicit default namespace is the same pod", func(t *testing.T) {
		ns := strings.Replace(minimalPod, "name: web", "name: web\n  namespace: default", 1)
		same := parsePod(t, "/etc/podrun/web.yaml", ns, opts).Pods[0]
		if same.UID != base.UID {
			t.Errorf("namespace: default changed the UID")
		}
	})
	t.Run("metadata.uid wins", func(t *testing.T) {
		withUID := strings.Replace(minimalPod, "name: web", "name: web\n  uid: 1234-abcd", 1)
		pod := parsePod(t, "/etc/podrun/web.yaml", withUID, opts).Pods[0]
		if pod.UID != types.UID("1234-abcd") {
			t.Errorf("UID = %s, want the manifest's", pod.UID)
		}
	})
	t.Run("URL source", func(t *testing.T) {
		pod := parsePod(t, "https://example.com/web.yaml", minimalPod, opts).Pods[0]
		if pod.Annotations[AnnotationConfigSource] != ConfigSourceHTTP || pod.Annotations[AnnotationSource] != "https://example.com/web.yaml" {
			t.Errorf("annotations = %v", pod.Annotations)
		}
	})
}

func TestContentHashIgnoresPodrunAnnotations(t *testing.T) {
	pod := parsePod(t, "web.yaml", minimalPod, testOptions()).Pods[0]
	h := ContentHash(pod)
	c := pod.DeepCopy()
	c.Annotations[AnnotationConfigSeen] = "another time"
	c.Annotations[AnnotationConfigHash] = "x"
	c.Status.Phase = "Running"
	if ContentHash(c) != h {
		t.Errorf("hash depends on podrun's annotations or status")
	}
	c.Annotations["team"] = "a"
	if ContentHash(c) == h {
		t.Errorf("hash ignores a user annotation")
	}
	if len(h) != 64 {
		t.Errorf("hash %q is not hex SHA-256", h)
	}
}

func TestStaticPodUIDIsUnambiguous(t *testing.T) {
	a := StaticPodUID("n", "src", "ab", "c")
	b := StaticPodUID("n", "src", "a", "bc")
	if a == b {
		t.Errorf("namespace/name boundaries collide")
	}
}

// TestRedactedSource: a URL is shown without what may carry credentials;
// a path, and a URL without them, as they are.
func TestRedactedSource(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h.example:8443/m.yaml?sig=x#f": "https://h.example:8443/m.yaml",
		"HTTP://token@h/m.yaml?":                    "http://h/m.yaml",
		"https://h.example/m.yaml":                  "https://h.example/m.yaml",
		"/etc/kubernetes/manifests":                 "/etc/kubernetes/manifests",
		"http://%zz":                                "(a manifest URL that does not parse)",
		"https://deploy:S3CRET/x@config.example/p":  "(a manifest URL that does not parse)",
	} {
		if got := RedactedSource(in); got != want {
			t.Errorf("RedactedSource(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestURLCredentialsStayOutOfMessages: what Parse says of a URL source
// (errors, warnings, where a definition is) names it without its userinfo
// and query, which may carry credentials, while its pods are still
// identified by the whole URL, so that their UIDs stay what they were.
func TestURLCredentialsStayOutOfMessages(t *testing.T) {
	const url = "https://deploy:S3CRET@config.example/pods.yaml?sig=x"
	opts := testOptions()
	data := strings.Replace(minimalPod, "spec:", "spec:\n  notAField: 1", 1) + // a warning
		"---\n" + strings.Replace(podNamed("bad"), "nginx:1.27", "", 1) + // an error
		"---\n" + minimalPod // a second definition of web
	snap, err := Parse(url, []byte(data), opts)
	if err == nil {
		t.Fatal("Parse of a manifest with problems: no error")
	}
	shown := []string{err.Error(), snap.Source}
	shown = append(shown, snap.Warnings...)
	for _, p := range snap.Pods {
		shown = append(shown, snap.Origin(p))
		shown = append(shown, snap.WarningsOf(p)...)
	}
	for _, s := range shown {
		if strings.Contains(s, "S3CRET") || strings.Contains(s, "sig=x") {
			t.Errorf("shown with the URL's credentials: %q", s)
		}
	}
	if !strings.Contains(err.Error(), "https://config.example/pods.yaml:") {
		t.Errorf("error %q does not name the URL", err)
	}
	if len(snap.Pods) == 0 {
		t.Fatal("no valid pod in the snapshot")
	}
	pod := snap.Pods[0]
	if pod.Annotations[AnnotationSource] != url || pod.UID != StaticPodUID(opts.NodeName, url, "default", "web") {
		t.Errorf("pod identified by %q as %s, want by the whole URL", pod.Annotations[AnnotationSource], pod.UID)
	}
}
