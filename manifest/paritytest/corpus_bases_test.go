package paritytest

import (
	"os"
	"path/filepath"
)

// The base pods. Each is valid for the apiserver (the test checks it) and,
// apart from "sched", uses only what podrun implements, so that a
// mutation podrun rejects is rejected for the mutated field.
//
// Namespaces: a pod without metadata.namespace goes to the test's
// namespace "parity"; one with a namespace goes to it (the test creates
// every valid namespace the corpus names, each with its default service
// account).

// minimal is the smallest pod.
const minimal = `
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: podrun/busybox:test
`

// full uses every volume type podrun implements, an init container and a
// sidecar, every kind of env source, security contexts, probes of every
// kind, lifecycle hooks, DNS config and host aliases.
const full = `
apiVersion: v1
kind: Pod
metadata:
  name: full
  namespace: parity
  labels:
    app: full
    app.kubernetes.io/name: full
  annotations:
    example.com/note: a note
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  enableServiceLinks: false
  automountServiceAccountToken: false
  serviceAccountName: default
  dnsPolicy: None
  dnsConfig:
    nameservers: [10.0.0.53, "fd00::53"]
    searches: [svc.cluster.local, example.com]
    options:
    - name: ndots
      value: "2"
    - name: edns0
  hostname: full
  hostAliases:
  - ip: 10.0.0.1
    hostnames: [db.local, cache.local]
  - ip: "fd00::1"
    hostnames: [v6.local]
  imagePullSecrets:
  - name: regcred
  securityContext:
    runAsUser: 1000
    runAsGroup: 1000
    supplementalGroups: [2000, 2001]
    sysctls:
    - name: net.ipv4.ip_local_port_range
      value: "1024 65000"
    - name: kernel.shm_rmid_forced
      value: "1"
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - name: scratch
    emptyDir: {}
  - name: cache
    emptyDir:
      medium: Memory
      sizeLimit: 64Mi
  - name: host-logs
    hostPath:
      path: /var/log/full
      type: DirectoryOrCreate
  - name: config
    configMap:
      name: full-config
      defaultMode: 0644
      optional: false
      items:
      - key: app.conf
        path: app.conf
        mode: 0600
  - name: creds
    secret:
      secretName: full-secret
      defaultMode: 0400
      items:
      - key: token
        path: auth/token
  - name: podinfo
    downwardAPI:
      defaultMode: 0444
      items:
      - path: labels
        fieldRef:
          fieldPath: metadata.labels
      - path: cpu_limit
        resourceFieldRef:
          containerName: app
          resource: limits.cpu
          divisor: 1m
  - name: bundle
    projected:
      defaultMode: 0440
      sources:
      - configMap:
          name: full-config
          items:
          - key: app.conf
            path: projected/app.conf
      - secret:
          name: full-secret
          items:
          - key: token
            path: projected/token
      - downwardAPI:
          items:
          - path: projected/name
            fieldRef:
              fieldPath: metadata.name
  initContainers:
  - name: init
    image: podrun/busybox:test
    command: [sh, -c, "echo ready > /scratch/init"]
    volumeMounts:
    - name: scratch
      mountPath: /scratch
  - name: sidecar
    image: podrun/busybox:test
    restartPolicy: Always
    command: [sh, -c, "sleep 3600"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 5
    startupProbe:
      exec:
        command: ["true"]
      failureThreshold: 10
    lifecycle:
      preStop:
        sleep:
          seconds: 2
  containers:
  - name: app
    image: podrun/busybox:test
    imagePullPolicy: IfNotPresent
    command: [httpd, -f, -p, "8080"]
    args: [-h, /www]
    workingDir: /www
    ports:
    - name: http
      containerPort: 8080
      protocol: TCP
    - name: metrics
      containerPort: 9090
      hostPort: 19090
      hostIP: 127.0.0.1
    - containerPort: 5353
      protocol: UDP
    env:
    - name: MODE
      value: production
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_IP
      valueFrom:
        fieldRef:
          apiVersion: v1
          fieldPath: status.podIP
    - name: APP_LABEL
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['app']
    - name: CPU_LIMIT
      valueFrom:
        resourceFieldRef:
          resource: limits.cpu
          divisor: 1m
    - name: MEM_REQUEST
      valueFrom:
        resourceFieldRef:
          containerName: app
          resource: requests.memory
          divisor: 1Mi
    - name: LOG_LEVEL
      valueFrom:
        configMapKeyRef:
          name: full-config
          key: log.level
    - name: TOKEN
      valueFrom:
        secretKeyRef:
          name: full-secret
          key: token
          optional: true
    - name: GREETING
      value: hello $(POD_NAME)
    envFrom:
    - configMapRef:
        name: full-config
    - prefix: SECRET_
      secretRef:
        name: full-secret
        optional: true
    resources:
      requests:
        cpu: 250m
        memory: 64Mi
        ephemeral-storage: 1Gi
      limits:
        cpu: "1"
        memory: 128Mi
    volumeMounts:
    - name: scratch
      mountPath: /scratch
    - name: cache
      mountPath: /cache
    - name: host-logs
      mountPath: /var/log/app
      mountPropagation: HostToContainer
    - name: config
      mountPath: /etc/app
      readOnly: true
    - name: creds
      mountPath: /etc/creds
      readOnly: true
    - name: podinfo
      mountPath: /etc/podinfo
    - name: bundle
      mountPath: /etc/bundle
      readOnly: true
    - name: config
      mountPath: /www/index.html
      subPath: app.conf
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      runAsUser: 1001
      capabilities:
        add: [NET_BIND_SERVICE]
        drop: [ALL]
      seccompProfile:
        type: RuntimeDefault
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
        httpHeaders:
        - name: X-Probe
          value: liveness
      initialDelaySeconds: 5
      periodSeconds: 10
      timeoutSeconds: 2
      failureThreshold: 3
      terminationGracePeriodSeconds: 10
    readinessProbe:
      tcpSocket:
        port: 8080
      periodSeconds: 5
      successThreshold: 2
    startupProbe:
      grpc:
        port: 9090
      failureThreshold: 30
      periodSeconds: 2
    lifecycle:
      postStart:
        exec:
          command: [sh, -c, "echo started"]
      preStop:
        httpGet:
          path: /shutdown
          port: 8080
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: FallbackToLogsOnError
    stdin: false
    tty: false
  - name: helper
    image: podrun/busybox:test
    command: [sleep, "3600"]
    resources:
      limits:
        cpu: 100m
        memory: 32Mi
`

