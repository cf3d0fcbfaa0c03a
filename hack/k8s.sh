#!/usr/bin/env bash
# Builds the real Kubernetes control plane that podrun's cluster-mode tests
# run against (clustertest/, e2e/cluster_test.go): kubeadm, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes,
# and etcd from go.etcd.io/etcd/server/v3, all from the Go module proxy
# (no registry, no GitHub), and makes the local Docker images kubeadm's
# static pods name (registry.k8s.io/kube-apiserver:v1.37.2, ...), each a
# busybox-static rootfs with the binary in /usr/local/bin.
#
# Binaries are cached outside the checkout, keyed by version:
#   ${PODRUN_CACHE:-/var/cache/podrun}/k8s/v1.37.2/{kubeadm,kube-apiserver,...,etcd}
# A warm run checks the cache and the images' labels and does nothing else
# (under a second); a cold run takes 5-9 min (13 on a busy machine) on 2 cores and about 4 GiB of Go
# build and module caches besides the ~400 MiB of binaries. A lock keeps
# two runs from colliding, and a build is renamed into place only when
# complete, so a killed run never leaves half a cache.
#
# kube-proxy is a stand-in (a script that sleeps), and no CoreDNS image is
# made: the tests want CoreDNS's pull to fail.
set -euo pipefail

# shellcheck source=hack/k8s-module.sh
. "$(dirname "$0")/k8s-module.sh"

# Bump when the recipe below changes what a cached build holds.
RECIPE=1
CACHE_ROOT=${PODRUN_CACHE:-/var/cache/podrun}/k8s
DEST=$CACHE_ROOT/$K8S_VERSION
REGISTRY=registry.k8s.io
LABEL=io.podrun.k8s.sha256
K8S_BINS=(kubeadm kube-apiserver kube-controller-manager kube-scheduler kubectl)

export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off

log() { printf 'k8s: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

start=$(date +%s)
mkdir -p "$CACHE_ROOT"
lock_cache "$CACHE_ROOT/.lock"

# A build is complete when BUILD-INFO names this recipe and every binary
# listed in SHA256SUMS is there.
cache_ok() { cache_complete "$DEST" "$RECIPE" "${K8S_BINS[@]}" etcd; }

build() {
	command -v go >/dev/null || die "Go is needed at /usr/local/go"
	# Leftovers of killed runs (we hold the lock: nobody else is building).
	rm -rf "$CACHE_ROOT"/.tmp-* "$CACHE_ROOT"/.old-*
	local out work
	out=$(mktemp -d "$CACHE_ROOT/.tmp-$K8S_VERSION.XXXXXX")
	chmod 755 "$out"
	work=$(mktemp -d /tmp/podrun-k8s-build.XXXXXX)
	trap 'rm -rf "$work" "$out"' EXIT
	log "building Kubernetes $K8S_VERSION and etcd from the Go module proxy (cold: 5-9 min (13 on a busy machine) on 2 cores)"

	# The Kubernetes binaries, built in a throwaway module.
	mkdir -p "$work/k8s"
	k8s_module "$work/k8s" podrun.local/k8sbuild
	local ld
	ld=$(k8s_ldflags)
	local t0
	t0=$(date +%s)
	(
		cd "$work/k8s"
		go mod download k8s.io/kubernetes
		go build -p 2 -mod=mod -trimpath -ldflags "$ld" -o "$out/" \
			$(printf 'k8s.io/kubernetes/cmd/%s ' "${K8S_BINS[@]}")
	)
	log "kubernetes binaries built in $(($(date +%s) - t0)) s"
	# Each binary's answer is read whole before it is checked: `X | grep -q`
	# ends grep at the first match, X's next write then kills it (SIGPIPE),
	# and pipefail fails the check of a good binary.
	local says
	says=$("$out/kubeadm" version -o short)
	[ "$says" = "$K8S_VERSION" ] || die "kubeadm says $says, want $K8S_VERSION"

	# The image names kubeadm itself asks for, and among them the etcd it
	# deploys for this version, as image tag (3.7.0-0) and module version
	# (v3.7.0). Asked of kubeadm, not read from its constants: its
	# SupportedEtcdVersion map may lack this minor (v1.37.2's stops at 36),
	# and kubeadm then falls back to the nearest entry.
	"$out/kubeadm" config images list --kubernetes-version "$K8S_VERSION" >"$out/IMAGES"
	local etcd_tag etcd_mod
	etcd_tag=$(sed -n 's#^'"$REGISTRY"'/etcd:\([0-9.]*-[0-9]*\)$#\1#p' "$out/IMAGES")
	[ -n "$etcd_tag" ] || die "kubeadm names no $REGISTRY/etcd image: $(cat "$out/IMAGES")"
	etcd_mod=v${etcd_tag%-*}
	grep -qx "$REGISTRY/kube-apiserver:$K8S_VERSION" "$out/IMAGES" ||
		die "kubeadm wants other images: $(cat "$out/IMAGES")"

	t0=$(date +%s)
	mkdir -p "$work/etcd"
	(
		cd "$work/etcd"
		go mod init podrun.local/etcdbuild >/dev/null 2>&1
		go get "go.etcd.io/etcd/server/v3@$etcd_mod" >/dev/null
		go build -p 2 -mod=mod -trimpath \
			-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=podrun-build" \
			-o "$out/etcd" go.etcd.io/etcd/server/v3
	)
	log "etcd $etcd_mod built in $(($(date +%s) - t0)) s"

	says=$("$out/etcd" --version)
	grep -q "etcd Version: ${etcd_mod#v}" <<<"$says" || die "etcd says $says"

	cat >"$out/kube-proxy" <<-'EOF'
		#!/bin/sh
		# podrun's stand-in for kube-proxy: runs until told to stop.
		trap 'exit 0' TERM INT
		while :; do sleep 3600 & wait $!; done
	EOF
	chmod 755 "$out/kube-proxy"

	(cd "$out" && sha256sum "${K8S_BINS[@]}" etcd kube-proxy >SHA256SUMS)
	printf 'recipe=%s\nkubernetes=%s\netcd=%s\netcd-image-tag=%s\ngo=%s\n' \
		"$RECIPE" "$K8S_VERSION" "$etcd_mod" "$etcd_tag" "$(go env GOVERSION)" >"$out/BUILD-INFO"
	if [ -e "$DEST" ]; then
		mv "$DEST" "$CACHE_ROOT/.old-$$"
	fi
	mv "$out" "$DEST"
	rm -rf "$CACHE_ROOT/.old-$$" "$work"
	trap - EXIT
	log "cached in $DEST ($(du -sh "$DEST" | cut -f1))"
}

if cache_ok; then
	log "binaries cached in $DEST"
else
	build
fi

# Images. Each is labelled with the sha256 of its binary; one with the label
# and another sum is made again, one without the label is not podrun's and
# is left alone.
command -v docker >/dev/null && docker info >/dev/null 2>&1 ||
	die "Docker is not running; run hack/setup.sh first"
bb=$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -1 || true)
[ -n "$bb" ] || die "busybox-static is not installed; run hack/setup.sh first"

