package runner

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/expansion"
	"github.com/podrun/podrun/manifest"
)

func TestMakeEnv(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web-n1", "prod", "uid-1"
	pod.Labels = map[string]string{"app": "web", "tier": "front"}
	pod.Spec.NodeName = "n1"
	pod.Spec.ServiceAccountName = "sa"
	c := v1.Container{Name: "c"}
	c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	res := func(r, divisor string) *v1.EnvVarSource {
		s := &v1.ResourceFieldSelector{Resource: r}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return &v1.EnvVarSource{ResourceFieldRef: s}
	}
	yes := true
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	c.Env = []v1.EnvVar{
		{Name: "NAME", ValueFrom: field("metadata.name")},
		{Name: "NS", ValueFrom: field("metadata.namespace")},
		{Name: "UID", ValueFrom: field("metadata.uid")},
		{Name: "APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "LABELS", ValueFrom: field("metadata.labels")},
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "CPU_LIMIT", ValueFrom: res("limits.cpu", "")},
		{Name: "CPU_REQ_M", ValueFrom: res("requests.cpu", "1m")},
		{Name: "MEM_MI", ValueFrom: res("limits.memory", "1Mi")},
		{Name: "KEY", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "key"}}},
		{Name: "PASS", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
		{Name: "OPTIONAL", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &yes}}},
		{Name: "GREETING", Value: "hi $(NAME) $$(NAME) $(UNDEFINED)"},
	}
	pod.Spec.Containers = []v1.Container{c}
	objs := NewObjects()
	cm := &v1.ConfigMap{Data: map[string]string{"key": "value"}}
	cm.Name, cm.Namespace = "cfg", "prod"
	sec := &v1.Secret{Data: map[string][]byte{"password": []byte("s3cret")}}
	sec.Name, sec.Namespace = "sec", "prod"
	objs.Set([]*v1.ConfigMap{cm}, []*v1.Secret{sec})

	env, _, err := makeEnv(pod, &pod.Spec.Containers[0], objs, podEnv{PodIP: "10.0.0.2", HostIP: "192.0.2.1", NodeMilliCPU: 4000, NodeMemory: 8 << 30}, &expansion.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	want := map[string]string{
		"CM_key": "value", "NAME": "web-n1", "NS": "prod", "UID": "uid-1", "APP": "web",
		"LABELS": "app=\"web\"\ntier=\"front\"", "NODE": "n1", "SA": "sa", "POD_IP": "10.0.0.2", "HOST_IP": "192.0.2.1",
		"CPU_LIMIT": "2", "CPU_REQ_M": "250", "MEM_MI": "64", "KEY": "value", "PASS": "s3cret",
		"GREETING": "hi web-n1 $(NAME) $(UNDEFINED)",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["OPTIONAL"]; ok {
		t.Errorf("an optional missing secret set OPTIONAL")
	}

	// A missing required key is a configuration error, not a crash.
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "missing"}}}}
	_, _, err = makeEnv(pod, &pod.Spec.Containers[0], objs, podEnv{}, &expansion.Budget{})
	if err == nil || errorReason(err) != "CreateContainerConfigError" {
		t.Fatalf("err %v (%s), want a CreateContainerConfigError", err, errorReason(err))
	}
}

