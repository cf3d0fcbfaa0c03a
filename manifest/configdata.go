package manifest

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMaps and Secrets are read so that pods of the same sources can use
// them (volumes, env) without a cluster. They keep their names (unlike
// pods, they are not node-suffixed: pods refer to them by name) and get the
// API server's defaults and checks.

func defaultConfigMap(cm *v1.ConfigMap) {
	if cm.Namespace == "" {
		cm.Namespace = metav1.NamespaceDefault
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
}

// defaultSecret merges stringData into data, as the API server does (a key
// in both takes stringData's value), and sets the type to Opaque if unset.
func defaultSecret(s *v1.Secret) {
	if s.Namespace == "" {
		s.Namespace = metav1.NamespaceDefault
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
}
