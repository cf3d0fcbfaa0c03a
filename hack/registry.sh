#!/usr/bin/env bash
# A throwaway image registry with basic auth on 127.0.0.1, for the tests of
# image pulls with credentials (Debian's docker-registry, htpasswd from
# apache2-utils). Docker talks plain HTTP to registries on 127.0.0.0/8
# without any daemon setting.
#
#   hack/registry.sh install                   install the packages if missing
#   hack/registry.sh start DIR PORT USER PASS  run one with its files in DIR
#   hack/registry.sh stop DIR                  stop it (DIR is left to remove)
#
# start returns once the registry answers; its pid is in DIR/registry.pid
# and its log in DIR/registry.log.
set -euo pipefail

log() { printf 'registry: %s\n' "$*" >&2; }

install() {
	if command -v docker-registry >/dev/null 2>&1 && command -v htpasswd >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then
		return
	fi
	if [ "$(id -u)" -ne 0 ]; then
		log "run as root to install docker-registry and apache2-utils"
		exit 1
	fi
	log "apt-get install docker-registry apache2-utils curl"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry apache2-utils curl >/dev/null
}

start() {
	local dir=$1 port=$2 user=$3 pass=$4
	install
	mkdir -p "$dir/data"
	htpasswd -Bbn "$user" "$pass" >"$dir/htpasswd"
	cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
auth:
  htpasswd:
    realm: podrun-test
    path: $dir/htpasswd
EOF
	# Its own session, so that it outlives this script, and no more.
	setsid docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 </dev/null &
	echo $! >"$dir/registry.pid"
	for _ in $(seq 1 100); do
		# Up when /v2/ asks for credentials.
		if code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/") && [ "$code" = 401 ]; then
			return
		fi
		if ! kill -0 "$(cat "$dir/registry.pid")" 2>/dev/null; then
			log "docker-registry exited:"
			cat "$dir/registry.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	log "docker-registry does not answer on 127.0.0.1:$port; see $dir/registry.log"
	stop "$dir"
	exit 1
}

stop() {
	local dir=$1 pid
	[ -f "$dir/registry.pid" ] || return 0
	pid=$(cat "$dir/registry.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$dir/registry.pid"
}

case "${1:-}" in
install) install ;;
start)
	[ $# -eq 5 ] || { log "usage: $0 start DIR PORT USER PASS"; exit 2; }
	start "$2" "$3" "$4" "$5"
	;;
stop)
	[ $# -eq 2 ] || { log "usage: $0 stop DIR"; exit 2; }
	stop "$2"
	;;
*)
	log "usage: $0 install | start DIR PORT USER PASS | stop DIR"
	exit 2
	;;
esac
