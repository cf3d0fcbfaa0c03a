package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubeadmStylePodRunsUnmodified runs a static pod shaped as kubeadm
// writes etcd's: hostNetwork, kube-system, priority, seccomp
// RuntimeDefault, hostPath DirectoryOrCreate and FileOrCreate, a bare
// command found on the image's PATH, requests only, named ports, HTTPS
// probes with an explicit host on a named port, a startup probe of 24 x 10 s
// gating liveness, readiness every second, IfNotPresent, mode 0600. The
// probes' HTTPS endpoint is a test server on the host's 127.0.0.1, which a
// hostNetwork pod shares.
func TestKubeadmStylePodRunsUnmodified(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/readyz" {
			w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.StartTLS() // self-signed: the probes must not verify
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	hostDir := filepath.Join(e.root, "host")
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://127.0.0.1:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - sleep
    - "3600"
    image: %[1]s
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /health
        port: probe-port
        scheme: HTTPS
      initialDelaySeconds: 1
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    ports:
    - containerPort: %[2]d
      name: probe-port
      protocol: TCP
    readinessProbe:
      failureThreshold: 3
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: probe-port
        scheme: HTTPS
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /health
        port: probe-port
        scheme: HTTPS
      initialDelaySeconds: 1
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
    - mountPath: /etc/kubernetes/pki/etcd/ca.crt
      name: etcd-ca
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  terminationGracePeriodSeconds: 2
  volumes:
  - hostPath:
      path: %[3]s/var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
  - hostPath:
      path: %[3]s/etc/kubernetes/pki/etcd/ca.crt
      type: FileOrCreate
    name: etcd-ca
status: {}
`, testImage, port, hostDir)
	p := e.write("etcd.yaml", manifest) // mode 0600, as kubeadm writes it

	r := e.podrun(3*time.Minute, "once", "--wait", "ready", "--timeout", "2m", p)
	if r.code != 0 {
		t.Fatalf("once --wait ready: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "etcd.yaml") {
			t.Errorf("a kubeadm manifest drew a warning: %s", line)
		}
	}
	if fi, err := os.Stat(filepath.Join(hostDir, "var/lib/etcd")); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate did not make the directory: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(hostDir, "etc/kubernetes/pki/etcd/ca.crt")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate did not make the file: %v", err)
	}

	id := e.running()["etcd/etcd"]
	ins, err := docker.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if hc.CPUShares != 102 {
		t.Errorf("cpu shares %d, want 102 (100m as the kubelet computes it)", hc.CPUShares)
	}
	if hc.Memory != 0 {
		t.Errorf("memory limit %d: a memory request is not a limit", hc.Memory)
	}
	for _, o := range hc.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("seccomp RuntimeDefault ran unconfined: %v", hc.SecurityOpt)
		}
	}
	sb, err := docker.ContainerInspect(context.Background(), e.running()["etcd/POD"])
	if err != nil {
		t.Fatal(err)
	}
	if !sb.HostConfig.NetworkMode.IsHost() {
		t.Errorf("sandbox network %s, want host", sb.HostConfig.NetworkMode)
	}
}
