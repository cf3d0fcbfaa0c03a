package manifest

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateContainer checks one init or app container. volumes are the pod's
// volume names, containers its container names.
func validateContainer(c *v1.Container, fld *field.Path, volumes, containers sets.Set[string], isInit bool) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(fld.Child("name"), c.Name)...)
	}
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(fld.Child("image"), "the image to run, e.g. registry.k8s.io/etcd:3.5.15-0"))
	case c.Image != strings.TrimSpace(c.Image):
		errs = append(errs, field.Invalid(fld.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, oneOf(fld.Child("imagePullPolicy"), string(c.ImagePullPolicy),
		string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever))...)
	errs = append(errs, oneOf(fld.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy),
		string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError))...)
	if c.TerminationMessagePath != "" {
		errs = append(errs, absolutePath(fld.Child("terminationMessagePath"), c.TerminationMessagePath)...)
	}
	if c.WorkingDir != "" {
		errs = append(errs, absolutePath(fld.Child("workingDir"), c.WorkingDir)...)
	}

	errs = append(errs, validatePorts(c.Ports, fld.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fld.Child("env"), containers)...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fld.Child("envFrom"))...)
	errs = append(errs, validateResources(&c.Resources, fld.Child("resources"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, fld.Child("volumeMounts"), volumes)...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, fld.Child("securityContext"))...)

	sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
	if isInit && c.RestartPolicy != nil && !sidecar {
		errs = append(errs, field.NotSupported(fld.Child("restartPolicy"), string(*c.RestartPolicy),
			[]string{string(v1.ContainerRestartPolicyAlways)}))
	}
	if isInit && !sidecar {
		// An init container runs to completion: there is nothing to probe,
		// and hooks are for containers that keep running.
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(fld.Child(f.name),
					"only sidecar init containers (restartPolicy: Always) may have it"))
			}
		}
	}
	errs = append(errs, validateProbe(c.LivenessProbe, fld.Child("livenessProbe"), c, true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, fld.Child("readinessProbe"), c, false)...)
	errs = append(errs, validateProbe(c.StartupProbe, fld.Child("startupProbe"), c, true)...)
	if c.Lifecycle != nil {
		errs = append(errs, validateHandler(c.Lifecycle.PostStart, fld.Child("lifecycle", "postStart"), c)...)
		errs = append(errs, validateHandler(c.Lifecycle.PreStop, fld.Child("lifecycle", "preStop"), c)...)
	}
	return errs
}

func validatePorts(ports []v1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fld.Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		errs = append(errs, oneOf(p.Child("protocol"), string(port.Protocol),
			string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP))...)
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(p.Child("hostIP"), port.HostIP)...)
		}
	}
	return errs
}

func validateEnv(env []v1.EnvVar, fld *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		p := fld.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
		}
		if e.ValueFrom == nil {
			continue
		}
		vp := p.Child("valueFrom")
		if e.Value != "" {
			errs = append(errs, field.Invalid(vp, "", "may not be given together with value"))
		}
		src := e.ValueFrom
		n := 0
		if src.FieldRef != nil {
			n++
			errs = append(errs, validateFieldRef(src.FieldRef, vp.Child("fieldRef"), envFieldPaths())...)
		}
		if src.ResourceFieldRef != nil {
			n++
			errs = append(errs, validateResourceFieldRef(src.ResourceFieldRef, vp.Child("resourceFieldRef"), containers)...)
		}
		if src.ConfigMapKeyRef != nil {
			n++
			errs = append(errs, validateKeyRef(src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key, vp.Child("configMapKeyRef"))...)
		}
		if src.SecretKeyRef != nil {
			n++
			errs = append(errs, validateKeyRef(src.SecretKeyRef.Name, src.SecretKeyRef.Key, vp.Child("secretKeyRef"))...)
		}
		if src.FileKeyRef != nil {
			n++
		}
		if n != 1 {
			errs = append(errs, field.Invalid(vp, fmt.Sprintf("%d sources", n),
				"give exactly one of fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef"))
		}
	}
	return errs
}

