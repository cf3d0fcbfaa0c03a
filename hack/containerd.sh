#!/usr/bin/env bash
# Prepares a private containerd for podrun's CRI engine (engine/cri) and its
# tests: installs Debian's containerd and containernetworking-plugins when
# missing, writes a containerd config of podrun's own (its own root, state and
# socket, so the system containerd that dockerd may use is never touched;
# cgroupfs; the CRI plugin with a bridge CNI network on a private subnet,
# and CNI's firewall plugin to let the pods' traffic through iptables'
# FORWARD chain, whose policy dockerd sets to DROP),
# starts it when it is not running, waits for its socket, and imports the
# local test images into its k8s.io namespace (no registry is reachable: the
# images come from the local dockerd, which hack/setup.sh prepares).
#
#   hack/containerd.sh            set up and start (safe to run again)
#   hack/containerd.sh import REF...  also import these docker images
#   hack/containerd.sh stop       stop the private containerd
#
# The socket is $PODRUN_CONTAINERD_SOCK (default
# /run/podrun-containerd/containerd.sock).
set -euo pipefail

SOCK=${PODRUN_CONTAINERD_SOCK:-/run/podrun-containerd/containerd.sock}
RUN_DIR=$(dirname "$SOCK")
ROOT=/var/lib/podrun-containerd
CONF_DIR=/etc/podrun-containerd
CONFIG=$CONF_DIR/config.toml
CNI_CONF_DIR=$CONF_DIR/cni
LOG=/var/log/podrun-containerd.log
PIDFILE=$RUN_DIR/containerd.pid
# The sandbox (pause) image CRI runs every pod's sandbox with: containerd
# takes it from its config, not from the CRI call, so it is built here.
PAUSE_IMAGE=podrun/cri-pause:1
BUSYBOX_IMAGE=${PODRUN_TEST_IMAGE:-podrun/busybox:test}
SUBNET=${PODRUN_CRI_SUBNET:-10.237.0.0/16}

log() { printf 'containerd.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "run as root (it installs packages and starts containerd)"
	exit 1
fi

ctr_() { ctr --address "$SOCK" --namespace k8s.io "$@"; }
up() { ctr --address "$SOCK" version >/dev/null 2>&1; }

stop() {
	if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
		log "stopping containerd $(cat "$PIDFILE")"
		kill "$(cat "$PIDFILE")"
		for _ in $(seq 1 100); do
			kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$PIDFILE"
}

if [ "${1:-}" = stop ]; then
	stop
	exit 0
fi

missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -gt 0 ]; then
	log "apt-get update; apt-get install ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$CONF_DIR" "$CNI_CONF_DIR" "$RUN_DIR" "$ROOT"
config=$(
	cat <<EOF
# podrun's private containerd (hack/containerd.sh): never the system one.
version = 2
root = "$ROOT/root"
state = "$RUN_DIR/state"

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE a negative oom_score_adj cannot be set.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_CONF_DIR"
EOF
)
cni=$(
	cat <<EOF
{
  "cniVersion": "0.4.0",
  "name": "podrun-cri",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "podruncri0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$ROOT/cni-ipam"
      }
    },
    {"type": "firewall"},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF
)
changed=
if [ "$(cat "$CONFIG" 2>/dev/null)" != "$config" ]; then
	printf '%s\n' "$config" >"$CONFIG"
	changed=1
fi
if [ "$(cat "$CNI_CONF_DIR/10-podrun.conflist" 2>/dev/null)" != "$cni" ]; then
	printf '%s\n' "$cni" >"$CNI_CONF_DIR/10-podrun.conflist"
	changed=1
fi
if [ -n "$changed" ] && up; then
	log "configuration changed: restarting the private containerd"
	stop
fi

if ! up; then
	log "starting containerd on $SOCK"
	setsid nohup containerd --config "$CONFIG" >>"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 100); do
		up && break
		sleep 0.1
	done
	if ! up; then
		log "containerd did not come up; see $LOG"
		tail -20 "$LOG" >&2 || true
		exit 3
	fi
fi

# import_image REF: the docker image REF into containerd's k8s.io namespace,
# unless it is there already.
import_image() {
	local ref=$1 full=$1
	case "${ref%%/*}" in
	*.*|*:*|localhost) ;;
	*) full=docker.io/$ref ;;
	esac
	# Read whole, then tested: `| grep -q` would end the pipe early, and
	# pipefail would take ctr's SIGPIPE for "not there".
	local found
	found=$(ctr_ images check "name==$full" 2>/dev/null || true)
	if [ -n "$found" ]; then
		return
	fi
	log "importing $ref"
	docker save "$ref" | ctr_ images import --no-unpack=false - >/dev/null
}

# The pause image: busybox's sh waiting for a signal, reaping what it
# inherits. Built once from the test image's rootfs.
if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
	bb=$(dpkg -L busybox-static | grep -E '/bin/busybox$' | head -1)
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root/bin"
	cp "$bb" "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	ln -s busybox "$root/bin/sleep"
	tar -C "$root" -c . | docker import \
		-c 'ENTRYPOINT ["/bin/sh", "-c", "trap \"exit 0\" TERM INT; while :; do sleep 2147483647 & wait $!; done"]' \
		- "$PAUSE_IMAGE" >/dev/null
fi
import_image "$PAUSE_IMAGE"
import_image "$BUSYBOX_IMAGE"
if [ "${1:-}" = import ]; then
	shift
	for ref in "$@"; do import_image "$ref"; done
fi
log "ready: $(containerd --version | awk '{print $3}') on unix://$SOCK"
