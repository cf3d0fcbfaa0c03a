#!/usr/bin/env bash
# The reference column of docs/conformance.md: Kubernetes' node conformance
# specs (the same focus and skip as `make conformance`) against the real
# kubelet of the same version, on podrun's private containerd
# (hack/containerd.sh), on this machine. A spec that fails here as on
# podrun is the machine's or the harness's; one that passes here and fails
# on podrun is podrun's to fix.
#
# It builds the kubelet (cached beside the other Kubernetes binaries,
# ${PODRUN_CACHE:-/var/cache/podrun}/k8s/<version>-kubelet; the build cache
# hack/k8s.sh leaves makes it a minute), imports the control-plane and test
# images into the private containerd, runs the real `kubeadm init` with the
# kubelet started beside it (no systemd here: kubeadm cannot start it), makes
# the node schedulable as e2e TestNodeConformance does, runs e2e.test, and
# takes everything down again. KREF_FOCUS=REGEX runs the specs matching it
# instead of every [NodeConformance] one. Output: $KREF_OUT (default
# /tmp/kubelet-ref):
# e2e.log, report.json, kubelet.log, kubeadm.log, and summary.txt (counts,
# then one line per spec: state and name), which a whole run (no
# KREF_FOCUS) also copies to docs/conformance-kubelet.txt.
#
# The kubelet needs, on this kind of machine (read from its v1.37 source):
# failCgroupV1: false (cgroup v1 hosts are refused by default), cgroupDriver
# cgroupfs (no systemd; containerd 1.6 has no RuntimeConfig to say), and
# image GC held off (the images cannot be pulled again). It sets kernel
# tunables (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops) as it
# always does with protectKernelDefaults false; this script puts the
# machine's values back when it ends.
#
# Like the kubeadm e2e tests it takes /etc/kubernetes, ports 6443, 2379,
# 10250 and 10257/10259, and 198.18.0.2 on lo for its duration: never run it
# beside them, `make conformance` or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

# shellcheck source=hack/k8s-module.sh
. hack/k8s-module.sh

