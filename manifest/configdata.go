package manifest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

func validateConfigMap(cm *v1.ConfigMap) field.ErrorList {
	errs := validateObjectMeta(&cm.ObjectMeta)
	size := 0
	for key, value := range cm.Data {
		errs = append(errs, validateDataKey(key, field.NewPath("data").Key(key))...)
		size += len(key) + len(value)
	}
	for key, value := range cm.BinaryData {
		p := field.NewPath("binaryData").Key(key)
		errs = append(errs, validateDataKey(key, p)...)
		if _, dup := cm.Data[key]; dup {
			errs = append(errs, field.Invalid(p, key, "is also a key of data: a key may be in only one of data and binaryData"))
		}
		size += len(key) + len(value)
	}
	if size > v1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", v1.MaxSecretSize))
	}
	return errs
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

// validateSecret checks a Secret before stringData is merged, so that each
// key is reported where it is written.
func validateSecret(s *v1.Secret) field.ErrorList {
	meta := s.ObjectMeta
	if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	errs := validateObjectMeta(&meta)
	keys := map[string]bool{}
	size := 0
	for key, value := range s.Data {
		errs = append(errs, validateDataKey(key, field.NewPath("data").Key(key))...)
		keys[key] = true
		size += len(value)
	}
	for key, value := range s.StringData {
		errs = append(errs, validateDataKey(key, field.NewPath("stringData").Key(key))...)
		if !keys[key] {
			size += len(value)
		}
		keys[key] = true
	}
	if size > v1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", v1.MaxSecretSize))
	}
	required := map[v1.SecretType][]string{
		v1.SecretTypeTLS:              {v1.TLSCertKey, v1.TLSPrivateKeyKey},
		v1.SecretTypeDockerConfigJson: {v1.DockerConfigJsonKey},
		v1.SecretTypeDockercfg:        {v1.DockerConfigKey},
		v1.SecretTypeSSHAuth:          {v1.SSHAuthPrivateKey},
	}
	for _, key := range required[s.Type] {
		if !keys[key] {
			errs = append(errs, field.Required(field.NewPath("data").Key(key), fmt.Sprintf("a Secret of type %s needs it", s.Type)))
		}
	}
	return errs
}

func validateDataKey(key string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fld, key, msg))
	}
	return errs
}
