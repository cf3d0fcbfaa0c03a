package status

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
)

func staticPod(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-node1", Namespace: "kube-system", UID: types.UID("static-" + name),
			Labels: map[string]string{"component": name},
			Annotations: map[string]string{
				manifest.AnnotationConfigSource: manifest.ConfigSourceFile,
				manifest.AnnotationConfigHash:   hash,
				manifest.AnnotationSource:       "/etc/kubernetes/manifests/" + name + ".yaml",
			},
		},
		Spec: v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: name, Image: name + ":1"}}},
	}
}

func apiMirror(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-node1", Namespace: "kube-system", UID: types.UID("mirror-" + name + "-" + hash),
			Annotations: map[string]string{v1.MirrorPodAnnotationKey: hash, manifest.AnnotationConfigHash: hash},
		},
		Spec: v1.PodSpec{NodeName: "node1"},
	}
}

func desired(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m["kube-system/"+n+"-node1"] = true
	}
	return m
}

func TestPlanMirrors(t *testing.T) {
	now := metav1.Now()
	deleting := apiMirror("etcd", "h1")
	deleting.DeletionTimestamp = &now
	notMirror := apiMirror("sched", "x")
	delete(notMirror.Annotations, v1.MirrorPodAnnotationKey)
	apiPod := apiMirror("proxy", "x")
	delete(apiPod.Annotations, v1.MirrorPodAnnotationKey)
	apiPod.Name = "kube-proxy-abcde"
	apiSource := staticPod("coredns", "h1")
	apiSource.Annotations[manifest.AnnotationConfigSource] = manifest.ConfigSourceAPI

	for _, tc := range []struct {
		name        string
		in          mirrorInput
		want        []string
		wantBlocked []types.UID
	}{
		{"missing mirror is made",
			mirrorInput{Static: []*v1.Pod{staticPod("etcd", "h1")}, Desired: desired("etcd")},
			[]string{"create kube-system/etcd-node1"}, nil},
		{"current mirror is left",
			mirrorInput{Static: []*v1.Pod{staticPod("etcd", "h1")}, API: []*v1.Pod{apiMirror("etcd", "h1")}, Desired: desired("etcd")},
			nil, nil},
		{"edited static pod remakes its mirror",
			mirrorInput{Static: []*v1.Pod{staticPod("etcd", "h2")}, API: []*v1.Pod{apiMirror("etcd", "h1")}, Desired: desired("etcd")},
			[]string{"delete kube-system/etcd-node1 mirror-etcd-h1", "create kube-system/etcd-node1"}, nil},
		{"mirror deleted in the API is remade",
			mirrorInput{Static: []*v1.Pod{staticPod("etcd", "h1")}, API: []*v1.Pod{deleting}, Desired: desired("etcd")},
			[]string{"delete kube-system/etcd-node1 mirror-etcd-h1", "create kube-system/etcd-node1"}, nil},
		{"mirror of a static pod gone is deleted",
			mirrorInput{API: []*v1.Pod{apiMirror("etcd", "h1")}, Desired: desired()},
			[]string{"delete kube-system/etcd-node1 mirror-etcd-h1"}, nil},
		{"mirror of a static pod not yet running stays",
			mirrorInput{API: []*v1.Pod{apiMirror("etcd", "h1")}, Desired: desired("etcd")},
			nil, nil},
		{"nothing is deleted before the sources are ready",
			mirrorInput{API: []*v1.Pod{apiMirror("etcd", "h1")}},
			nil, nil},
		{"a static pod being removed gets no mirror, and loses its own",
			mirrorInput{Static: []*v1.Pod{staticPod("etcd", "h1"), staticPod("apiserver", "h1")}, API: []*v1.Pod{apiMirror("etcd", "h1")}, Desired: desired("apiserver")},
			[]string{"create kube-system/apiserver-node1", "delete kube-system/etcd-node1 mirror-etcd-h1"}, nil},
		{"a pod of the name that is not a mirror blocks it",
			mirrorInput{Static: []*v1.Pod{staticPod("sched", "h1")}, API: []*v1.Pod{notMirror}, Desired: desired("sched")},
			nil, []types.UID{"static-sched"}},
		{"API pods are neither mirrored nor deleted",
			mirrorInput{Static: []*v1.Pod{apiSource}, API: []*v1.Pod{apiPod}, Desired: desired()},
			nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Node = "node1"
			actions, blocked := planMirrors(tc.in)
			var got []string
			for _, a := range actions {
				if a.Delete != nil {
					got = append(got, "delete "+podName(a.Delete)+" "+string(a.Delete.UID))
				} else {
					got = append(got, "create "+podName(a.Create))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions\n got %q\nwant %q", got, tc.want)
			}
			var gotBlocked []types.UID
			for uid := range blocked {
				gotBlocked = append(gotBlocked, uid)
			}
			if !slices.Equal(gotBlocked, tc.wantBlocked) {
				t.Errorf("blocked %v, want %v", blocked, tc.wantBlocked)
			}
		})
	}
}

