package runner

import (
	"bytes"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/manifest"
)

// Objects holds the ConfigMaps and Secrets found in the sources, for env and
// volumes that refer to them. Safe for concurrent use.
//
// The apiserver's objects serve only the apiserver's pods, and the local
// sources' objects (manifests, URLs) only local pods, whatever their
// names: a pod the cluster binds to this node must not read a Secret that
// exists only in /etc/kubernetes/manifests (the kubelet gives a pod of the
// API only what the node authorizer lets it read from the API), nor a
// local manifest stand in for a cluster's Secret.
type Objects struct {
	mu         sync.RWMutex
	configMaps map[objectRef]*v1.ConfigMap
	secrets    map[objectRef]*v1.Secret
}

// NewObjects returns an empty store.
func NewObjects() *Objects {
	return &Objects{configMaps: map[objectRef]*v1.ConfigMap{}, secrets: map[objectRef]*v1.Secret{}}
}

// objectRef names a ConfigMap or a Secret of the apiserver or of the local
// sources.
type objectRef struct {
	API       bool // of the apiserver source (manifest.FromAPI)
	Secret    bool // a Secret; else a ConfigMap
	Namespace string
	Name      string
}

// refOf is the name of an object.
func refOf(obj metav1.Object, secret bool) objectRef {
	return objectRef{API: manifest.FromAPI(obj), Secret: secret, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// podRef is the object named name that pod may refer to: in its namespace
// and of its kind of source.
func podRef(pod *v1.Pod, secret bool, name string) objectRef {
	return objectRef{API: manifest.FromAPI(pod), Secret: secret, Namespace: pod.Namespace, Name: name}
}

// Set replaces every object in the store. It returns the objects whose
// content changed: added, removed, or with other data (a Secret also with
// another type); an object sent again as it was is not a change.
func (o *Objects) Set(cms []*v1.ConfigMap, secrets []*v1.Secret) map[objectRef]bool {
	c := make(map[objectRef]*v1.ConfigMap, len(cms))
	for _, cm := range cms {
		c[refOf(cm, false)] = cm
	}
	s := make(map[objectRef]*v1.Secret, len(secrets))
	for _, sec := range secrets {
		s[refOf(sec, true)] = sec
	}
	o.mu.Lock()
	oldC, oldS := o.configMaps, o.secrets
	o.configMaps, o.secrets = c, s
	o.mu.Unlock()

	changed := map[objectRef]bool{}
	addChanged(changed, oldC, c, sameConfigMap)
	addChanged(changed, oldS, s, sameSecret)
	return changed
}

// addChanged adds to changed the names of old and cur whose objects
// differ, or that only one of them has.
func addChanged[T any](changed map[objectRef]bool, old, cur map[objectRef]T, same func(a, b T) bool) {
	for k, a := range old {
		if b, ok := cur[k]; !ok || !same(a, b) {
			changed[k] = true
		}
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			changed[k] = true
		}
	}
}

func sameConfigMap(a, b *v1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) && maps.EqualFunc(a.BinaryData, b.BinaryData, bytes.Equal)
}

func sameSecret(a, b *v1.Secret) bool {
	return a.Type == b.Type && maps.EqualFunc(a.Data, b.Data, bytes.Equal)
}

// ConfigMap returns the ConfigMap name that pod may refer to (podRef), or
// nil.
func (o *Objects) ConfigMap(pod *v1.Pod, name string) *v1.ConfigMap {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.configMaps[podRef(pod, false, name)]
}

// Secret returns the Secret name that pod may refer to (podRef), or nil.
func (o *Objects) Secret(pod *v1.Pod, name string) *v1.Secret {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.secrets[podRef(pod, true, name)]
}
