package runner_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/runner"
)

// portPod is a pod whose container app asks for the given ports.
func portPod(uid, name string, ports ...v1.ContainerPort) *v1.Pod {
	p := newPod(uid, name, v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	p.Spec.Containers[0].Ports = ports
	return p
}

func hostPort(port int32) v1.ContainerPort {
	return v1.ContainerPort{ContainerPort: 80, HostPort: port, Protocol: v1.ProtocolTCP}
}

func TestHostPorts(t *testing.T) {
	p := portPod("u1", "a-node1", v1.ContainerPort{ContainerPort: 80}, v1.ContainerPort{ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"})
	// An init container's host port is published on the sandbox for the
	// pod's life: it counts.
	p.Spec.InitContainers = []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{ContainerPort: 9, HostPort: 9000}}}}
	var got []string
	for _, hp := range runner.HostPorts(p) {
		got = append(got, hp.String()+" "+hp.Container+" "+hp.Field)
	}
	want := "9000/TCP init spec.initContainers[0].ports[0]|127.0.0.1:53/UDP app spec.containers[0].ports[1]"
	if strings.Join(got, "|") != want {
		t.Errorf("HostPorts = %q\nwant %q", strings.Join(got, "|"), want)
	}
}

// TestAdmitHostPorts: in order, a pod is refused a host port that a pod
// admitted before it holds, as the scheduler's HostPortInfo matches them:
// the same port and protocol, on the same address or on every address.
func TestAdmitHostPorts(t *testing.T) {
	withIP := func(p v1.ContainerPort, ip string) v1.ContainerPort { p.HostIP = ip; return p }
	udp := hostPort(8080)
	udp.Protocol = v1.ProtocolUDP
	pods := []*v1.Pod{
		portPod("a", "a-node1", withIP(hostPort(8080), "127.0.0.1")),
		portPod("b", "b-node1", hostPort(8080)),                                      // every address: conflicts with a
		portPod("c", "c-node1", withIP(hostPort(8080), "127.0.0.2")),                 // another address: free
		portPod("d", "d-node1", udp),                                                 // another protocol: free
		portPod("e", "e-node1", hostPort(9090), withIP(hostPort(8080), "127.0.0.2")), // c holds it
		portPod("f", "f-node1", hostPort(9090)),                                      // e was refused: holds nothing
		portPod("g", "g-node1", v1.ContainerPort{ContainerPort: 8080}),               // no host port
	}
	refused := runner.AdmitHostPorts(pods)
	var got []string
	for _, c := range refused {
		got = append(got, c.Pod.Name+":"+c.Port.String()+">"+c.Holder.Name+":"+c.HolderPort.String())
	}
	want := "b-node1:8080/TCP>a-node1:127.0.0.1:8080/TCP|e-node1:127.0.0.2:8080/TCP>c-node1:127.0.0.2:8080/TCP"
	if strings.Join(got, "|") != want {
		t.Errorf("refused %q\nwant    %q", strings.Join(got, "|"), want)
	}
	msg := refused[0].Describe("a.yaml:9")
	if msg != "host port 8080/TCP of container app is held by pod default/a-node1 (a.yaml:9)" {
		t.Errorf("Describe = %q", msg)
	}
}

func TestMissingRefs(t *testing.T) {
	yes := true
	pod := newPod("u1", "web-node1", v1.RestartPolicyAlways, map[string][]string{"app": {"serve"}})
	ref := func(name string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: name} }
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{
		{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("conf"), Key: "a"}}},
		// env reads data only, not binaryData (as the kubelet's)
		{Name: "BIN", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("conf"), Key: "bin"}}},
		{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("nosec"), Key: "p"}}},
		{Name: "O", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("nosec"), Key: "p", Optional: &yes}}},
	}
	c.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("sec")}},
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("nocm")}}}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "v0", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("conf"),
			Items: []v1.KeyToPath{{Key: "bin", Path: "b"}, {Key: "gone", Path: "g"}}}}},
		{Name: "v1", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nosec", Optional: &yes}}},
		{Name: "v2", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{Secret: &v1.SecretProjection{LocalObjectReference: ref("nosec2")}}}}}},
	}
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{ref("regcred"), ref("sec")}

	cm := configMap("conf", map[string]string{"a": "1"})
	cm.BinaryData = map[string][]byte{"bin": {1}}
	sec := &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	sec.Name, sec.Namespace = "sec", "default"
	objs := runner.NewObjects()
	objs.Set([]*v1.ConfigMap{cm}, []*v1.Secret{sec})

	var got []string
	for _, m := range runner.MissingRefs(pod, objs) {
		got = append(got, m.Field+": "+m.Message)
	}
	want := []string{
		`spec.volumes[0].configMap.items[1].key: key "gone" not found in configmap "conf"`,
		`spec.volumes[2].projected.sources[0].secret.name: secret "nosec2" not found`,
		`spec.containers[0].envFrom[1].configMapRef.name: configmap "nocm" not found`,
		`spec.containers[0].env[1].valueFrom.configMapKeyRef.key: key "bin" not found in configmap "conf"`,
		`spec.containers[0].env[2].valueFrom.secretKeyRef.name: secret "nosec" not found`,
		`spec.imagePullSecrets[0].name: image pull secret "regcred" not found: images are pulled without it`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("MissingRefs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckPods: every check between objects, pod by pod, with the reason
// once and watch show.
func TestCheckPods(t *testing.T) {
	yes := true
	a := portPod("a", "a-node1", hostPort(8080))
	b := portPod("b", "b-node1", hostPort(8080))
	b.Spec.InitContainers = []v1.Container{{Name: "setup", Image: image, SecurityContext: &v1.SecurityContext{Privileged: &yes}}}
	b.Spec.Volumes = []v1.Volume{{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}
	class := "gvisor"
	a.Spec.RuntimeClassName = &class
	findings := runner.CheckPods([]*v1.Pod{a, b}, nil, nil, runner.NewRuntimeClasses(nil), false)
	var got []string
	for _, f := range findings {
		got = append(got, string(f.Pod.UID)+" "+f.Field+" "+f.Reason+": "+f.Text(func(p *v1.Pod, field string) string {
			return string(p.UID) + " " + field
		}))
	}
	want := []string{
		`a spec.runtimeClassName CreateContainerConfigError: RuntimeClass "gvisor" not found: declare it with --runtime-class ` +
			"gvisor=RUNTIME (a Docker runtime, as `docker info` lists them), or with a RuntimeClass object " +
			"(apiVersion: node.k8s.io/v1, handler: RUNTIME) in the manifest sources or, in cluster mode, the cluster",
		"b spec.initContainers[0].securityContext.privileged Privileged: container setup is privileged; pass --allow-privileged to run it",
		"b spec.containers[0].ports[0].hostPort NodePorts: host port 8080/TCP of container app is held by pod default/a-node1 (a spec.containers[0].ports[0].hostPort)",
		`b spec.volumes[0].configMap.name CreateContainerConfigError: configmap "conf" not found`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CheckPods:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f := runner.CheckPods([]*v1.Pod{a, b}, []*v1.ConfigMap{configMap("conf", nil)}, nil,
		runner.NewRuntimeClasses(map[string]string{"gvisor": "runsc"}), true); len(f) != 1 || f[0].Reason != runner.ReasonNodePorts {
		t.Errorf("with the ConfigMap, the class and --allow-privileged: %+v", f)
	}
	if f := runner.CheckPods([]*v1.Pod{a}, nil, nil, nil, false); len(f) != 0 {
		t.Errorf("without classes to check against: %+v", f)
	}
}
