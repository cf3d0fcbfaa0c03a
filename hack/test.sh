#!/usr/bin/env bash
# Runs every podrun test: prepares the machine (hack/setup.sh: Docker, the
# local test image; with --containerd podrun's private containerd for the CRI
# engine; hack/k8s.sh: the Kubernetes binaries and images the
# cluster-mode tests run, cached outside the checkout: 5-9 min (13 on a busy machine) the first
# time, seconds after; hack/conformance-build.sh: Kubernetes' e2e.test and
# the images its node conformance specs name, 5-10 min the first time),
# checks formatting and vet, then `go test -race` over all
# packages, end-to-end tests against the real dockerd included, a 30 s run
# of the pod-directory fuzz target (hack/fuzz.sh), and last the
# short form of the reliability suite (test/chaos/run.sh, about six minutes;
# TEST_CHAOS=0 leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bash hack/setup.sh --containerd
bash hack/k8s.sh
bash hack/conformance-build.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -p 1 -count=1 -timeout 60m "$@" ./...
# A bounded run of the fuzz target that keeps every path podrun makes,
# writes or removes for a pod under its root dir (TEST_FUZZTIME=0 leaves it
# out); hack/fuzz.sh copes with Go's -fuzztime shutdown race.
if [ "${TEST_FUZZTIME:-30s}" != 0 ]; then
	echo "== fuzz FuzzPodDirConfinement"
	bash hack/fuzz.sh FuzzPodDirConfinement ./runner "${TEST_FUZZTIME:-30s}"
fi

# Last, as it restarts dockerd: nothing else may use the engine meanwhile.
if [ "${TEST_CHAOS:-1}" != 0 ]; then
	echo "== reliability suite, short form"
	bash test/chaos/run.sh
fi
