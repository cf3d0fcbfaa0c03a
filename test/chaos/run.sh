#!/usr/bin/env bash
# Runs podrun's reliability suite (`make chaos`): the chaos scenarios of
# test/chaos (build tag chaos) against the real dockerd, then each fuzz
# target of the manifest decoder and the URL source's body handling for a
# bounded time. Prints one summary line per scenario and exits non-zero on
# any failure.
#
# Environment:
#   CHAOS_FULL=1          the full counts (20 kills, 5 dockerd restarts,
#                         a 3 min crash loop, 30 s per fuzz target); the
#                         default is the short form CI runs
#   CHAOS_FUZZTIME=30s    time per fuzz target (short form: 15s)
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

bash hack/setup.sh || exit 1

if [ "${CHAOS_FULL:-}" = 1 ]; then
	fuzztime=${CHAOS_FUZZTIME:-30s}
else
	fuzztime=${CHAOS_FUZZTIME:-15s}
fi

tmp=$(mktemp -d /tmp/podrun-chaos-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "== build"
CGO_ENABLED=0 go build -trimpath -o "$tmp/podrun" . || exit 1
go test -c -tags chaos -o "$tmp/chaos.test" ./test/chaos || exit 1

status=0
echo "== chaos scenarios"
args=(-test.timeout 120m -test.count 1)
[ "${CHAOS_VERBOSE:-}" = 1 ] && args+=(-test.v)
[ -n "${CHAOS_RUN:-}" ] && args+=(-test.run "$CHAOS_RUN")
(cd test/chaos && CHAOS_PODRUN="$tmp/podrun" "$tmp/chaos.test" "${args[@]}") | tee "$tmp/chaos.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

summary=$(grep '^chaos: ' "$tmp/chaos.out" || true)
# fuzz runs one target for $fuzztime (log in $tmp/$1.out) and prints its
# summary line; it fails on a failing input. Go before 1.27 may also fail a
# run whose -fuzztime ends while a worker is busy, with "context deadline
# exceeded" and no input to blame (go.dev/issue/75804): such a run is made
# once more, and if it ends the same way the target's corpus is replayed
# (go test -run), which must pass.
fuzz() {
	local target=$1 start rc try execs note="" out="$tmp/$1.out"
	start=$(date +%s)
	for try in 1 2; do
		go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s ./manifest >"$out" 2>&1
		rc=$?
		if [ $rc -eq 0 ] || ! shutdown_race "$out"; then
			break
		fi
		note="$note; run $try ended in Go's -fuzztime shutdown race (go.dev/issue/75804), no failing input"
	done
	execs=$(grep '^fuzz: elapsed' "$out" | tail -1 | sed -n 's/.*execs: \([0-9]*\).*/\1/p')
	if [ $rc -ne 0 ] && shutdown_race "$out" && go test -count=1 -run "^$target\$" ./manifest >>"$out" 2>&1; then
		rc=0
		note="$note; its corpus replays clean"
	fi
	if [ $rc -eq 0 ]; then
		printf 'chaos: %-22s trials=1   held=1   failed=0   took=%ss | %s execs, no crasher%s\n' "fuzz $target" $(( $(date +%s) - start )) "${execs:-?}" "$note"
		return 0
	fi
	tail -30 "$out" >&2
	if grep -q 'Failing input written to' "$out"; then
		printf 'chaos: %-22s trials=1   held=0   failed=1   took=%ss | crasher written under manifest/testdata/fuzz/%s: make it a regression test\n' "fuzz $target" $(( $(date +%s) - start )) "$target"
	else
		printf 'chaos: %-22s trials=1   held=0   failed=1   took=%ss | go test -fuzz failed (exit %s), log above%s\n' "fuzz $target" $(( $(date +%s) - start )) "$rc" "$note"
	fi
	return 1
}

# shutdown_race: the fuzz log $1 ends in a bare "context deadline exceeded"
# failure, with no failing input written.
shutdown_race() {
	! grep -q 'Failing input written to' "$1" && grep -q '^    context deadline exceeded$' "$1"
}

if [ -z "${CHAOS_RUN:-}" ]; then
	echo "== fuzz ($fuzztime per target)"
	for target in FuzzParse FuzzURLBody; do
		line=$(fuzz "$target") || status=1
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