func validateKeyRef(name, key string, fld *field.Path) field.ErrorList {
	errs := objectName(fld.Child("name"), name)
	if key == "" {
		return append(errs, field.Required(fld.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fld.Child("key"), key, msg))
	}
	return errs
}

func validateEnvFrom(envFrom []v1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ef := range envFrom {
		p := fld.Index(i)
		if ef.Prefix != "" {
			for _, msg := range validation.IsEnvVarName(ef.Prefix) {
				errs = append(errs, field.Invalid(p.Child("prefix"), ef.Prefix, msg))
			}
		}
		switch {
		case ef.ConfigMapRef != nil && ef.SecretRef != nil:
			errs = append(errs, field.Invalid(p, "configMapRef and secretRef", "give one of configMapRef and secretRef"))
		case ef.ConfigMapRef != nil:
			errs = append(errs, objectName(p.Child("configMapRef", "name"), ef.ConfigMapRef.Name)...)
		case ef.SecretRef != nil:
			errs = append(errs, objectName(p.Child("secretRef", "name"), ef.SecretRef.Name)...)
		default:
			errs = append(errs, field.Required(p, "one of configMapRef and secretRef"))
		}
	}
	return errs
}

// validateResources checks resource names and that no request exceeds its
// limit.
func validateResources(res *v1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []string{"limits", "requests"} {
		list := res.Limits
		if kind == "requests" {
			list = res.Requests
		}
		for name, q := range list {
			p := fld.Child(kind).Key(string(name))
			if !validResourceName(name) {
				errs = append(errs, field.Invalid(p, string(name),
					"must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource"))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
			}
		}
	}
	for name, req := range res.Requests {
		if limit, ok := res.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(fld.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validResourceName(name v1.ResourceName) bool {
	switch {
	case name == v1.ResourceCPU, name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage:
		return true
	case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
		return true
	}
	// Extended resources (example.com/gpu) are domain-qualified names.
	prefix, base, ok := strings.Cut(string(name), "/")
	return ok && len(validation.IsDNS1123Subdomain(prefix)) == 0 && base != "" && !strings.Contains(base, "/")
}

func validateVolumeMounts(mounts []v1.VolumeMount, fld *field.Path, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := fld.Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case !volumes.Has(m.Name):
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		if pathErrs := absolutePath(p.Child("mountPath"), m.MountPath); len(pathErrs) > 0 {
			errs = append(errs, pathErrs...)
		} else if clean := strings.TrimSuffix(m.MountPath, "/"); paths.Has(clean) {
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		} else {
			paths.Insert(clean)
		}
		if m.SubPath != "" {
			errs = append(errs, relativePath(p.Child("subPath"), m.SubPath)...)
		}
		if m.SubPathExpr != "" {
			// Only the expanded path can be checked fully, when the pod
			// runs; what is written must not already leave the volume.
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, relativePath(p.Child("subPathExpr"), m.SubPathExpr)...)
		}
		if m.MountPropagation != nil {
			errs = append(errs, oneOf(p.Child("mountPropagation"), string(*m.MountPropagation),
				string(v1.MountPropagationNone), string(v1.MountPropagationHostToContainer), string(v1.MountPropagationBidirectional))...)
		}
	}
	return errs
}

func validateSecurityContext(sc *v1.SecurityContext, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)
	errs = append(errs, validateSeccomp(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	noEscalation := sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	if noEscalation && sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Invalid(fld, "privileged and allowPrivilegeEscalation: false",
			"a privileged container can always escalate: drop one of the two"))
	}
	if sc.Capabilities != nil {
		for i, c := range sc.Capabilities.Add {
			if noEscalation && strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_") == "SYS_ADMIN" {
				errs = append(errs, field.Invalid(fld.Child("capabilities", "add").Index(i), string(c),
					"CAP_SYS_ADMIN allows escalation: it cannot go with allowPrivilegeEscalation: false"))
			}
		}
	}
	if sc.ProcMount != nil {
		errs = append(errs, oneOf(fld.Child("procMount"), string(*sc.ProcMount),
			string(v1.DefaultProcMount), string(v1.UnmaskedProcMount))...)
	}
	return errs
}

