# Conveniences; each target is a script (under hack/, bench/ or test/chaos/)
# that works on its own.
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: build test setup k8s example bench chaos
build:
	go build -o bin/podrun .
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
chaos:
	bash test/chaos/run.sh
