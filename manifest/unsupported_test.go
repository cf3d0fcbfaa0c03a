package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestRefusedFields: a field podrun cannot honour refuses the pod, with the
// reason, rather than being dropped while the pod runs as something else.
func TestRefusedFields(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		line   int
		field  string
		reason string
	}{{
		name: "PersistentVolumeClaim",
		data: podWith("", "volumes:\n- name: claim\n  persistentVolumeClaim:\n    claimName: data\n"),
		line: 11, field: "spec.volumes[0].persistentVolumeClaim", reason: "needs a cluster to bind and provision it",
	}, {
		name: "ephemeral volume",
		data: podWith("", "volumes:\n- name: e\n  ephemeral:\n    volumeClaimTemplate:\n      spec:\n        accessModes: [ReadWriteOnce]\n        resources: {requests: {storage: 1Gi}}\n"),
		line: 11, field: "spec.volumes[0].ephemeral", reason: "a PersistentVolumeClaim that a cluster makes",
	}, {
		name: "service account token",
		data: podWith("", "serviceAccountName: app\nvolumes:\n- name: t\n  projected:\n    sources:\n    - serviceAccountToken: {path: token}\n"),
		line: 9, field: "spec.serviceAccountName", reason: "may not name a service account",
	}, {
		name: "tcpSocket hook",
		data: podWith("lifecycle:\n  preStop:\n    tcpSocket:\n      port: 5\n", ""),
		line: 11, field: "spec.containers[0].lifecycle.preStop.tcpSocket", reason: "the kubelet does not run tcpSocket hooks either",
	}, {
		name: "readiness gates",
		data: podWith("", "readinessGates:\n- conditionType: example.com/ready\n"),
		line: 9, field: "spec.readinessGates", reason: "would never be Ready",
	}, {
		name: "resize with a restart",
		data: podWith("resizePolicy:\n- resourceName: cpu\n  restartPolicy: RestartContainer\n", ""),
		line: 11, field: "spec.containers[0].resizePolicy[0].restartPolicy", reason: "resizes a container in place",
	}, {
		name: "hugepages",
		data: podWith("resources:\n  limits:\n    hugepages-2Mi: 4Mi\n    memory: 64Mi\n    cpu: 1\n", ""),
		line: 11, field: "spec.containers[0].resources.limits[hugepages-2Mi]", reason: "does not reserve huge pages",
	}, {
		name: "pod-level hugepages",
		data: podWith("resources:\n  limits:\n    cpu: 1\n    memory: 64Mi\n    hugepages-2Mi: 2Mi\n",
			"resources:\n  limits:\n    cpu: 1\n    memory: 64Mi\n    hugepages-2Mi: 2Mi\n"),
		line: 18, field: "spec.resources.limits[hugepages-2Mi]", reason: "pod cgroup limits cpu and memory only",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", tt.data)
			e := findError(t, errs, tt.line, tt.field, tt.reason)
			if e != nil && !strings.Contains(e.Message, "podrun") {
				t.Errorf("the refusal does not say it is podrun's: %v", e)
			}
		})
	}
}

// TestFieldsWithoutEffectAreAcceptedQuietly: scheduling constraints mean
// nothing on one machine, and the API server sets status aside on a create;
// once valid they are accepted without a word, Strict or not.
func TestFieldsWithoutEffectAreAcceptedQuietly(t *testing.T) {
	data := podWith(`
		resources:
		  requests:
		    ephemeral-storage: 1Gi
		resizePolicy:
		- resourceName: cpu
		  restartPolicy: NotRequired
		securityContext:
		  runAsNonRoot: true
		  runAsUser: 65534
		`, `
		nodeSelector:
		  disk: ssd
		affinity:
		  nodeAffinity:
		    requiredDuringSchedulingIgnoredDuringExecution:
		      nodeSelectorTerms:
		      - matchExpressions: [{key: zone, operator: In, values: [a]}]
		topologySpreadConstraints:
		- maxSkew: 1
		  topologyKey: zone
		  whenUnsatisfiable: DoNotSchedule
		schedulingGates:
		- name: example.com/gate
		priority: 2000001000
		priorityClassName: system-node-critical
		preemptionPolicy: PreemptLowerPriority
		tolerations:
		- operator: Exists
		  effect: NoExecute
		enableServiceLinks: false
		hostUsers: true
		automountServiceAccountToken: false
		volumes:
		- name: scratch
		  emptyDir:
		    medium: Memory
		    sizeLimit: 64Mi
		`) + "status:\n  phase: Running\n"
	for _, strict := range []bool{false, true} {
		opts := testOptions()
		opts.Strict = strict
		snap, err := Parse("pod.yaml", []byte(data), opts)
		if err != nil {
			t.Fatalf("strict %v: %v", strict, err)
		}
		if len(snap.Warnings) != 0 || len(snap.Pods) != 1 {
			t.Errorf("strict %v: warnings %q, %d pods", strict, snap.Warnings, len(snap.Pods))
		}
	}
}

