package source

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
)

// apiPodFixture is a pod as the apiserver returns it: defaulted, bound,
// with a status, a resourceVersion and managed fields.
func apiPodFixture() *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d9f", Namespace: "apps", UID: "0b6a3f6e-2c1d-4a57-9a55-5f0c1e7b8d11",
			ResourceVersion: "4711", Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		},
		Spec: v1.PodSpec{
			NodeName:                      "node1",
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.7"},
	}
}

func TestAPIPodKeepsIdentityAndAnnotates(t *testing.T) {
	seen := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	api := apiPodFixture()
	orig := api.DeepCopy()
	p, err := APIPod(api, "apiserver", seen)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "web-7d9f" || p.Namespace != "apps" || p.UID != api.UID || p.Spec.NodeName != "node1" {
		t.Errorf("identity changed: %s/%s %s on %s", p.Namespace, p.Name, p.UID, p.Spec.NodeName)
	}
	want := map[string]string{
		manifest.AnnotationSource:       "apiserver",
		manifest.AnnotationConfigSource: manifest.ConfigSourceAPI,
		manifest.AnnotationConfigSeen:   "2025-01-02T03:04:05.000000006Z",
		manifest.AnnotationConfigHash:   manifest.ContentHash(p),
	}
	for k, v := range want {
		if p.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
		}
	}
	if p.Status.Phase != "" || p.ResourceVersion != "" || p.ManagedFields != nil {
		t.Errorf("status, resourceVersion or managed fields kept: %+v %q %v", p.Status, p.ResourceVersion, p.ManagedFields)
	}
	// Defaults the runner relies on are there.
	if p.Spec.Containers[0].ImagePullPolicy == "" || p.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("not defaulted: pull policy %q, restart policy %q", p.Spec.Containers[0].ImagePullPolicy, p.Spec.RestartPolicy)
	}
	if !equalPods(api, orig) {
		t.Error("APIPod modified the informer's object")
	}
}

func equalPods(a, b *v1.Pod) bool {
	return manifest.ContentHash(a) == manifest.ContentHash(b) && a.ResourceVersion == b.ResourceVersion &&
		a.Status.Phase == b.Status.Phase && len(a.ManagedFields) == len(b.ManagedFields)
}

// TestAPIPodHash: what the API changes without the pod's content
// changing (status, resourceVersion, config.seen) keeps the hash; an edit
// and a graceful deletion change it (an UPDATE the runner acts on).
func TestAPIPodHash(t *testing.T) {
	seen := time.Unix(1700000000, 0)
	hash := func(mod func(*v1.Pod), at time.Time) string {
		api := apiPodFixture()
		if mod != nil {
			mod(api)
		}
		p, err := APIPod(api, "apiserver", at)
		if err != nil {
			t.Fatal(err)
		}
		return p.Annotations[manifest.AnnotationConfigHash]
	}
	base := hash(nil, seen)
	same := map[string]func(*v1.Pod){
		"status":          func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded },
		"resourceVersion": func(p *v1.Pod) { p.ResourceVersion = "9999" },
		"managed fields":  func(p *v1.Pod) { p.ManagedFields = nil },
	}
	for name, mod := range same {
		if hash(mod, seen) != base {
			t.Errorf("%s changed the hash", name)
		}
	}
	if hash(nil, seen.Add(time.Hour)) != base {
		t.Error("config.seen changed the hash")
	}
	now := metav1.NewTime(seen)
	grace := int64(5)
	differ := map[string]func(*v1.Pod){
		"label":    func(p *v1.Pod) { p.Labels["tier"] = "front" },
		"image":    func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" },
		"deletion": func(p *v1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace },
	}
	for name, mod := range differ {
		if hash(mod, seen) == base {
			t.Errorf("%s kept the hash", name)
		}
	}
}

func TestAPIPodRefusesUnsafeNames(t *testing.T) {
	for name, mod := range map[string]func(*v1.Pod){
		"uid parent":   func(p *v1.Pod) { p.UID = "../../etc" },
		"uid slash":    func(p *v1.Pod) { p.UID = "a/b" },
		"uid empty":    func(p *v1.Pod) { p.UID = "" },
		"uid dots":     func(p *v1.Pod) { p.UID = ".." },
		"namespace":    func(p *v1.Pod) { p.Namespace = "../x" },
		"name dotdot":  func(p *v1.Pod) { p.Name = "a..b" },
		"name slashed": func(p *v1.Pod) { p.Name = "a/b" },
		"container":    func(p *v1.Pod) { p.Spec.Containers[0].Name = "../../etc" },
		"init":         func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "a/b"}} },
		"ephemeral": func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "../x"}}}
		},
		"volume": func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: ".."}} },
		// Names the apiserver keeps unique, which name log and
		// termination-message files and find a container's spec.
		"ephemeral named as a container": func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "app"}}}
		},
		"init named as a container": func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "app"}} },
		"two containers alike": func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "app", Image: "busybox"})
		},
		"two volumes alike": func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{{Name: "data"}, {Name: "data"}} },
	} {
		t.Run(name, func(t *testing.T) {
			api := apiPodFixture()
			mod(api)
			if p, err := APIPod(api, "apiserver", time.Now()); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("APIPod = %v, %v; want a refusal", p != nil, err)
			}
		})
	}
	// Every UID the API makes (a UUID) passes.
	api := apiPodFixture()
	api.UID = types.UID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	if _, err := APIPod(api, "apiserver", time.Now()); err != nil {
		t.Error(err)
	}
}

func TestReferencedObjects(t *testing.T) {
	p := apiPodFixture()
	opt := true
	p.Spec.Volumes = []v1.Volume{
		{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm-vol"}}}},
		{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec-vol"}}},
		{Name: "c", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec-proj"}}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
		{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	p.Spec.InitContainers = []v1.Container{{Name: "init", EnvFrom: []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm-envfrom"}}},
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec-envfrom"}}},
	}}}
	p.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm-env"}, Key: "k", Optional: &opt}}},
		{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec-env"}, Key: "k"}}},
		{Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "D", Value: "plain"},
	}
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug",
		Env: []v1.EnvVar{{Name: "E", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm-vol"}, Key: "k"}}}}}}}
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}

	var got []string
	for _, k := range referencedObjects(p) {
		if k.namespace != "apps" {
			t.Errorf("%v: namespace %q, want the pod's", k, k.namespace)
		}
		got = append(got, k.kind+"/"+k.name)
	}
	want := []string{
		"ConfigMap/cm-env", "ConfigMap/cm-envfrom", "ConfigMap/cm-vol", "ConfigMap/kube-root-ca.crt",
		"Secret/pull", "Secret/sec-env", "Secret/sec-envfrom", "Secret/sec-proj", "Secret/sec-vol",
	}
	if !slices.Equal(got, want) {
		t.Errorf("referenced objects\n got %v\nwant %v", got, want)
	}
}
