#!/usr/bin/env bash
# Runs podrun's reliability suite (`make chaos`): the chaos scenarios of
# test/chaos (build tag chaos) against the real dockerd, then each fuzz
# target of the manifest decoder and the URL source's body handling, and the
# pod directories' confinement under the root dir, for a bounded time
# (hack/fuzz.sh). Prints one summary line per scenario and exits non-zero on
# any failure.
#
# Environment:
#   CHAOS_FULL=1          the full counts (20 kills, 5 dockerd restarts,
#                         a 3 min crash loop, 30 s per fuzz target, 2 min
#                         for FuzzPodDirConfinement); the
#                         default is the short form CI runs
#   CHAOS_FUZZTIME=30s    time per fuzz target (short form: 15s)
#   CHAOS_PODDIR_FUZZTIME=2m  time for FuzzPodDirConfinement (short form: 30s)
#   CHAOS_RUN=regexp      only the scenarios matching (go test -run)
#   CHAOS_DOCKERD=0       skip the dockerd restart (it is skipped anyway
#                         while another Go test binary runs)
#   CHAOS_VERBOSE=1       every trial's log
#   CHAOS_DOC=docs/reliability.md  write the doc: test/chaos/reliability.tmpl.md
#                         with this run's figures
#   CHAOS_<NAME>=...      per-scenario counts: KILL_TRIALS, DOCKERD_TRIALS,
#                         DOCKERD_DEADLINE, CRASHLOOP, URL_HOLD
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/go/bin:$PATH
started=$(date -u '+%Y-%m-%d %H:%M')
start_s=$(date +%s)

bash hack/setup.sh --containerd || exit 1

if [ "${CHAOS_FULL:-}" = 1 ]; then
	fuzztime=${CHAOS_FUZZTIME:-30s}
	poddir_fuzztime=${CHAOS_PODDIR_FUZZTIME:-2m}
else
	fuzztime=${CHAOS_FUZZTIME:-15s}
	poddir_fuzztime=${CHAOS_PODDIR_FUZZTIME:-30s}
fi

tmp=$(mktemp -d /tmp/podrun-chaos-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "== build"
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o "$tmp/podrun" . || exit 1
go test -c -tags chaos -o "$tmp/chaos.test" ./test/chaos || exit 1

status=0
echo "== chaos scenarios"
args=(-test.timeout 120m -test.count 1)
[ "${CHAOS_VERBOSE:-}" = 1 ] && args+=(-test.v)
[ -n "${CHAOS_RUN:-}" ] && args+=(-test.run "$CHAOS_RUN")
(cd test/chaos && CHAOS_PODRUN="$tmp/podrun" "$tmp/chaos.test" "${args[@]}") | tee "$tmp/chaos.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

summary=$(grep '^chaos: ' "$tmp/chaos.out" || true)
# Each fuzz target runs through hack/fuzz.sh (which also copes with Go's
# -fuzztime shutdown race), its log in $tmp/TARGET.out.
if [ -z "${CHAOS_RUN:-}" ]; then
	echo "== fuzz ($fuzztime per target, $poddir_fuzztime for FuzzPodDirConfinement)"
	for spec in "FuzzParse ./manifest $fuzztime" "FuzzURLBody ./source $fuzztime" \
		"FuzzPodDirConfinement ./runner $poddir_fuzztime"; do
		read -r target pkg ftime <<<"$spec"
		line=$(FUZZ_PREFIX=chaos: FUZZ_LOG="$tmp/$target.out" bash hack/fuzz.sh "$target" "$pkg" "$ftime") || status=1
		echo "$line"
		summary+=$'\n'"$line"
	done
fi

echo
echo "== summary"
echo "$summary"
if [ $status -ne 0 ]; then
	verdict="chaos: FAILED"
else
	verdict="chaos: all held"
fi
echo "$verdict"

if [ -n "${CHAOS_DOC:-}" ]; then
	form=short
	[ "${CHAOS_FULL:-}" = 1 ] && form=full
	cmdline="make chaos"
	[ -n "${CHAOS_RUN:-}" ] && cmdline="CHAOS_RUN='$CHAOS_RUN' $cmdline"
	[ "${CHAOS_FULL:-}" = 1 ] && cmdline="CHAOS_FULL=1 $cmdline"
	cmdline="CHAOS_DOC=$CHAOS_DOC $cmdline"
	mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
	others=$(pgrep -af '\.test( |$)' | grep -v chaos.test | wc -l)
	{
		sed '/<!-- FIGURES -->/,$d' test/chaos/reliability.tmpl.md
		echo "## Latest figures"
		echo
		echo "The $form form, run $started (UTC), $(( ($(date +%s) - start_s) / 60 )) minutes, on $(nproc) CPUs,"
		echo "$mem of memory, kernel $(uname -r), Docker $(docker version --format '{{.Server.Version}}' 2>/dev/null),"
		echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg) ($others other Go test binaries running then), with:"
		echo
		echo "    $cmdline"
		echo
		echo "Result: **${verdict#chaos: }**."
		echo
		echo '```'
		echo "$summary"
		echo '```'
	} >"$CHAOS_DOC"
	echo "wrote $CHAOS_DOC"
fi
exit $status
