# Conveniences; each target is a script (under hack/, bench/ or test/chaos/)
# that works on its own.
export PATH := /usr/local/go/bin:$(PATH)

# grpcnotrace keeps gRPC from linking golang.org/x/net/trace, whose
# html/template use turns off the linker's dead-method elimination for the
# whole binary: 30 MB more binary and about 9 MiB more RSS (docs/memory.md).
GO_TAGS ?= grpcnotrace

.PHONY: build test setup k8s example bench bench-nodes chaos conformance conformance-kubelet
build:
	go build -tags $(GO_TAGS) -o bin/podrun .
setup:
	bash hack/setup.sh
k8s:
	bash hack/k8s.sh
test:
	bash hack/test.sh
example:
	bash hack/run-example.sh
bench:
	bash bench/run.sh
bench-nodes:
	go test -run '^$$' -bench NodeAgents -benchtime 1x -timeout 30m ./bench/nodes/
chaos:
	bash test/chaos/run.sh
conformance:
	bash hack/conformance.sh
conformance-kubelet:
	bash hack/conformance-kubelet.sh
