#!/usr/bin/env bash
# Builds what Kubernetes' node conformance specs need and no registry here
# can give: the e2e.test binary of k8s.io/kubernetes (the [NodeConformance]
# specs live in test/e2e/common) and the ginkgo CLI that runs it in
# parallel, and the local Docker images those specs
# name, under their real names (test/utils/image/manifest.go of the same
# version):
#   registry.k8s.io/e2e-test-images/agnhost:<v>   agnhost (ENTRYPOINT /agnhost, CMD pause),
#                                                 Debian's curl and nc.openbsd (as nc),
#                                                 bash-static as /bin/bash,
#                                                 /localhost.crt and /localhost.key
#   registry.k8s.io/e2e-test-images/busybox:<v>   Debian's busybox-static
#   registry.k8s.io/e2e-test-images/nonewprivs:<v> the nnp setuid program
#   registry.k8s.io/e2e-test-images/nonroot:<v>   busybox with USER 1234
#   registry.k8s.io/e2e-test-images/nginx:<v>     a stand-in: agnhost serving :80
#   registry.k8s.io/e2e-test-images/glibc-dns-testing:<v>  a stand-in: busybox (its
#                                                 specs run hostname and hostname -f)
#   registry.k8s.io/pause:<v>                     agnhost pause
# each a busybox-static rootfs with the users and groups upstream's images
# have (uid 1000 user-defined-in-image, gid 50000 group-defined-in-image).
#
# Everything is built from the Go module proxy in the same throwaway module
# hack/k8s.sh uses, and cached outside the checkout, keyed by version:
#   ${PODRUN_CACHE:-/var/cache/podrun}/k8s/<version>/conformance/
# A warm run checks the cache and the images' labels (seconds); a cold one
# compiles e2e.test (5-10 min on 2 cores, about 120 MB).
set -euo pipefail

# shellcheck source=hack/k8s-module.sh
. "$(dirname "$0")/k8s-module.sh"

# Bump when the recipe below changes what a cached build holds.
RECIPE=1
CACHE_ROOT=${PODRUN_CACHE:-/var/cache/podrun}/k8s
DEST=$CACHE_ROOT/$K8S_VERSION/conformance
LABEL=io.podrun.conformance.sha256
BINS=(e2e.test ginkgo agnhost nnp)

export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off

log() { printf 'conformance-build: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

start=$(date +%s)
mkdir -p "$CACHE_ROOT"
lock_cache "$CACHE_ROOT/.conformance.lock"

cache_ok() { cache_complete "$DEST" "$RECIPE" "${BINS[@]}"; }

build() {
	command -v go >/dev/null || die "Go is needed at /usr/local/go"
	rm -rf "$CACHE_ROOT"/.tmp-conformance-*
	local out work kdir
	out=$(mktemp -d "$CACHE_ROOT/.tmp-conformance-$K8S_VERSION.XXXXXX")
	chmod 755 "$out"
	work=$(mktemp -d /tmp/podrun-conformance-build.XXXXXX)
	trap 'rm -rf "$work" "$out"' EXIT
	log "building e2e.test, ginkgo and agnhost $K8S_VERSION from the Go module proxy (cold: 5-10 min on 2 cores)"
	k8s_module "$work" podrun.local/conformancebuild
	kdir=$K8S_SOURCE
	local ld t0
	ld=$(k8s_ldflags)
	t0=$(date +%s)
	(
		cd "$work"
		go mod download k8s.io/kubernetes
		go test -c -p 2 -mod=mod -trimpath -ldflags "$ld" -o "$out/e2e.test" k8s.io/kubernetes/test/e2e
		go build -p 2 -mod=mod -trimpath -ldflags "$ld" -o "$out/agnhost" k8s.io/kubernetes/test/images/agnhost
		# The ginkgo CLI of the version e2e.test is built with: it runs the
		# specs in parallel processes.
		go build -p 2 -mod=mod -trimpath -o "$out/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
		go build -p 2 -mod=mod -trimpath -o "$out/nnp" "$kdir/test/images/nonewprivs/nnp.go"
		# The image names and tags the specs ask for, from the same source.
		sed -n 's#^[[:space:]]*configs\[\([A-Za-z0-9]*\)\] = Config{list\.[A-Za-z0-9]*, "\([^"]*\)", "\([^"]*\)"}#\1 \2 \3#p' \
			"$kdir/test/utils/image/manifest.go" >"$out/IMAGES"
	)
	log "built in $(($(date +%s) - t0)) s"
	grep -q '^Agnhost agnhost ' "$out/IMAGES" || die "no agnhost in test/utils/image/manifest.go"
	(cd "$out" && sha256sum "${BINS[@]}" >SHA256SUMS)
	printf 'recipe=%s\nkubernetes=%s\ngo=%s\n' "$RECIPE" "$K8S_VERSION" "$(go env GOVERSION)" >"$out/BUILD-INFO"
	rm -rf "$DEST"
	mv "$out" "$DEST"
	rm -rf "$work"
	trap - EXIT
	log "cached in $DEST ($(du -sh "$DEST" | cut -f1))"
}

if cache_ok; then
	log "binaries cached in $DEST"
else
	build
fi

command -v docker >/dev/null && docker info >/dev/null 2>&1 ||
	die "Docker is not running; run hack/setup.sh first"
bb=$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -1 || true)
[ -n "$bb" ] || die "busybox-static is not installed; run hack/setup.sh first"
bash_static=$(dpkg -L bash-static 2>/dev/null | grep -E '/bin/bash-static$' | head -1 || true)
[ -n "$bash_static" ] || die "bash-static is not installed; run hack/setup.sh first"