// sched holds the scheduling fields a cluster uses and one machine does
// not: node selector, affinity of every kind, tolerations, topology
// spread, priority, preemption, scheduler name. (Readiness gates, which
// podrun refuses, are its mutations.)
const sched = `
apiVersion: v1
kind: Pod
metadata:
  name: sched
  labels:
    app: sched
spec:
  schedulerName: default-scheduler
  priorityClassName: system-cluster-critical
  preemptionPolicy: PreemptLowerPriority
  nodeSelector:
    kubernetes.io/os: linux
    example.com/pool: edge
  tolerations:
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
  - key: example.com/flaky
    operator: Equal
    value: "true"
    effect: NoExecute
    tolerationSeconds: 60
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: kubernetes.io/arch
            operator: In
            values: [amd64, arm64]
          matchFields:
          - key: metadata.name
            operator: In
            values: [node1]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions:
          - key: example.com/disk
            operator: Exists
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          labelSelector:
            matchLabels:
              app: cache
          topologyKey: kubernetes.io/hostname
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - key: app
            operator: In
            values: [sched]
        topologyKey: kubernetes.io/hostname
        namespaces: [parity]
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 2
    labelSelector:
      matchLabels:
        app: sched
    matchLabelKeys: [pod-template-hash]
    nodeAffinityPolicy: Honor
    nodeTaintsPolicy: Ignore
  containers:
  - name: app
    image: podrun/busybox:test
`

// kubeadm is where kubeadm's control-plane static pods are kept
// for the manifest package's tests: the etcd one (host network, hostPath
// volumes, probes on a named port, requests, the system-node-critical
// priority class with its value) is the base "etcd".
const kubeadm = "../testdata/kubeadm"

func addBases(b *corpusBuilder) {
	b.base("minimal", minimal)
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler"} {
		data, err := os.ReadFile(filepath.Join(kubeadm, name+".yaml"))
		if err != nil {
			panic(err)
		}
		b.base(name, string(data))
	}
	b.base("full", full)
	b.base("sched", sched)
}
