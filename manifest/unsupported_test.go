package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestWarningsForUnsupportedFields(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // whole warnings
	}{{
		name: "scheduling constraints",
		data: podWith("", `
			nodeSelector:
			  disk: ssd
			affinity:
			  nodeAffinity: {}
			topologySpreadConstraints:
			- maxSkew: 1
			  topologyKey: zone
			  whenUnsatisfiable: DoNotSchedule
			`),
		want: []string{
			"pod.yaml:9: spec.nodeSelector: not supported yet by podrun, ignored",
			"pod.yaml:11: spec.affinity: not supported yet by podrun, ignored",
			"pod.yaml:13: spec.topologySpreadConstraints: not supported yet by podrun, ignored",
		},
	}, {
		name: "volume types and projections",
		data: podWith("", `
			volumes:
			- name: claim
			  persistentVolumeClaim:
			    claimName: data
			- name: token
			  projected:
			    sources:
			    - serviceAccountToken:
			        path: token
			`),
		want: []string{
			"pod.yaml:11: spec.volumes[0].persistentVolumeClaim: not supported yet by podrun, ignored",
			"pod.yaml:16: spec.volumes[1].projected.sources[0].serviceAccountToken: not supported yet by podrun, ignored",
		},
	}, {
		name: "container fields",
		data: podWith(`
			resizePolicy:
			- resourceName: cpu
			  restartPolicy: NotRequired
			stdinOnce: true
			lifecycle:
			  preStop:
			    tcpSocket:
			      port: 5
			securityContext:
			  runAsNonRoot: true
			  seccompProfile:
			    type: Localhost
			    localhostProfile: p.json
			`, ""),
		want: []string{
			"pod.yaml:9: spec.containers[0].resizePolicy: not supported yet by podrun, ignored",
			"pod.yaml:15: spec.containers[0].lifecycle.preStop.tcpSocket: not supported yet by podrun, ignored",
			"pod.yaml:18: spec.containers[0].securityContext.runAsNonRoot: true is not supported yet by podrun, ignored",
		},
	}, {
		name: "ephemeral containers and status",
		data: podWith("", `
			ephemeralContainers:
			- name: debug
			  image: busybox
			`) + "status:\n  phase: Running\n",
		want: []string{
			"pod.yaml:9: spec.ephemeralContainers: not supported yet by podrun, ignored",
			"pod.yaml:12: status: not supported yet by podrun, ignored",
		},
	}, {
		name: "kubeadm fields and empty values are accepted silently",
		data: podWith("", `
			priority: 2000001000
			priorityClassName: system-node-critical
			preemptionPolicy: PreemptLowerPriority
			tolerations:
			- operator: Exists
			  effect: NoExecute
			enableServiceLinks: false
			nodeSelector: {}
			affinity: null
			hostUsers: true
			automountServiceAccountToken: false
			securityContext:
			  seccompProfile:
			    type: RuntimeDefault
			`) + "status: {}\n",
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := mustParse(t, "pod.yaml", tt.data)
			if strings.Join(snap.Warnings, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(snap.Warnings, "\n"), strings.Join(tt.want, "\n"))
			}
			if len(snap.Pods) != 1 {
				t.Errorf("a warning must not drop the pod")
			}
		})
	}
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
		    readinessGates:
		    - conditionType: example.com/ready
		    containers:
		    - name: app
		      image: nginx:1.27
		`))
	want := "list.yaml:9: items[0].spec.readinessGates: not supported yet by podrun, ignored"
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
