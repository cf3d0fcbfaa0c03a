package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// annotatedPod has annotations of its own and a podrun annotation that
// the config hash leaves out.
const annotatedPod = `apiVersion: v1
kind: Pod
metadata:
  name: annotated
  namespace: tools
  labels: {app: web, tier: "1"}
  annotations:
    example.com/owner: ops
    kubernetes.io/config.hash: ignored
spec:
  containers:
  - name: web
    image: nginx:1.27
    ports: [{containerPort: 80}]
    resources: {limits: {memory: 64Mi, cpu: 500m}}
`

// TestIdentityGolden fixes the UIDs and config hashes of a few pods as
// podrun computes them: running pods are adopted by them after an upgrade,
// so a change to decoding, defaulting or hashing must leave them
// byte-identical.
func TestIdentityGolden(t *testing.T) {
	kubeadm := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "kubeadm", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, tc := range []struct {
		name, source, data string
		uid, hash          string
	}{
		{"minimal", "/etc/podrun/web.yaml", minimalPod,
			"dfa23d4e-8ec3-8da0-b93d-40debae90ee1", "71736a9691dfd12fff3414e769d1a6f198e3e45be1912f286315286eb0031b5f"},
		{"annotated", "/etc/podrun/annotated.yaml", annotatedPod,
			"ff3b4c23-a500-85bb-8059-8e738ddc1d50", "134ebaaaaad289babe90186c62ea23b6970625d0285a9ed37fd6345c1ae0930b"},
		{"large item", "/etc/kubernetes/manifests/large.yaml", string(largeManifest(1)),
			"9facf430-f937-8463-9c4b-d68169e21e00", "18342c54d523dac8b1717faf3f2b58d30a15b23e852a04c70b022c4c2f0b386e"},
		{"etcd", "/etc/kubernetes/manifests/etcd.yaml", kubeadm("etcd"),
			"3f2b331b-6afd-8c6e-9d2b-996c5494bb90", "ed7f69a820d1c0e4f3fa2572d26f90b7340011f7eb8724b4a9f939909d9b6d9c"},
		{"kube-apiserver", "/etc/kubernetes/manifests/kube-apiserver.yaml", kubeadm("kube-apiserver"),
			"3b6df5b8-38f5-89a0-b477-1fdfe28896cc", "0002dbb5bd155f11862c8df092cd39391fc7f7d235a73b36facc9546c1a1c828"},
		{"kube-scheduler", "/etc/kubernetes/manifests/kube-scheduler.yaml", kubeadm("kube-scheduler"),
			"95b1a7c9-77d6-843f-a412-06200c6f1def", "243b6bbab9c423ad3cab9572b425516419a530162ba4e2c90167e63617ecc996"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := parsePod(t, tc.source, tc.data, testOptions()).Pods[0]
			if string(pod.UID) != tc.uid {
				t.Errorf("UID %s, want %s", pod.UID, tc.uid)
			}
			if got := pod.Annotations[AnnotationConfigHash]; got != tc.hash {
				t.Errorf("config hash %s, want %s", got, tc.hash)
			}
		})
	}
}