rootfs=""
image() { # image NAME:TAG BINARY
	local ref=$1 bin=$2 sum have old root
	sum=$(awk -v b="$bin" '$2 == b { print $1 }' "$DEST/SHA256SUMS")
	[ -n "$sum" ] || die "no sum for $bin in $DEST/SHA256SUMS"
	if old=$(docker image inspect -f '{{.ID}}' "$ref" 2>/dev/null); then
		have=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$ref")
		if [ "$have" = "$sum" ]; then
			return
		fi
		if [ -z "$have" ] || [ "$have" = "<no value>" ]; then
			log "$ref exists and was not made by hack/k8s.sh; left as it is"
			return
		fi
	else
		old=""
	fi
	if [ -z "$rootfs" ]; then
		rootfs=$(mktemp -d /tmp/podrun-k8s-rootfs.XXXXXX)
		trap 'rm -rf "$rootfs"' EXIT
		mkdir -p "$rootfs/bin" "$rootfs/sbin" "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/usr/local/bin" \
			"$rootfs/etc" "$rootfs/tmp" "$rootfs/root" "$rootfs/var/run"
		chmod 1777 "$rootfs/tmp"
		cp "$bb" "$rootfs/bin/busybox"
		local applet
		for applet in $("$rootfs/bin/busybox" --list); do
			# --list names busybox itself; linking it would replace the binary.
			[ "$applet" = busybox ] && continue
			ln -sf busybox "$rootfs/bin/$applet"
		done
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
		printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
	fi
	log "making image $ref"
	cp "$DEST/$bin" "$rootfs/usr/local/bin/$bin"
	tar -C "$rootfs" -c . | docker import \
		-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c "LABEL $LABEL=$sum" \
		-c "LABEL io.podrun.k8s.binary=$bin" \
		- "$ref" >/dev/null
	rm -f "$rootfs/usr/local/bin/$bin"
	# The image this one replaces, if nothing uses it any more.
	if [ -n "$old" ]; then
		docker image rm "$old" >/dev/null 2>&1 || true
	fi
}

etcd_tag=$(sed -n 's/^etcd-image-tag=//p' "$DEST/BUILD-INFO")
for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
	image "$REGISTRY/$b:$K8S_VERSION" "$b"
done
image "$REGISTRY/etcd:$etcd_tag" etcd

log "ready in $(($(date +%s) - start)) s: $DEST; images $REGISTRY/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}:$K8S_VERSION, $REGISTRY/etcd:$etcd_tag"
