#!/usr/bin/env bash
# Runs podrun's benchmarks and writes docs/benchmarks.md (`make bench`).
#
# Builds podrun (static, so that its infra image is one file), bench/bound
# (the Engine-API lower bound) and bench/harness, runs the micro-benchmarks
# (go test -bench, -benchmem) of the manifest decoder and compute-actions,
# then the harness: bring-up, update reaction, steady state and teardown against the
# real dockerd, each measured next to its reference in the same run; and,
# when podrun's private containerd answers (hack/containerd.sh sets it up;
# without it the doc says that part was skipped), the same on containerd
# (podrun's CRI engine): bring-up next to the CRI bound in the same
# rotation, update reaction next to containerd's own create + start and
# stop, idle cost next to containerd's CPU alone.
#
# Environment:
#   BENCH_RUNS=5            repetitions of each measurement
#   BENCH_SIZES=1,10,50     pod counts for bring-up
#   BENCH_STEADY=60s        length of each steady-state window
#   BENCH_STEADY_SIZES=10,100
#   BENCH_UPDATE_PODS=50
#   BENCH_EVENT_TRIALS=3    containers killed after each steady window
#   BENCH_STUCK=30s         how long a pod that cannot start is watched
#   BENCH_TEARDOWN_PODS=100 running pods removed by down DIR, down --all and
#                           Docker's parallel rm -f (the reference)
#   BENCH_BEFORE=<git ref>  also measure podrun built from that ref, in the
#                           same run (before/after figures of a change)
#   BENCH_BEFORE_PATCH=<file>  a patch (-p1) applied to that ref's tree
#                           first; bench/before-sync-loop.patch undoes the
#                           pod-scoped refresh of the sync loop (whose
#                           runner.go part went into HEAD with another
#                           change), giving the code before it
#   BENCH_OUT=docs/benchmarks.md   where the doc goes ('' prints it)
#   BENCH_ONLY=bringup,update,steady,stuck,teardown
#   BENCH_CRI_ENDPOINT=unix:///run/podrun-containerd/containerd.sock
#                           the CRI runtime bring-up, update reaction and
#                           idle cost are also measured on ('' for none)
#   BENCH_SHORT=1           a quick look: 3 runs, sizes 1,10, 15 s windows
#                           of 10 and 50 pods, 3 edits of 20 pods, 10 s
#                           stuck pods, a teardown of 20 pods
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if [ "${BENCH_SHORT:-}" = 1 ]; then
	: "${BENCH_RUNS:=3}" "${BENCH_SIZES:=1,10}" "${BENCH_STEADY:=15s}" "${BENCH_STEADY_SIZES:=10,50}" "${BENCH_UPDATE_PODS:=20}" "${BENCH_STUCK:=10s}" "${BENCH_TEARDOWN_PODS:=20}"
fi
RUNS=${BENCH_RUNS:-5}
SIZES=${BENCH_SIZES:-1,10,50}
STEADY=${BENCH_STEADY:-60s}
STEADY_SIZES=${BENCH_STEADY_SIZES:-10,100}
UPDATE_PODS=${BENCH_UPDATE_PODS:-50}
OUT=${BENCH_OUT-docs/benchmarks.md}
ONLY=${BENCH_ONLY:-bringup,update,steady,stuck,teardown}
TEARDOWN_PODS=${BENCH_TEARDOWN_PODS:-100}
EVENT_TRIALS=${BENCH_EVENT_TRIALS:-3}
STUCK=${BENCH_STUCK:-30s}
CRI_ENDPOINT=${BENCH_CRI_ENDPOINT-unix:///run/podrun-containerd/containerd.sock}

bash hack/setup.sh

tmp=$(mktemp -d /tmp/podrun-bench-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "== build"
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o "$tmp/podrun" .
go build -o "$tmp/bound" ./bench/bound
go build -o "$tmp/harness" ./bench/harness

before_args=()
if [ -n "${BENCH_BEFORE:-}" ]; then
	echo "== build podrun at $BENCH_BEFORE"
	mkdir "$tmp/before"
	git archive "$BENCH_BEFORE" | tar -x -C "$tmp/before"
	if [ -n "${BENCH_BEFORE_PATCH:-}" ]; then
		patch -s -d "$tmp/before" -p1 <"$BENCH_BEFORE_PATCH"
	fi
	(cd "$tmp/before" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$tmp/podrun-before" .)
	label="$(git rev-parse --short "$BENCH_BEFORE")"
	[ -n "${BENCH_BEFORE_PATCH:-}" ] && label="$label + $(basename "$BENCH_BEFORE_PATCH")"
	before_args=(--podrun-before "$tmp/podrun-before" --before-label "before: $label")
fi

echo "== micro-benchmarks"
go test -run '^$' -bench . -benchmem -count "${BENCH_MICRO_COUNT:-5}" ./manifest ./runner | tee "$tmp/micro.txt"

echo "== harness"
cmdline="make bench"
[ -n "${BENCH_BEFORE_PATCH:-}" ] && cmdline="BENCH_BEFORE_PATCH=$BENCH_BEFORE_PATCH $cmdline"
[ -n "${BENCH_BEFORE:-}" ] && cmdline="BENCH_BEFORE=$BENCH_BEFORE $cmdline"
[ "${BENCH_SHORT:-}" = 1 ] && cmdline="BENCH_SHORT=1 $cmdline"
"$tmp/harness" --podrun "$tmp/podrun" --bound "$tmp/bound" "${before_args[@]}" \
	--runs "$RUNS" --sizes "$SIZES" --steady "$STEADY" --steady-sizes "$STEADY_SIZES" \
	--update-pods "$UPDATE_PODS" --event-trials "$EVENT_TRIALS" --stuck "$STUCK" --teardown-pods "$TEARDOWN_PODS" --only "$ONLY" --cri-endpoint "$CRI_ENDPOINT" --micro "$tmp/micro.txt" \
	--out "$OUT" --json "${BENCH_JSON:-}" --command "$cmdline"
