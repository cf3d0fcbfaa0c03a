#!/usr/bin/env bash
# Usage: hack/fuzz.sh TARGET PKG TIME
#
# Runs the fuzz target TARGET of the package PKG (./manifest, ./runner) for
# TIME (a -fuzztime: 30s, 2m) and prints one summary line; exits non-zero on
# a failing input (written under PKG/testdata/fuzz/TARGET) or any other
# failure, with the end of the log on stderr.
#
# Go before 1.27 may also fail a run whose -fuzztime ends while a worker is
# busy, with "context deadline exceeded" and no input to blame
# (go.dev/issue/75804): such a run is made once more, and if it ends the same
# way the target's corpus is replayed (go test -run), which must pass.
#
# Environment:
#   FUZZ_LOG=file     keep the go test log there (default: a temporary file)
#   FUZZ_PREFIX=word  first word of the summary line (default "hack/fuzz.sh:";
#                     test/chaos/run.sh uses "chaos:")
set -uo pipefail
if [ $# -ne 3 ]; then
	echo "usage: $0 TARGET PKG TIME" >&2
	exit 2
fi
target=$1 pkg=$2 fuzztime=$3
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
prefix=${FUZZ_PREFIX:-hack/fuzz.sh:}

out=${FUZZ_LOG:-}
if [ -z "$out" ]; then
	out=$(mktemp /tmp/podrun-fuzz.XXXXXX)
	trap 'rm -f "$out"' EXIT
fi

# shutdown_race: the fuzz log $1 ends in a bare "context deadline exceeded"
# failure, with no failing input written.
shutdown_race() {
	! grep -q 'Failing input written to' "$1" && grep -q '^    context deadline exceeded$' "$1"
}

start=$(date +%s)
note=""
for try in 1 2; do
	go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg" >"$out" 2>&1
	rc=$?
	if [ $rc -eq 0 ] || ! shutdown_race "$out"; then
		break
	fi
	note="$note; run $try ended in Go's -fuzztime shutdown race (go.dev/issue/75804), no failing input"
done
execs=$(grep '^fuzz: elapsed' "$out" | tail -1 | sed -n 's/.*execs: \([0-9]*\).*/\1/p')
if [ $rc -ne 0 ] && shutdown_race "$out" && go test -count=1 -run "^$target\$" "$pkg" >>"$out" 2>&1; then
	rc=0
	note="$note; its corpus replays clean"
fi
if [ $rc -eq 0 ] && ! grep -q '^fuzz: elapsed' "$out"; then
	# go test passes when no fuzz target matches: a renamed target must
	# not pass unnoticed.
	rc=1
	note="$note; no fuzz target $target in $pkg ran"
fi
took=$(($(date +%s) - start))
if [ $rc -eq 0 ]; then
	printf '%s %-22s trials=1   held=1   failed=0   took=%ss | %s execs, no crasher%s\n' "$prefix" "fuzz $target" "$took" "${execs:-?}" "$note"
	exit 0
fi
tail -30 "$out" >&2
if grep -q 'Failing input written to' "$out"; then
	printf '%s %-22s trials=1   held=0   failed=1   took=%ss | crasher written under %s/testdata/fuzz/%s: make it a regression test\n' "$prefix" "fuzz $target" "$took" "${pkg#./}" "$target"
else
	printf '%s %-22s trials=1   held=0   failed=1   took=%ss | go test -fuzz failed (exit %s), log above%s\n' "$prefix" "fuzz $target" "$took" "$rc" "$note"
fi
exit 1