# Files the images take from the Kubernetes source (agnhost's TLS pair).
[ -n "${K8S_SOURCE:-}" ] || k8s_source

busybox_deb=$(ls "${PODRUN_CACHE:-/var/cache/podrun}"/debs/busybox_*.deb 2>/dev/null | head -1 || true)
[ -n "$busybox_deb" ] || die "Debian's busybox package is not downloaded; run hack/setup.sh first"

tag_of() { awk -v k="$1" '$1 == k { print $3 }' "$DEST/IMAGES"; }
recipe_sum=$(cat "$DEST/SHA256SUMS" "$0" | sha256sum | cut -d' ' -f1)

# image REF SETUP_FUNCTION IMPORT_CHANGES...: a busybox rootfs, changed by
# SETUP_FUNCTION (given the rootfs dir), imported as REF, unless REF is
# there with this build's label.
image() {
	local ref=$1 setup=$2 have root old
	shift 2
	old=$(docker image inspect -f '{{.ID}}' "$ref" 2>/dev/null || true)
	if have=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$ref" 2>/dev/null); then
		[ "$have" = "$recipe_sum" ] && return
		if [ -z "$have" ] || [ "$have" = "<no value>" ]; then
			log "$ref exists and was not made by this script; left as it is"
			return
		fi
	fi
	root=$(mktemp -d /tmp/podrun-conformance-rootfs.XXXXXX)
	mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/usr/local/bin" \
		"$root/etc" "$root/tmp" "$root/root" "$root/var/run" "$root/home/user-defined-in-image"
	chmod 1777 "$root/tmp"
	cp "$bb" "$root/bin/busybox"
	local applet
	for applet in $("$root/bin/busybox" --list); do
		[ "$applet" = busybox ] && continue # would replace the binary
		ln -sf busybox "$root/bin/$applet"
	done
	cat >"$root/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh
		nobody:x:65534:65534:nobody:/:/bin/false
	EOF
	cat >"$root/etc/group" <<-'EOF'
		root:x:0:
		user-defined-in-image:x:1000:
		group-defined-in-image:x:50000:user-defined-in-image
		nobody:x:65534:
	EOF
	chown 1000:1000 "$root/home/user-defined-in-image"
	"$setup" "$root"
	log "making image $ref"
	local changes=(-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c "LABEL $LABEL=$recipe_sum")
	local c
	for c in "$@"; do
		changes+=(-c "$c")
	done
	tar -C "$root" --numeric-owner -c . | docker import "${changes[@]}" - "$ref" >/dev/null
	rm -rf "$root"
	# The image this one replaces, if nothing uses it any more.
	if [ -n "$old" ]; then
		docker image rm "$old" >/dev/null 2>&1 || true
	fi
}

