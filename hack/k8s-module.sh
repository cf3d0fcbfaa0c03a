# Sourced by hack/k8s.sh and hack/conformance-build.sh: what both need to
# build from k8s.io/kubernetes through the Go module proxy. Expects log and
# die functions.

# The Kubernetes version every cluster-mode and conformance test runs
# (clustertest.Version says the same for the Go tests).
K8S_VERSION=v1.37.2

# k8s_module DIR NAME writes DIR/go.mod: a throwaway module NAME requiring
# k8s.io/kubernetes, whose go.mod replaces its staging modules k8s.io/X
# v0.0.0 with ./staging/src/k8s.io/X; replaces of a dependency do not
# apply, so each is mapped to its published v0.<minor>.<patch>. It sets
# K8S_SOURCE to the module's source directory.
k8s_module() {
	local dir=$1 name=$2 stage
	k8s_source
	stage=v0.${K8S_VERSION#v1.}
	{
		echo "module $name"
		echo
		echo "go $(go env GOVERSION | sed 's/^go//')"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		echo "replace ("
		sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/k8s\.io/.*#\t\1 v0.0.0 => \1 '"$stage"'#p' "$K8S_SOURCE/go.mod"
		echo ")"
	} >"$dir/go.mod"
	grep -q "k8s.io/client-go v0.0.0 => k8s.io/client-go $stage" "$dir/go.mod" ||
		die "no staging replaces found in $K8S_SOURCE/go.mod"
}

# k8s_source sets K8S_SOURCE to the source directory of k8s.io/kubernetes
# K8S_VERSION in the module cache, downloading it if it is not there.
k8s_source() {
	K8S_SOURCE=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$K8S_SOURCE" ] && [ -f "$K8S_SOURCE/go.mod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
}

# k8s_ldflags prints the -ldflags that stamp K8S_VERSION into the binaries,
# as Kubernetes' own build does.
k8s_ldflags() {
	local minor ld=(-s -w) pkg
	minor=${K8S_VERSION#v1.}
	minor=${minor%%.*}
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=(-X "$pkg.gitVersion=$K8S_VERSION" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$minor"
			-X "$pkg.gitCommit=" -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=1970-01-01T00:00:00Z")
	done
	echo "${ld[*]}"
}

# lock_cache FILE holds an exclusive lock on FILE (fd 9) until the script
# exits, waiting for whoever holds it.
lock_cache() {
	exec 9>"$1"
	if ! flock -n 9; then
		log "waiting for another run ($1)"
		flock 9
	fi
}

# cache_complete DEST RECIPE BIN... reports whether DEST holds a finished
# build: BUILD-INFO names RECIPE and K8S_VERSION, SHA256SUMS exists, and
# every BIN is there, executable and summed.
cache_complete() {
	local dest=$1 recipe=$2 b
	shift 2
	[ -f "$dest/BUILD-INFO" ] && [ -f "$dest/SHA256SUMS" ] || return 1
	grep -qx "recipe=$recipe" "$dest/BUILD-INFO" || return 1
	grep -qx "kubernetes=$K8S_VERSION" "$dest/BUILD-INFO" || return 1
	for b in "$@"; do
		[ -x "$dest/$b" ] || return 1
		grep -q " $b\$" "$dest/SHA256SUMS" || return 1
	done
}
