package runner

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/manifest"
)

// Service links: in cluster mode a container's environment tells it where
// the Services of its namespace are ({SVC}_SERVICE_HOST, _SERVICE_PORT and
// Docker-link style variables), and where the apiserver is (the
// "kubernetes" Service of namespace default, whatever enableServiceLinks
// says), as the kubelet's getServiceEnvVarMap and pkg/kubelet/envvars
// make them. Without an apiserver there are none (the kubelet's neither).

// masterServices are the Services of namespace default every pod sees.
var masterServices = []string{"kubernetes"}

// errServicesNotRead is the kubelet's words for a pod whose environment
// waits for the Services.
var errServicesNotRead error = &configError{msg: "services have not yet been read at least once, cannot construct envvars"}

// SetServices replaces the cluster's Services (cluster mode): containers
// started from now on see them in their environment; running ones keep
// theirs, as with the kubelet. Until the first call, pods from the
// apiserver do not start (their environment cannot be made yet); the
// first call starts them at once rather than at the end of their
// back-off: at start-up the Services often come a moment after the pods.
func (r *Runner) SetServices(services []*v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.servicesSynced
	r.services, r.servicesSynced = services, true
	if first {
		for _, w := range r.workers {
			w.retryConfigErrorsNow()
		}
	}
}

// serviceEnv is the service links of pod's containers, by variable name.
// A pod from the apiserver waits for the Services to be read once, where
// the runner reads them (Config.ClusterServices); a static pod does not.
func (r *Runner) serviceEnv(pod *v1.Pod) (map[string]string, error) {
	r.mu.Lock()
	services, synced := r.services, r.servicesSynced
	r.mu.Unlock()
	if r.cfg.ClusterServices && !synced && pod.Annotations[manifest.AnnotationConfigSource] == manifest.ConfigSourceAPI {
		return nil, errServicesNotRead
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	return serviceEnvVars(services, pod.Namespace, links), nil
}

// serviceEnvVars are the variables of the services a pod of namespace ns
// sees: the master services of namespace default, and with links those of
// ns (which win over a master service of the same name), each with a
// cluster IP.
func serviceEnvVars(services []*v1.Service, ns string, links bool) map[string]string {
	byName := map[string]*v1.Service{}
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && slices.Contains(masterServices, s.Name):
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		case s.Namespace == ns && links:
			byName[s.Name] = s
		}
	}
	out := map[string]string{}
	for _, s := range byName {
		addServiceVars(out, s)
	}
	return out
}

// addServiceVars adds the variables of service s, as the kubelet's
// envvars.FromServices.
func addServiceVars(out map[string]string, s *v1.Service) {
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out[prefix+"_SERVICE_HOST"] = ip
	out[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for i, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+envName(p.Name)] = port
		}
		protocol := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			protocol = string(p.Protocol)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(protocol), net.JoinHostPort(ip, port))
		if i == 0 {
			// Docker's links special-case the first port.
			out[prefix+"_PORT"] = url
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(protocol))
		out[pp] = url
		out[pp+"_PROTO"] = strings.ToLower(protocol)
		out[pp+"_PORT"] = port
		out[pp+"_ADDR"] = ip
	}
}

// envName is a name as a variable name: upper case, '-' as '_'.
func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