// TestRuntimeChecksAreAccepted: runAsNonRoot, whatever the uid, and a
// runtimeClassName are the runner's to check when it starts the pod (they
// need the image's user, and the RuntimeClasses then), as the kubelet's:
// the manifest is valid.
func TestRuntimeChecksAreAccepted(t *testing.T) {
	for _, data := range []string{
		podWith("securityContext:\n  runAsNonRoot: true\n", ""),
		podWith("", "securityContext:\n  runAsNonRoot: true\n  runAsUser: 0\n"),
		podWith("", "runtimeClassName: gvisor\n"),
	} {
		opts := testOptions()
		opts.Strict = true
		snap, err := Parse("pod.yaml", []byte(data), opts)
		if err != nil || len(snap.Pods) != 1 {
			t.Errorf("%s: %v", data, err)
		}
	}
}

// TestValidatedThoughWithoutEffect: a field without effect is still held to
// the API server's validation.
func TestValidatedThoughWithoutEffect(t *testing.T) {
	errs := parseErrors(t, "pod.yaml", podWith("", "tolerations:\n- key: a b\n  operator: Exists\n"))
	findError(t, errs, 10, "spec.tolerations[0].key", "Invalid value")
	errs = parseErrors(t, "pod.yaml", podWith("", "nodeSelector:\n  bad key!: x\n"))
	findError(t, errs, 10, "spec.nodeSelector[bad key!]", "Invalid value")
}

func TestWarningsInAListNameTheItem(t *testing.T) {
	snap := mustParse(t, "list.yaml", dedent(`
		apiVersion: v1
		kind: List
		items:
		- apiVersion: v1
		  kind: Pod
		  metadata:
		    name: web
		  spec:
		    readinesGates: []
		    containers:
		    - name: app
		      image: nginx:1.27
		`))
	want := `list.yaml:9: items[0].spec.readinesGates: unknown field (did you mean "readinessGates"?), ignored`
	if len(snap.Warnings) != 1 || snap.Warnings[0] != want {
		t.Errorf("warnings = %q, want %q", snap.Warnings, want)
	}
}

// The headline workload: kubeadm's control-plane static pods, as kubeadm
// writes them, parse cleanly and without a single warning.
func TestKubeadmStaticPods(t *testing.T) {
	files, err := filepath.Glob("testdata/kubeadm/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			snap := mustParse(t, f, string(data))
			if len(snap.Warnings) != 0 {
				t.Errorf("warnings: %q", snap.Warnings)
			}
			if len(snap.Pods) != 1 {
				t.Fatalf("got %d pods", len(snap.Pods))
			}
			pod := snap.Pods[0]
			c := pod.Spec.Containers[0]
			if pod.Namespace != "kube-system" || !pod.Spec.HostNetwork || *pod.Spec.Priority != 2000001000 ||
				pod.Spec.PriorityClassName != "system-node-critical" ||
				pod.Spec.SecurityContext.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod-level fields lost: %+v", pod.Spec)
			}
			if c.ImagePullPolicy != v1.PullIfNotPresent {
				t.Errorf("imagePullPolicy = %s", c.ImagePullPolicy)
			}
			if c.StartupProbe.FailureThreshold != 24 || c.StartupProbe.HTTPGet.Port.StrVal != "probe-port" ||
				c.ReadinessProbe.PeriodSeconds != 1 {
				t.Errorf("probes = %+v / %+v", c.StartupProbe, c.ReadinessProbe)
			}
			if p := c.Ports[0]; p.Name != "probe-port" || p.HostPort != p.ContainerPort {
				t.Errorf("port = %+v, want probe-port with hostPort defaulted (hostNetwork)", p)
			}
			for _, v := range pod.Spec.Volumes {
				if typ := *v.HostPath.Type; typ != v1.HostPathDirectoryOrCreate && typ != v1.HostPathFileOrCreate {
					t.Errorf("volume %s type %s", v.Name, typ)
				}
			}
		})
	}
}

// TestExtendedResourcesAreWarnedOf: an extended resource is no refusal
// (the sync core admits it, or not, by what the node has), but validation
// says, at its line, what the pod needs at run time, Strict or not.
func TestExtendedResourcesAreWarnedOf(t *testing.T) {
	data := podWith("resources:\n  limits:\n    example.com/widget: 1\n    nvidia.com/gpu: 2\n", "")
	for _, strict := range []bool{false, true} {
		opts := testOptions()
		opts.Strict = strict
		snap, err := Parse("pod.yaml", []byte(data), opts)
		if err != nil {
			t.Fatalf("Parse (strict %v): %v", strict, err)
		}
		want := []string{
			"pod.yaml:11: spec.containers[0].resources.limits[example.com/widget]: podrun admits this pod only if the node has " +
				"example.com/widget: declare it with --extended-resource example.com/widget=COUNT; else the pod fails OutOfexample.com/widget",
			"pod.yaml:12: spec.containers[0].resources.limits[nvidia.com/gpu]: podrun gives the container GPUs through " +
				"Docker's NVIDIA runtime (docker run --gpus); without that runtime the pod fails OutOfnvidia.com/gpu",
		}
		if got := strings.Join(snap.Warnings, "\n"); got != strings.Join(want, "\n") {
			t.Errorf("strict %v: warnings:\n%s\nwant:\n%s", strict, got, strings.Join(want, "\n"))
		}
	}
}
