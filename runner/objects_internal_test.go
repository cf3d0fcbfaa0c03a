package runner

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/expansion"
	"github.com/podrun/podrun/manifest"
)

// TestObjectsServeOnlyTheirOwnSourcesPods: a pod the cluster binds to the
// node reads only the API's ConfigMaps and Secrets, and a local pod only
// the local sources', whatever the names: a Secret that exists only in
// /etc/kubernetes/manifests (a node's etcd key) is not the API pod's for
// naming it, in a volume, env or imagePullSecrets; a Secret named alike
// in both serves each its own.
func TestObjectsServeOnlyTheirOwnSourcesPods(t *testing.T) {
	local, err := manifest.Parse("/etc/kubernetes/manifests/etcd.yaml", []byte(`apiVersion: v1
kind: Secret
metadata: {name: etcd-peer-key}
stringData: {key.pem: NODE-LOCAL-KEY}
---
apiVersion: v1
kind: Secret
metadata:
  name: shared
  annotations: {kubernetes.io/config.source: api}
stringData: {key.pem: LOCAL-SHARED}
---
apiVersion: v1
kind: Pod
metadata: {name: etcd}
spec:
  containers: [{name: etcd, image: busybox}]
`), manifest.Options{NodeName: "objects-node", Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	apiSecret := &v1.Secret{Data: map[string][]byte{"key.pem": []byte("API-SHARED")}}
	apiSecret.Name, apiSecret.Namespace = "shared", "default"
	manifest.SetConfigSource(apiSecret, manifest.ConfigSourceAPI)
	objs := NewObjects()
	objs.Set(nil, append(local.Secrets, apiSecret))

	secretPod := func(pod *v1.Pod, name string) *v1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name}}}}
		pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "KEY", ValueFrom: &v1.EnvVarSource{
			SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "key.pem"}}}}
		pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: name}}
		return pod
	}
	localPod := local.Pods[0]
	apiPod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	apiPod.Name, apiPod.Namespace, apiPod.UID = "thief", "default", "0b9f3c52-1111-2222-3333-444455556666"
	manifest.SetConfigSource(apiPod, manifest.ConfigSourceAPI)

	read := func(pod *v1.Pod) (volume, env string, err error) {
		files, _, err := volumeFiles(pod, &pod.Spec.Volumes[0], objs, podEnv{})
		if err != nil {
			return "", "", err
		}
		vars, _, err := makeEnv(pod, &pod.Spec.Containers[0], objs, podEnv{}, &expansion.Budget{})
		if err != nil {
			return "", "", err
		}
		return string(files["key.pem"].Data), vars[0].Value, nil
	}
	for _, tc := range []struct {
		what, want string
		pod        *v1.Pod
	}{
		{"the local pod, the local Secret", "LOCAL-SHARED", secretPod(localPod, "shared")},
		{"the API pod, the API's Secret", "API-SHARED", secretPod(apiPod, "shared")},
		{"the local pod, its own Secret", "NODE-LOCAL-KEY", secretPod(localPod, "etcd-peer-key")},
	} {
		vol, env, err := read(tc.pod)
		if err != nil || vol != tc.want || env != tc.want {
			t.Errorf("%s: volume %q, env %q, %v; want %q", tc.what, vol, env, err, tc.want)
		}
	}

	thief := secretPod(apiPod, "etcd-peer-key")
	if vol, env, err := read(thief); err == nil || !strings.Contains(err.Error(), "etcd-peer-key") {
		t.Errorf("the API pod read the local Secret: volume %q, env %q (err %v)", vol, env, err)
	}
	if s := objs.Secret(thief, "etcd-peer-key"); s != nil {
		t.Errorf("the API pod's imagePullSecret is the local Secret %s", s.Name)
	}
	if missing := MissingRefs(thief, objs); len(missing) == 0 {
		t.Error("MissingRefs: the API pod's reference to a local Secret is not missing")
	}

	// A change of the API's Secret is the API pods' change alone.
	apiSecret = apiSecret.DeepCopy()
	apiSecret.Data["key.pem"] = []byte("API-ROTATED")
	changed := objs.Set(nil, append(local.Secrets, apiSecret))
	if len(changed) != 1 || !refersToAny(secretPod(apiPod, "shared"), changed) || refersToAny(secretPod(localPod, "shared"), changed) {
		t.Errorf("changed %v: want the API's Secret alone, seen by the API pod and not by the local one", changed)
	}
}