log() { printf 'conformance-kubelet: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

NODE=kubelet-ref
IP=198.18.0.2
SOCK_PATH=${PODRUN_CONTAINERD_SOCK:-/run/podrun-containerd/containerd.sock}
SOCK=unix://$SOCK_PATH
CACHE=${PODRUN_CACHE:-/var/cache/podrun}/k8s
BIN=$CACHE/$K8S_VERSION
KUBELET_DIR=$CACHE/$K8S_VERSION-kubelet
OUT=${KREF_OUT:-/tmp/kubelet-ref}
PROCS=4
FOCUS=${KREF_FOCUS:-'\[NodeConformance\]'}
SKIP='\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:|\[Alpha\]'
TUNABLES=(vm/overcommit_memory kernel/panic kernel/panic_on_oops vm/panic_on_oom)

[ "$(id -u)" -eq 0 ] || die "run as root"
[ ! -e /etc/kubernetes ] || die "/etc/kubernetes exists: another cluster (or a killed run) holds this machine; remove it first"
command -v jq >/dev/null || {
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
}

bash hack/setup.sh --containerd
bash hack/k8s.sh
bash hack/conformance-build.sh

if [ ! -x "$KUBELET_DIR/kubelet" ]; then
	log "building the kubelet $K8S_VERSION"
	work=$(mktemp -d /tmp/podrun-kubelet-build.XXXXXX)
	k8s_module "$work" podrun.local/kubeletbuild
	ld=$(k8s_ldflags)
	mkdir -p "$KUBELET_DIR"
	(cd "$work" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off go build -p 2 -mod=mod -trimpath -ldflags "$ld" \
		-o "$KUBELET_DIR/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet)
	mv "$KUBELET_DIR/kubelet.tmp" "$KUBELET_DIR/kubelet"
	rm -rf "$work"
fi

# Every image the control plane and the specs name, from the local dockerd
# (no registry is reachable).
mapfile -t images < <(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^registry\.k8s\.io/')
bash hack/containerd.sh import "${images[@]}"

rm -rf "$OUT"
mkdir -p "$OUT/run"
saved=()
for k in "${TUNABLES[@]}"; do saved+=("$k=$(cat "/proc/sys/$k")"); done

teardown() {
	set +e
	log "taking the cluster down"
	[ -f "$OUT/run/kubelet.pid" ] && kill "$(cat "$OUT/run/kubelet.pid")" 2>/dev/null
	sleep 2
	# The kubelet's pods are containerd's: their tasks killed through it,
	# then whatever is left in the kubelet's cgroups, then containerd
	# stopped and its state removed (hack/containerd.sh makes it again,
	# test images imported). A killed shim alone would leave its container
	# running.
	local id
	for id in $(ctr --address "$SOCK_PATH" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr --address "$SOCK_PATH" -n k8s.io tasks kill -a -s SIGKILL "$id" 2>/dev/null
	done
	sleep 2
	find /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs 2>/dev/null | xargs -r cat | xargs -r kill -9 2>/dev/null
	bash hack/containerd.sh stop
	pkill -9 -f "containerd-shim-runc-v2 .*-address $SOCK_PATH" 2>/dev/null
	sleep 1
	grep " /var/lib/podrun-containerd/\| $(dirname "$SOCK_PATH")/\| /var/lib/kubelet[/ ]" /proc/mounts | cut -d' ' -f2 |
		sort -r | xargs -r -n1 umount -l
	rm -rf /var/lib/podrun-containerd "$(dirname "$SOCK_PATH")/state" /var/lib/kubelet /etc/kubernetes
	find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d 2>/dev/null |
		xargs -r -I{} find {} -depth -type d -exec rmdir {} \; 2>/dev/null
	bash hack/containerd.sh >/dev/null
	for kv in "${saved[@]}"; do echo "${kv#*=}" >"/proc/sys/${kv%%=*}"; done
	ip addr del "$IP/32" dev lo 2>/dev/null
	return 0
}
trap teardown EXIT

ip addr add "$IP/32" dev lo
rm -rf /var/lib/kubelet
cat >"$OUT/run/kubeadm.yaml" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: $IP
  bindPort: 6443
nodeRegistration:
  name: $NODE
  criSocket: $SOCK
  kubeletExtraArgs:
  - name: node-ip
    value: $IP
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: $K8S_VERSION
clusterName: kubelet-ref
certificatesDir: $OUT/run/pki
etcd:
  local:
    dataDir: $OUT/run/etcd
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: $SOCK
oomScoreAdj: 0
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
address: $IP
EOF

# The kubelet starts once kubeadm has written its kubeconfig and config, as
# systemd would start it when kubeadm asks.
(
	for _ in $(seq 1 600); do
		[ -f /var/lib/kubelet/config.yaml ] && [ -f /etc/kubernetes/kubelet.conf ] && break
		sleep 0.2
	done
	exec "$KUBELET_DIR/kubelet" --config=/var/lib/kubelet/config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf \
		--hostname-override="$NODE" --node-ip="$IP" --v=2
) >"$OUT/kubelet.log" 2>&1 &
echo $! >"$OUT/run/kubelet.pid"

log "kubeadm init"
timeout 600 "$BIN/kubeadm" init --skip-phases=preflight --config "$OUT/run/kubeadm.yaml" --v=1 >"$OUT/kubeadm.log" 2>&1 ||
	die "kubeadm init failed; see $OUT/kubeadm.log and $OUT/kubelet.log"

export KUBECONFIG=/etc/kubernetes/admin.conf
k() { "$BIN/kubectl" --request-timeout=30s "$@"; }
k wait --for=condition=Ready "node/$NODE" --timeout=2m
# As e2e TestNodeConformance: the node takes pods, no CoreDNS (its image
# cannot be pulled) and no kube-proxy.
k taint nodes "$NODE" node-role.kubernetes.io/control-plane:NoSchedule-
k -n kube-system scale deployment coredns --replicas=0
k -n kube-system delete daemonset kube-proxy --ignore-not-found
k -n kube-system wait --for=delete pod -l k8s-app=kube-dns --timeout=2m || true
k -n kube-system wait --for=delete pod -l k8s-app=kube-proxy --timeout=2m || true

log "e2e.test: $FOCUS, $PROCS at once"
start=$(date +%s)
(cd "$OUT" && timeout 5h "$BIN/conformance/ginkgo" --procs "$PROCS" --focus "$FOCUS" --skip "$SKIP" \
	--timeout 4h --json-report report.json --output-dir "$OUT" --no-color \
	"$BIN/conformance/e2e.test" -- --kubeconfig "$KUBECONFIG" --provider local --kubectl-path "$BIN/kubectl" \
	--allowed-not-ready-nodes 0 --minStartupPods 0 --system-pods-startup-timeout 5m \
	--disable-log-dump --dump-logs-on-failure=false --report-dir "$OUT") >"$OUT/e2e.log" 2>&1 || true
[ -f "$OUT/report.json" ] || die "e2e.test wrote no report; see $OUT/e2e.log"

# One line per spec that ran, "state<TAB>name", names as docs/conformance.md
# writes them.
jq -r '.[].SpecReports[] | select(.LeafNodeType == "It") | select(.State != "skipped" and .State != "pending")
	| "\(.State)\t\((.ContainerHierarchyTexts + [.LeafNodeText]) | join(" "))"' "$OUT/report.json" | sort -k2 >"$OUT/specs.tsv"
ran=$(wc -l <"$OUT/specs.tsv")
passed=$(grep -c '^passed' "$OUT/specs.tsv" || true)
{
	echo "kubelet $K8S_VERSION on containerd $(containerd --version | awk '{print $3}'): $passed of $ran passed ($(($(date +%s) - start)) s, $PROCS at once)"
	cat "$OUT/specs.tsv"
} >"$OUT/summary.txt"
log "$(head -1 "$OUT/summary.txt"); $OUT/summary.txt"
# A whole run is the reference docs/conformance.md compares podrun with.
if [ -z "${KREF_FOCUS:-}" ]; then
	cp "$OUT/summary.txt" docs/conformance-kubelet.txt
	log "wrote docs/conformance-kubelet.txt"
fi
