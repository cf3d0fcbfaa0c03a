#!/usr/bin/env bash
# Prepares a machine for podrun's examples and tests: installs Docker from the
# OS packages if missing, starts dockerd if it is not running, and builds the
# local busybox image the examples and tests use (no registry is needed).
# Safe to run again: every step checks first. With --containerd it also
# prepares podrun's private containerd for the CRI engine (hack/containerd.sh).
set -euo pipefail

WITH_CONTAINERD=
[ "${1:-}" = --containerd ] && WITH_CONTAINERD=1

BUSYBOX_IMAGE=${PODRUN_TEST_IMAGE:-podrun/busybox:test}

log() { printf 'setup: %s\n' "$*" >&2; }

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		log "run as root (it installs packages and starts dockerd)"
		exit 1
	fi
}

apt_update() {
	need_root
	if [ -z "${APT_UPDATED:-}" ]; then
		log "apt-get update"
		apt-get update -qq
		APT_UPDATED=1
	fi
}

apt_install() {
	apt_update
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Docker engine.
if ! command -v dockerd >/dev/null 2>&1; then
	apt_install docker.io
fi
# busybox-static gives the rootfs of the test image.
if ! dpkg -s busybox-static >/dev/null 2>&1; then
	apt_install busybox-static
fi
# curl, netcat-openbsd and bash-static (as /bin/bash) go into the
# conformance agnhost image (hack/conformance-build.sh), as upstream's image
# has them: specs run curl, nc -u and /bin/bash -c in it.
for pkg in curl netcat-openbsd bash-static; do
	if ! dpkg -s "$pkg" >/dev/null 2>&1; then
		apt_install "$pkg"
	fi
done
# And Debian's dynamically linked busybox, which cannot be installed beside
# busybox-static: its sh looks a command up on PATH, as Alpine's does.
DEB_DIR=${PODRUN_CACHE:-/var/cache/podrun}/debs
if ! ls "$DEB_DIR"/busybox_*.deb >/dev/null 2>&1; then
	apt_update # a fresh machine has no package lists
	log "apt-get download busybox"
	mkdir -p "$DEB_DIR"
	dl=$(mktemp -d)
	chmod 755 "$dl" # apt's _apt user writes there
	(cd "$dl" && apt-get download -qq busybox)
	mv "$dl"/busybox_*.deb "$DEB_DIR/"
	rmdir "$dl"
fi

docker_ok() { docker info >/dev/null 2>&1; }

if ! docker_ok; then
	need_root
	log "starting dockerd"
	mkdir -p /var/log
	nohup dockerd >/var/log/podrun-dockerd.log 2>&1 &
	for _ in $(seq 1 60); do
		docker_ok && break
		sleep 0.5
	done
	if ! docker_ok; then
		log "dockerd did not come up; see /var/log/podrun-dockerd.log"
		tail -20 /var/log/podrun-dockerd.log >&2 || true
		exit 3
	fi
fi

# The local busybox image: a rootfs with busybox-static and its applets.
if ! docker image inspect "$BUSYBOX_IMAGE" >/dev/null 2>&1; then
	log "building $BUSYBOX_IMAGE from busybox-static"
	bb=$(dpkg -L busybox-static | grep -E '/bin/busybox$' | head -1)
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/etc" "$root/tmp" "$root/var/www" "$root/root"
	chmod 1777 "$root/tmp"
	cp "$bb" "$root/bin/busybox"
	for applet in $("$root/bin/busybox" --list); do
		# --list names busybox itself; linking it would replace the binary.
		[ "$applet" = busybox ] && continue
		ln -sf busybox "$root/bin/$applet"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
	tar -C "$root" -c . | docker import \
		-c 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'CMD ["/bin/sh"]' \
		- "$BUSYBOX_IMAGE" >/dev/null
fi
# A local registry with basic auth, for the tests of authenticated pulls
# (the tests start and stop their own with hack/registry.sh).
bash "$(dirname "$0")/registry.sh" install

log "ready: docker $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), image $BUSYBOX_IMAGE"
if [ -n "$WITH_CONTAINERD" ]; then
	bash "$(dirname "$0")/containerd.sh"
fi