func TestMirrorPod(t *testing.T) {
	st := staticPod("etcd", "h1")
	st.Status.Phase = v1.PodRunning
	m := mirrorPod(st, "node1", "node-uid")
	if m.Name != st.Name || m.Namespace != st.Namespace || m.UID != "" || m.Status.Phase != "" {
		t.Errorf("mirror meta: %s/%s uid %q phase %q", m.Namespace, m.Name, m.UID, m.Status.Phase)
	}
	if m.Annotations[v1.MirrorPodAnnotationKey] != "h1" || m.Annotations[manifest.AnnotationConfigHash] != "h1" ||
		m.Labels["component"] != "etcd" || m.Spec.NodeName != "node1" {
		t.Errorf("mirror: annotations %v labels %v node %q", m.Annotations, m.Labels, m.Spec.NodeName)
	}
	if len(m.OwnerReferences) != 1 {
		t.Fatalf("owner references %v", m.OwnerReferences)
	}
	ref := m.OwnerReferences[0]
	if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != "node1" || ref.UID != "node-uid" ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion != nil {
		t.Errorf("owner reference %+v", ref)
	}
	if _, ok := st.Annotations[v1.MirrorPodAnnotationKey]; ok {
		t.Error("mirrorPod modified the static pod")
	}
	if !isMirrorOf(apiMirror("etcd", "h1"), st) || isMirrorOf(apiMirror("etcd", "h2"), st) {
		t.Error("isMirrorOf")
	}

	// A manifest URL's credentials do not leave the node in the mirror.
	const url = "https://deploy:S3CRET@config.example/edge.yaml?X-Amz-Signature=SIG#frag"
	st.Annotations[manifest.AnnotationSource] = url
	m = mirrorPod(st, "node1", "node-uid")
	if got := m.Annotations[manifest.AnnotationSource]; got != "https://config.example/edge.yaml" {
		t.Errorf("mirror of a pod from %s: podrun.io/source %q, want the URL without userinfo, query and fragment", url, got)
	}
	if st.Annotations[manifest.AnnotationSource] != url {
		t.Error("mirrorPod modified the static pod's source")
	}
}

// TestNextMirrorRetry: the retry timer is armed for the earliest back-off
// still running; one already over is left to the next round (a timer for
// it would fire at once, and the loop spin while its mirror is not asked
// for or its attempt fails otherwise).
func TestNextMirrorRetry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := func(ago, wait time.Duration) refusal { return refusal{at: now.Add(-ago), wait: wait} }
	for _, tc := range []struct {
		name    string
		refused map[types.UID]refusal
		want    time.Time
	}{
		{"none", nil, time.Time{}},
		{"running", map[types.UID]refusal{"a": ref(0, time.Second)}, now.Add(time.Second)},
		{"earliest of two", map[types.UID]refusal{"a": ref(0, 4*time.Second), "b": ref(time.Second, 2*time.Second)}, now.Add(time.Second)},
		{"over", map[types.UID]refusal{"a": ref(2*time.Second, time.Second)}, time.Time{}},
		{"ending now", map[types.UID]refusal{"a": ref(time.Second, time.Second)}, time.Time{}},
		{"over and running", map[types.UID]refusal{"a": ref(time.Minute, time.Second), "b": ref(0, 8*time.Second)}, now.Add(8 * time.Second)},
	} {
		if got := nextMirrorRetry(tc.refused, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
