package runner

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Kinds of the objects a pod may refer to.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// ObjectRef is a reference of a pod to a ConfigMap or a Secret of its
// namespace.
type ObjectRef struct {
	Kind string // KindConfigMap or KindSecret
	Name string
	// Keys are the keys the reference needs (an env key, a volume's
	// items); none: the object as a whole.
	Keys []string
	// KeyFields are the paths of Keys, in the same order.
	KeyFields []string
	// Optional references may be missing, object or key.
	Optional bool
	// Field is the path of the reference's name in the pod:
	// "spec.volumes[0].configMap.name",
	// "spec.containers[1].env[0].valueFrom.secretKeyRef.name", ...
	Field string
	// PullSecret is an imagePullSecret: missing, it is only not used for
	// pulls (the kubelet's way), and an image that is present runs.
	PullSecret bool
	// env: the key is looked up in a ConfigMap's data only (not
	// binaryData), as the kubelet's env does; volumes look in both.
	env bool
}

// ObjectRefs lists the pod's references to ConfigMaps and Secrets, in the
// order of the spec: volumes (configMap, secret and projected sources),
// the env and envFrom of init and app containers, imagePullSecrets.
func ObjectRefs(pod *v1.Pod) []ObjectRef {
	var refs []ObjectRef
	// volume adds a volume's (or projected source's) reference: at is the
	// path of its configMap or secret, name the field of the name there.
	volume := func(kind, name string, opt *bool, items []v1.KeyToPath, at, nameField string) {
		ref := ObjectRef{Kind: kind, Name: name, Optional: optional(opt), Field: at + "." + nameField}
		for i, it := range items {
			ref.Keys = append(ref.Keys, it.Key)
			ref.KeyFields = append(ref.KeyFields, fmt.Sprintf("%s.items[%d].key", at, i))
		}
		refs = append(refs, ref)
	}
	for i, vol := range pod.Spec.Volumes {
		f := fmt.Sprintf("spec.volumes[%d]", i)
		switch {
		case vol.ConfigMap != nil:
			volume(KindConfigMap, vol.ConfigMap.Name, vol.ConfigMap.Optional, vol.ConfigMap.Items, f+".configMap", "name")
		case vol.Secret != nil:
			volume(KindSecret, vol.Secret.SecretName, vol.Secret.Optional, vol.Secret.Items, f+".secret", "secretName")
		case vol.Projected != nil:
			for j, src := range vol.Projected.Sources {
				sf := fmt.Sprintf("%s.projected.sources[%d]", f, j)
				switch {
				case src.ConfigMap != nil:
					volume(KindConfigMap, src.ConfigMap.Name, src.ConfigMap.Optional, src.ConfigMap.Items, sf+".configMap", "name")
				case src.Secret != nil:
					volume(KindSecret, src.Secret.Name, src.Secret.Optional, src.Secret.Items, sf+".secret", "name")
				}
			}
		}
	}
	containers := func(cs []v1.Container, field string) {
		for i := range cs {
			c := &cs[i]
			cf := fmt.Sprintf("spec.%s[%d]", field, i)
			for j, from := range c.EnvFrom {
				ef := fmt.Sprintf("%s.envFrom[%d]", cf, j)
				switch {
				case from.ConfigMapRef != nil:
					refs = append(refs, ObjectRef{Kind: KindConfigMap, Name: from.ConfigMapRef.Name,
						Optional: optional(from.ConfigMapRef.Optional), Field: ef + ".configMapRef.name"})
				case from.SecretRef != nil:
					refs = append(refs, ObjectRef{Kind: KindSecret, Name: from.SecretRef.Name,
						Optional: optional(from.SecretRef.Optional), Field: ef + ".secretRef.name"})
				}
			}
			for j, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				vf := fmt.Sprintf("%s.env[%d].valueFrom", cf, j)
				switch {
				case e.ValueFrom.ConfigMapKeyRef != nil:
					s := e.ValueFrom.ConfigMapKeyRef
					refs = append(refs, ObjectRef{Kind: KindConfigMap, Name: s.Name, Optional: optional(s.Optional),
						Field: vf + ".configMapKeyRef.name", Keys: []string{s.Key}, KeyFields: []string{vf + ".configMapKeyRef.key"}, env: true})
				case e.ValueFrom.SecretKeyRef != nil:
					s := e.ValueFrom.SecretKeyRef
					refs = append(refs, ObjectRef{Kind: KindSecret, Name: s.Name, Optional: optional(s.Optional),
						Field: vf + ".secretKeyRef.name", Keys: []string{s.Key}, KeyFields: []string{vf + ".secretKeyRef.key"}, env: true})
				}
			}
		}
	}
	containers(pod.Spec.InitContainers, "initContainers")
	containers(pod.Spec.Containers, "containers")
	for i, s := range pod.Spec.ImagePullSecrets {
		if s.Name == "" {
			continue // the API's way: an empty reference is no reference
		}
		refs = append(refs, ObjectRef{Kind: KindSecret, Name: s.Name, Field: fmt.Sprintf("spec.imagePullSecrets[%d].name", i), PullSecret: true})
	}
	return refs
}

