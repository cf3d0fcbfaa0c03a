#!/usr/bin/env bash
# Bring-up on containerd (CRI) next to its bound and the Docker path: for
# each N in $PODS (default "1 10"), $RUNS runs (default 3) of, in turn,
#   cri-bound      bench/bound -cri-endpoint: RunPodSandbox + CreateContainer
#                  + StartContainer per pod, one goroutine per pod
#   podrun-cri     podrun once --wait running --container-runtime-endpoint
#   docker-bound   bench/bound on the Docker Engine API
#   podrun-docker  podrun once --wait running on Docker
# each on a node of its own, removed after; prints every run and the medians.
# Needs root, dockerd (hack/setup.sh) and the private containerd
# (hack/containerd.sh, run here). Timings on a shared machine are noisy:
# compare medians of one run of this script, not runs of different ones.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
PODS=${PODS:-1 10}
RUNS=${RUNS:-3}
EP=${PODRUN_CRI_ENDPOINT:-unix:///run/podrun-containerd/containerd.sock}
IMG=podrun/busybox:test

bash hack/containerd.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/podrun" . && go build -o "$bin/bound" ./bench/bound
# One infra image for podrun on Docker and Docker's bound: podrun's own.
infra=$(docker images --format '{{.Repository}}:{{.Tag}}' podrun/pause | head -1)
[ -n "$infra" ] || { echo "no podrun/pause image: run podrun once on Docker first" >&2; exit 1; }

now() { date +%s.%N; }
pods() { # pods DIR N
	mkdir -p "$1"
	for i in $(seq 1 "$2"); do
		printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-%03d\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: app\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: ["sleep", "3600"]\n' "$i" "$IMG" >"$1/p-$i.yaml"
	done
}
# run SUBJECT N: prints the seconds one bring-up of N pods took.
run() {
	local node="bench-cri-$RANDOM$RANDOM" dir="$bin/$RANDOM" t0 t1
	case $1 in
	cri-bound)
		"$bin/bound" -cri-endpoint "$EP" -node "$node" -n "$2"
		"$bin/bound" -cri-endpoint "$EP" -node "$node" -n "$2" -check
		"$bin/bound" -cri-endpoint "$EP" -node "$node" -remove ;;
	docker-bound)
		"$bin/bound" -infra "$infra" -node "$node" -n "$2"
		docker ps -aq --filter "label=io.podrun.node=$node" | xargs -r docker rm -f >/dev/null ;;
	podrun-cri|podrun-docker)
		local args=(--node-name "$node" --root-dir "$dir/root" --config "")
		if [ "$1" = podrun-cri ]; then args+=(--container-runtime-endpoint "$EP"); else args+=(--pod-infra-image "$infra"); fi
		pods "$dir/m" "$2"
		t0=$(now)
		"$bin/podrun" once "${args[@]}" --wait running --timeout 5m "$dir/m" >/dev/null 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }
		t1=$(now)
		echo "$t1 - $t0" | bc
		"$bin/podrun" down "${args[@]}" --all >/dev/null 2>&1 ;;
	esac
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

subjects=(cri-bound podrun-cri docker-bound podrun-docker)
for n in $PODS; do
	declare -A all=()
	for r in $(seq 1 "$RUNS"); do
		for k in 0 1 2 3; do
			s=${subjects[$(((k + r) % 4))]}
			secs=$(run "$s" "$n")
			all[$s]+="$secs "
			printf 'pods %3d run %d %-14s %7.3f s\n' "$n" "$r" "$s" "$secs"
		done
	done
	for s in "${subjects[@]}"; do
		printf 'pods %3d %-14s median %7.3f s  (%s)\n' "$n" "$s" "$(tr ' ' '\n' <<<"${all[$s]}" | grep . | median)" "${all[$s]}"
	done
	unset all
done
