package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefaults(t *testing.T) {
	snap := mustParse(t, "pod.yaml", dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  initContainers:
		  - name: init
		    image: busybox
		    resources:
		      limits:
		        cpu: "1"
		  containers:
		  - name: app
		    image: registry.local:5000/app:v1
		    ports:
		    - containerPort: 8080
		    env:
		    - name: POD
		      valueFrom:
		        fieldRef:
		          fieldPath: metadata.name
		    resources:
		      limits:
		        memory: 128Mi
		      requests:
		        cpu: 0.0001
		    livenessProbe:
		      httpGet:
		        port: 8080
		    readinessProbe:
		      grpc:
		        port: 9000
		    lifecycle:
		      preStop:
		        httpGet:
		          port: 8080
		  volumes:
		  - name: scratch
		  - name: host
		    hostPath:
		      path: /srv
		  - name: cfg
		    configMap:
		      name: cfg
		  - name: sec
		    secret:
		      secretName: sec
		  - name: info
		    downwardAPI:
		      items:
		      - path: name
		        fieldRef:
		          fieldPath: metadata.name
		  - name: all
		    projected:
		      sources:
		      - configMap:
		          name: cfg
		`))
	pod := snap.Pods[0]
	spec := pod.Spec
	if spec.RestartPolicy != v1.RestartPolicyAlways || spec.DNSPolicy != v1.DNSClusterFirst ||
		*spec.TerminationGracePeriodSeconds != 30 || spec.SchedulerName != "default-scheduler" ||
		spec.SecurityContext == nil || !*spec.EnableServiceLinks {
		t.Errorf("pod spec defaults: %+v", spec)
	}
	init := spec.InitContainers[0]
	if init.ImagePullPolicy != v1.PullAlways {
		t.Errorf("init imagePullPolicy = %s, want Always (no tag)", init.ImagePullPolicy)
	}
	if got := init.Resources.Requests[v1.ResourceCPU]; got.String() != "1" {
		t.Errorf("init cpu request = %s, want the limit, 1", got.String())
	}
	c := spec.Containers[0]
	if c.ImagePullPolicy != v1.PullIfNotPresent || c.TerminationMessagePath != "/dev/termination-log" ||
		c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
		t.Errorf("container defaults: pull %s, path %s, policy %s", c.ImagePullPolicy, c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
	if c.Ports[0].Protocol != v1.ProtocolTCP || c.Ports[0].HostPort != 0 {
		t.Errorf("port = %+v, want TCP and no host port", c.Ports[0])
	}
	if c.Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Errorf("fieldRef apiVersion = %q", c.Env[0].ValueFrom.FieldRef.APIVersion)
	}
	if got := c.Resources.Requests[v1.ResourceMemory]; got.String() != "128Mi" {
		t.Errorf("memory request = %s, want the limit", got.String())
	}
	if got := c.Resources.Requests[v1.ResourceCPU]; got.String() != "1m" {
		t.Errorf("cpu request = %s, want 1m (rounded up to milli-units)", got.String())
	}
	lp := c.LivenessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 ||
		lp.HTTPGet.Path != "/" || lp.HTTPGet.Scheme != v1.URISchemeHTTP {
		t.Errorf("liveness probe = %+v", lp)
	}
	if rp := c.ReadinessProbe; rp.GRPC.Service == nil || *rp.GRPC.Service != "" {
		t.Errorf("grpc service = %v, want \"\"", rp.GRPC.Service)
	}
	if h := c.Lifecycle.PreStop.HTTPGet; h.Scheme != v1.URISchemeHTTP || h.Path != "/" {
		t.Errorf("preStop httpGet = %+v", h)
	}
	vols := spec.Volumes
	if vols[0].EmptyDir == nil {
		t.Errorf("a volume without a source must be an emptyDir: %+v", vols[0])
	}
	if vols[1].HostPath.Type == nil || *vols[1].HostPath.Type != v1.HostPathUnset {
		t.Errorf("hostPath type = %v, want \"\"", vols[1].HostPath.Type)
	}
	for _, mode := range []*int32{vols[2].ConfigMap.DefaultMode, vols[3].Secret.DefaultMode, vols[4].DownwardAPI.DefaultMode, vols[5].Projected.DefaultMode} {
		if mode == nil || *mode != 0o644 {
			t.Errorf("defaultMode = %v, want 0644", mode)
		}
	}
	if vols[4].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" {
		t.Errorf("downwardAPI fieldRef apiVersion not defaulted")
	}
}

func TestDefaultHostNetworkPorts(t *testing.T) {
	snap := mustParse(t, "pod.yaml", dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  hostNetwork: true
		  containers:
		  - name: app
		    image: nginx:1.27
		    ports:
		    - containerPort: 8080
		`))
	if got := snap.Pods[0].Spec.Containers[0].Ports[0].HostPort; got != 8080 {
		t.Errorf("hostPort = %d, want the container port with hostNetwork", got)
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"nginx", v1.PullAlways},
		{"nginx:latest", v1.PullAlways},
		{"nginx:1.27", v1.PullIfNotPresent},
		{"registry.k8s.io/etcd:3.5.15-0", v1.PullIfNotPresent},
		{"localhost:5000/app", v1.PullAlways},
		{"localhost:5000/app:v2", v1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullAlways},
	}
	for _, tt := range tests {
		if got := defaultPullPolicy(tt.image); got != tt.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
		}
	}
}

func TestSetDefaultsKeepsWhatIsSet(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers: []v1.Container{{
			Name: "a", Image: "x", ImagePullPolicy: v1.PullNever,
			Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			},
			StartupProbe: &v1.Probe{
				ProbeHandler:     v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(1)}},
				FailureThreshold: 24,
			},
		}},
	}}
	SetDefaults(pod)
	c := pod.Spec.Containers[0]
	if pod.Spec.RestartPolicy != v1.RestartPolicyNever || c.ImagePullPolicy != v1.PullNever {
		t.Errorf("set values overwritten: %s, %s", pod.Spec.RestartPolicy, c.ImagePullPolicy)
	}
	if got := c.Resources.Requests[v1.ResourceCPU]; got.String() != "1" {
		t.Errorf("cpu request = %s, want 1 (kept)", got.String())
	}
	if c.StartupProbe.FailureThreshold != 24 || c.StartupProbe.PeriodSeconds != 10 {
		t.Errorf("startup probe = %+v", c.StartupProbe)
	}
}