// MissingRef is a reference that the objects at hand do not satisfy.
type MissingRef struct {
	Ref ObjectRef
	// Field is where the problem is: the reference's name when the object
	// is missing, the key's field when a key is.
	Field string
	// Message says what is missing, in the words of the pod's containers'
	// CreateContainerConfigError (or, for an imagePullSecret, of the
	// warning the pull logs).
	Message string
}

// MissingRefs returns the pod's references (ObjectRefs) that objs does not
// satisfy: a ConfigMap or Secret that is not there, or a key missing from
// one, unless the reference is optional. Such a pod's containers wait with
// CreateContainerConfigError until the object appears; a missing
// imagePullSecret is only not used.
func MissingRefs(pod *v1.Pod, objs *Objects) []MissingRef {
	var out []MissingRef
	for _, ref := range ObjectRefs(pod) {
		if ref.Optional {
			continue
		}
		var keys map[string]bool
		switch ref.Kind {
		case KindConfigMap:
			if cm := objs.ConfigMap(pod, ref.Name); cm != nil {
				keys = map[string]bool{}
				for k := range cm.Data {
					keys[k] = true
				}
				if !ref.env {
					for k := range cm.BinaryData {
						keys[k] = true
					}
				}
			}
		case KindSecret:
			if sec := objs.Secret(pod, ref.Name); sec != nil {
				keys = map[string]bool{}
				for k := range sec.Data {
					keys[k] = true
				}
			}
		}
		if keys == nil {
			msg := errObjectNotFound(ref.Kind, ref.Name).Error()
			if ref.PullSecret {
				msg = fmt.Sprintf("image pull secret %q not found: images are pulled without it", ref.Name)
			}
			out = append(out, MissingRef{Ref: ref, Field: ref.Field, Message: msg})
			continue
		}
		for i, k := range ref.Keys {
			if !keys[k] {
				out = append(out, MissingRef{Ref: ref, Field: ref.KeyFields[i], Message: errKeyNotFound(ref.Kind, ref.Name, k).Error()})
			}
		}
	}
	return out
}

// errObjectNotFound is a required ConfigMap or Secret that is missing: the
// container cannot be configured (CreateContainerConfigError).
func errObjectNotFound(kind, name string) error {
	return configErrorf("%s %q not found", objectWord(kind), name)
}

// errKeyNotFound is a required key missing from a ConfigMap or Secret.
func errKeyNotFound(kind, name, key string) error {
	return configErrorf("key %q not found in %s %s", key, objectWord(kind), strconv.Quote(name))
}

// objectWord is the kind as the kubelet's messages write it.
func objectWord(kind string) string {
	if kind == KindSecret {
		return "secret"
	}
	return "configmap"
}