# with_host_binary ROOT SRC DEST: the host's dynamically linked SRC at DEST
# in ROOT, with the shared libraries and the loader it needs (as ldd names
# them, at the same paths).
with_host_binary() {
	mkdir -p "$1$(dirname "$3")"
	cp -L "$2" "$1$3"
	with_host_libs "$1" "$2"
}
# with_host_libs ROOT BINARY: the host's shared libraries and loader that
# BINARY needs, at their paths in ROOT.
with_host_libs() {
	local lib
	for lib in $(ldd "$2" | grep -oE '/[^ ]+'); do
		[ -e "$1$lib" ] && continue
		mkdir -p "$1$(dirname "$lib")"
		cp -L "$lib" "$1$lib"
	done
}
# Upstream's agnhost is Alpine with curl, netcat-openbsd (nc -u; busybox's
# nc has none), bash and porter's TLS pair at /localhost.crt and
# /localhost.key: lifecycle-hook specs curl from exec hooks and serve
# netexec over TLS, networking specs send UDP with nc, the terminating-pod
# probe specs trap SIGTERM in /bin/bash -c.
# Its busybox is Debian's dynamic one (hack/setup.sh fetches it): the
# busybox-static shell runs its own applet before anything on PATH, so
# `sh -c 'nc ...'` would not reach netcat-openbsd.
with_agnhost() {
	local applet
	dpkg-deb --fsys-tarfile "$busybox_deb" | tar -xO ./bin/busybox >"$1/bin/busybox"
	chmod 755 "$1/bin/busybox"
	find "$1/bin" -type l -lname busybox -delete
	for applet in $("$1/bin/busybox" --list); do
		ln -s busybox "$1/bin/$applet"
	done
	with_host_libs "$1" "$1/bin/busybox"
	cp "$DEST/agnhost" "$1/agnhost"
	ln -s agnhost "$1/agnhost-2"
	mkdir -p "$1/uploads"
	with_host_binary "$1" /usr/bin/curl /usr/bin/curl
	with_host_binary "$1" /usr/bin/nc.openbsd /usr/bin/nc
	cp "$K8S_SOURCE/test/images/agnhost/porter/localhost.crt" "$K8S_SOURCE/test/images/agnhost/porter/localhost.key" "$1/"
	chmod 644 "$1/localhost.crt" "$1/localhost.key"
	cp "$bash_static" "$1/bin/bash"
}
with_nothing() { :; }
with_nnp() {
	cp "$DEST/nnp" "$1/usr/local/bin/nnp"
	chmod 4755 "$1/usr/local/bin/nnp"
}
with_pause() {
	cp "$DEST/agnhost" "$1/agnhost"
	printf '#!/bin/sh\nexec /agnhost pause\n' >"$1/pause"
	chmod 755 "$1/pause"
}

e2e=registry.k8s.io/e2e-test-images
image "$e2e/agnhost:$(tag_of Agnhost)" with_agnhost 'ENTRYPOINT ["/agnhost"]' 'CMD ["pause"]'
image "$e2e/busybox:$(tag_of BusyBox)" with_nothing 'CMD ["sh"]'
image "$e2e/nonewprivs:$(tag_of Nonewprivs)" with_nnp 'CMD ["nnp"]'
image "$e2e/nginx:$(tag_of Nginx)" with_agnhost 'ENTRYPOINT ["/agnhost"]' 'CMD ["netexec", "--http-port=80"]'
# test/images/nonroot: busybox run as uid 1234.
image "$e2e/nonroot:$(tag_of NonRoot)" with_nothing 'CMD ["sh"]' 'USER 1234'
image "$e2e/glibc-dns-testing:$(tag_of GlibcDnsTesting)" with_nothing 'CMD ["sh"]'
image "registry.k8s.io/pause:$(tag_of Pause)" with_pause 'ENTRYPOINT ["/pause"]'

log "ready in $(($(date +%s) - start)) s: $DEST"
