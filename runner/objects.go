package runner

import (
	"bytes"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Objects holds the ConfigMaps and Secrets found in the sources, for env and
// volumes that refer to them. Safe for concurrent use.
type Objects struct {
	mu         sync.RWMutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// NewObjects returns an empty store.
func NewObjects() *Objects {
	return &Objects{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
}

// objectRef names a ConfigMap or a Secret.
type objectRef struct {
	Secret    bool // a Secret; else a ConfigMap
	Namespace string
	Name      string
}

// Set replaces every object in the store. It returns the objects whose
// content changed: added, removed, or with other data (a Secret also with
// another type); an object sent again as it was is not a change.
func (o *Objects) Set(cms []*v1.ConfigMap, secrets []*v1.Secret) map[objectRef]bool {
	c := make(map[string]*v1.ConfigMap, len(cms))
	for _, cm := range cms {
		c[cm.Namespace+"/"+cm.Name] = cm
	}
	s := make(map[string]*v1.Secret, len(secrets))
	for _, sec := range secrets {
		s[sec.Namespace+"/"+sec.Name] = sec
	}
	o.mu.Lock()
	oldC, oldS := o.configMaps, o.secrets
	o.configMaps, o.secrets = c, s
	o.mu.Unlock()

	changed := map[objectRef]bool{}
	for _, k := range changedKeys(oldC, c, sameConfigMap) {
		cm := c[k]
		if cm == nil {
			cm = oldC[k]
		}
		changed[objectRef{Namespace: cm.Namespace, Name: cm.Name}] = true
	}
	for _, k := range changedKeys(oldS, s, sameSecret) {
		sec := s[k]
		if sec == nil {
			sec = oldS[k]
		}
		changed[objectRef{Secret: true, Namespace: sec.Namespace, Name: sec.Name}] = true
	}
	return changed
}

// changedKeys are the keys of old and cur whose objects differ, or that
// only one of them has.
func changedKeys[T any](old, cur map[string]T, same func(a, b T) bool) []string {
	var out []string
	for k, a := range old {
		if b, ok := cur[k]; !ok || !same(a, b) {
			out = append(out, k)
		}
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func sameConfigMap(a, b *v1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) && maps.EqualFunc(a.BinaryData, b.BinaryData, bytes.Equal)
}

func sameSecret(a, b *v1.Secret) bool {
	return a.Type == b.Type && maps.EqualFunc(a.Data, b.Data, bytes.Equal)
}

// ConfigMap returns the ConfigMap namespace/name, or nil.
func (o *Objects) ConfigMap(namespace, name string) *v1.ConfigMap {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.configMaps[namespace+"/"+name]
}

// Secret returns the Secret namespace/name, or nil.
func (o *Objects) Secret(namespace, name string) *v1.Secret {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.secrets[namespace+"/"+name]
}
