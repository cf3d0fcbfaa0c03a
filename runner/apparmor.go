package runner

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/security/apparmor"
)

// ReasonAppArmor is the status reason of a pod refused because its AppArmor
// profiles cannot be enforced, the kubelet's AppArmorNotAdmittedReason.
const ReasonAppArmor = "AppArmor"

// AppArmorValidator is the kubelet's AppArmor admission
// (k8s.io/kubernetes/pkg/security/apparmor): Validate refuses a pod that
// asks for a profile (anything but Unconfined) where the host has no
// AppArmor, or names an empty localhost profile; ValidateHost says
// whether the host enforces AppArmor at all.
type AppArmorValidator interface {
	Validate(pod *v1.Pod) error
	ValidateHost() error
}

// appArmorProfile is the engine's AppArmor setting of container c: ""
// (the runtime's default) unless the pod or the container names one, from
// its security contexts or the deprecated annotations, as the kubelet
// reads them (apparmor.GetProfile). A host without AppArmor gets none.
func appArmorProfile(v AppArmorValidator, pod *v1.Pod, c *v1.Container) string {
	if v == nil || v.ValidateHost() != nil {
		return ""
	}
	p := apparmor.GetProfile(pod, c)
	switch {
	case p == nil, p.Type == v1.AppArmorProfileTypeRuntimeDefault:
		return ""
	case p.Type == v1.AppArmorProfileTypeUnconfined:
		return "unconfined"
	case p.LocalhostProfile != nil:
		return *p.LocalhostProfile
	}
	return ""
}
