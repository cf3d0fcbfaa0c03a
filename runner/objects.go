package runner

import (
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

// Set replaces every object in the store.
func (o *Objects) Set(cms []*v1.ConfigMap, secrets []*v1.Secret) {
	c := make(map[string]*v1.ConfigMap, len(cms))
	for _, cm := range cms {
		c[cm.Namespace+"/"+cm.Name] = cm
	}
	s := make(map[string]*v1.Secret, len(secrets))
	for _, sec := range secrets {
		s[sec.Namespace+"/"+sec.Name] = sec
	}
	o.mu.Lock()
	o.configMaps, o.secrets = c, s
	o.mu.Unlock()
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
