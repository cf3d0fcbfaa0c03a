#!/usr/bin/env bash
# Runs Kubernetes' node conformance specs ([NodeConformance], not [Slow])
# against a podrun node and writes docs/conformance.md: the machine set up
# as for the tests (hack/setup.sh, hack/k8s.sh), e2e.test and the images it
# needs built and cached (hack/conformance-build.sh), then the e2e test
# TestNodeConformance with PODRUN_CONFORMANCE=all (see e2e/conformance_test.go).
# Takes the machine's kubeadm paths and ports for its duration, as the
# kubeadm e2e test does. Arguments go to `go test` (e.g. -v).
# PODRUN_CONFORMANCE_RUNTIME=containerd runs the podrun node on its private
# containerd (hack/containerd.sh, the images imported into it) instead of
# Docker, and writes docs/conformance-containerd.md instead.
# PODRUN_CONFORMANCE_REPORT names another report file (empty: none).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bash hack/setup.sh
bash hack/k8s.sh
bash hack/conformance-build.sh
report=$PWD/docs/conformance.md
[ "${PODRUN_CONFORMANCE_RUNTIME:-docker}" = docker ] || report=$PWD/docs/conformance-containerd.md
PODRUN_CONFORMANCE=all PODRUN_CONFORMANCE_REPORT="${PODRUN_CONFORMANCE_REPORT-$report}" \
	go test -tags grpcnotrace -count=1 -timeout 5h -run '^TestNodeConformance$' "$@" ./e2e/