func TestContainerResources(t *testing.T) {
	cases := []struct {
		name                          string
		req, lim                      v1.ResourceList
		shares, quota, period, memory int64
	}{
		{"best effort", nil, nil, 2, 0, 0, 0},
		{"requests only", v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi")},
			nil, 102, 0, 0, 0},
		{"limits stand in for requests", nil,
			v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			512, 50000, 100000, 64 << 20},
		{"tiny limit gets the minimum quota", nil, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")}, 2, 1000, 100000, 0},
	}
	for _, tc := range cases {
		c := &v1.Container{Resources: v1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}}
		r := containerResources(c)
		if r.CPUShares != tc.shares || r.CPUQuota != tc.quota || r.CPUPeriod != tc.period || r.MemoryLimit != tc.memory {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

func TestSecurityConfig(t *testing.T) {
	uid, gid, cuid := int64(1000), int64(2000), int64(0)
	no, yes := false, true
	pod := &v1.Pod{}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, SupplementalGroups: []int64{5},
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	c := &v1.Container{SecurityContext: &v1.SecurityContext{RunAsUser: &cuid, AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem: &yes, Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}}}
	s, err := securityConfig(pod, c, "/var/lib/podrun/seccomp")
	if err != nil || *s.RunAsUser != 0 || *s.RunAsGroup != 2000 || !s.NoNewPrivileges || !s.ReadOnlyRootfs || s.Seccomp != "" ||
		len(s.CapAdd) != 1 || len(s.CapDrop) != 1 || len(s.SupplementalGroups) != 1 {
		t.Fatalf("%+v", s)
	}
	profile := "my.json"
	c.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}
	if s, err := securityConfig(pod, c, "/r/seccomp"); err != nil || s.Seccomp != "/r/seccomp/my.json" {
		t.Fatalf("localhost profile %q, %v", s.Seccomp, err)
	}
	// The engine reads the profile's file: one outside the seccomp
	// directory is refused, manifest validation or not.
	for _, bad := range []string{"../../etc/shadow", "/etc/shadow", "a/../../b", ""} {
		c.SecurityContext.SeccompProfile.LocalhostProfile = &bad
		if s, err := securityConfig(pod, c, "/r/seccomp"); err == nil || errorReason(err) != "CreateContainerConfigError" {
			t.Errorf("localhost profile %q: %q, %v; want a config error", bad, s.Seccomp, err)
		}
	}
}

// TestMakeEnvIsBounded: a manifest of a few lines whose variables each
// double the one before ("$(V1)$(V1)") would make gigabytes of environment
// in podrun's memory; so would many envFrom of one large ConfigMap. Each
// is a configuration error (CreateContainerConfigError) found before the
// memory is spent, naming the variable; command and args share the
// environment's budget.
func TestMakeEnvIsBounded(t *testing.T) {
	doubling := &v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "V0", Value: strings.Repeat("x", 1024)}}}
	for i := 1; i <= 40; i++ {
		doubling.Env = append(doubling.Env, v1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: fmt.Sprintf("$(V%d)$(V%d)", i-1, i-1)})
	}
	// 1 KiB doubled 8 times is 256 KiB, past what one string may hold.
	large := &v1.ConfigMap{Data: map[string]string{"K": strings.Repeat("y", expansion.MaxLen/2)}}
	large.Name, large.Namespace = "large", "prod"
	manyFrom := &v1.Container{Name: "c"}
	for i := range 100 {
		manyFrom.EnvFrom = append(manyFrom.EnvFrom, v1.EnvFromSource{Prefix: fmt.Sprintf("P%d_", i),
			ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "large"}}})
	}
	objs := NewObjects()
	objs.Set([]*v1.ConfigMap{large}, nil)
	for _, tc := range []struct {
		name, want string
		c          *v1.Container
		wantErr    error
	}{
		{"doubling", "env V8: ", doubling, expansion.ErrTooLong},
		// 100 x 64 KiB: past 6 MiB at the 96th prefix.
		{"many envFrom", "env P95_K: ", manyFrom, expansion.ErrTooMuch},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*tc.c}}}
		pod.Name, pod.Namespace = "boom", "prod"
		env, _, err := makeEnv(pod, &pod.Spec.Containers[0], objs, podEnv{}, &expansion.Budget{})
		if !isConfigError(err) || !strings.HasPrefix(err.Error(), tc.want+tc.wantErr.Error()) {
			t.Errorf("%s: %d variables, %v; want a configuration error %q", tc.name, len(env), err, tc.want+tc.wantErr.Error())
		}
	}

	// Command and args share the environment's budget: 128 KiB of
	// environment and 48 args of as much pass 6 MiB.
	big := strings.Repeat("z", expansion.MaxLen-10)
	c := v1.Container{Name: "c", Image: "busybox", Env: []v1.EnvVar{{Name: "BIG", Value: big}}}
	for range expansion.MaxTotal / expansion.MaxLen {
		c.Args = append(c.Args, "$(BIG)")
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	pod.Name, pod.Namespace, pod.UID = "boom", "prod", "uid-1"
	r := &Runner{cfg: Config{RootDir: t.TempDir(), Objects: objs}}
	_, err := r.containerConfig(pod, &pod.Spec.Containers[0], engine.ContainerTypeApp, 0, nil, podEnv{})
	if !isConfigError(err) || !strings.HasPrefix(err.Error(), "args[47]: "+expansion.ErrTooMuch.Error()) {
		t.Errorf("args past the budget the environment began: %v, want a configuration error at args[47]", err)
	}
}

// TestDownwardAPIShowsASourceURLWithoutCredentials: the pods podrun runs
// keep podrun.io/source whole (it names them), but the downward API gives
// it to their containers: a URL's manifest would read, in its own
// environment or a downwardAPI volume, the credentials the node fetches
// it with.
func TestDownwardAPIShowsASourceURLWithoutCredentials(t *testing.T) {
	const url = "https://deploy:S3CRET@config.example/pods.yaml?X-Amz-Signature=sig"
	snap, err := manifest.Parse(url, []byte(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: c
    image: nginx:1.27
    env:
    - name: SOURCE
      valueFrom: {fieldRef: {fieldPath: "metadata.annotations['podrun.io/source']"}}
`), manifest.Options{NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	pod := snap.Pods[0]
	env, _, err := makeEnv(pod, &pod.Spec.Containers[0], NewObjects(), podEnv{}, &expansion.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	// A downwardAPI volume's file of every annotation.
	all, err := podFieldValue(pod, "metadata.annotations", podEnv{})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"env " + env[0].Name: env[0].Value, "metadata.annotations": all} {
		if strings.Contains(v, "S3CRET") || strings.Contains(v, "Signature") || !strings.Contains(v, "https://config.example/pods.yaml") {
			t.Errorf("%s = %q, want the source URL without its credentials", name, v)
		}
	}
	if pod.Annotations[manifest.AnnotationSource] != url {
		t.Errorf("the pod's own annotation became %q, want the whole URL", pod.Annotations[manifest.AnnotationSource])
	}
}