// validateProbe checks a probe (after defaulting). Liveness and startup
// probes succeed once: their successThreshold must be 1.
func validateProbe(pr *v1.Probe, fld *field.Path, c *v1.Container, successOnce bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if pr.Exec != nil {
		n++
		errs = append(errs, validateExec(pr.Exec, fld.Child("exec"))...)
	}
	if pr.HTTPGet != nil {
		n++
		errs = append(errs, validateHTTPGet(pr.HTTPGet, fld.Child("httpGet"), c)...)
	}
	if pr.TCPSocket != nil {
		n++
		errs = append(errs, validateProbePort(pr.TCPSocket.Port, fld.Child("tcpSocket", "port"), c)...)
	}
	if pr.GRPC != nil {
		n++
		for _, msg := range validation.IsValidPortNum(int(pr.GRPC.Port)) {
			errs = append(errs, field.Invalid(fld.Child("grpc", "port"), pr.GRPC.Port, msg))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(fld, fmt.Sprintf("%d handlers", n),
			"give exactly one of exec, httpGet, tcpSocket and grpc"))
	}
	if pr.InitialDelaySeconds < 0 {
		errs = append(errs, field.Invalid(fld.Child("initialDelaySeconds"), pr.InitialDelaySeconds, "must not be negative"))
	}
	for _, f := range []struct {
		name  string
		value int32
	}{
		{"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		if f.value < 1 {
			errs = append(errs, field.Invalid(fld.Child(f.name), f.value, "must be at least 1"))
		}
	}
	if successOnce && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fld.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if pr.TerminationGracePeriodSeconds != nil && *pr.TerminationGracePeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return errs
}

// validateHandler checks a lifecycle hook.
func validateHandler(h *v1.LifecycleHandler, fld *field.Path, c *v1.Container) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if h.Exec != nil {
		n++
		errs = append(errs, validateExec(h.Exec, fld.Child("exec"))...)
	}
	if h.HTTPGet != nil {
		n++
		errs = append(errs, validateHTTPGet(h.HTTPGet, fld.Child("httpGet"), c)...)
	}
	if h.TCPSocket != nil {
		n++
		errs = append(errs, validateProbePort(h.TCPSocket.Port, fld.Child("tcpSocket", "port"), c)...)
	}
	if h.Sleep != nil {
		n++
		if h.Sleep.Seconds < 0 {
			errs = append(errs, field.Invalid(fld.Child("sleep", "seconds"), h.Sleep.Seconds, "must not be negative"))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(fld, fmt.Sprintf("%d handlers", n),
			"give exactly one of exec, httpGet, tcpSocket and sleep"))
	}
	return errs
}

func validateExec(e *v1.ExecAction, fld *field.Path) field.ErrorList {
	if len(e.Command) == 0 {
		return field.ErrorList{field.Required(fld.Child("command"), "")}
	}
	return nil
}

func validateHTTPGet(h *v1.HTTPGetAction, fld *field.Path, c *v1.Container) field.ErrorList {
	errs := validateProbePort(h.Port, fld.Child("port"), c)
	errs = append(errs, oneOf(fld.Child("scheme"), string(h.Scheme), string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS))...)
	for i, hdr := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(fld.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
		}
	}
	return errs
}

// validateProbePort checks a port given by number, or by the name of one of
// the container's ports (kubeadm's `port: probe-port`).
func validateProbePort(port intstr.IntOrString, fld *field.Path, c *v1.Container) field.ErrorList {
	if port.Type == intstr.Int {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(fld, port.IntValue(), msg))
		}
		return errs
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		var errs field.ErrorList
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fld, port.StrVal, msg))
		}
		return errs
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(fld, port.StrVal,
		fmt.Sprintf("no port named %q in container %q: name one of its ports, or give a number", port.StrVal, c.Name))}
}
