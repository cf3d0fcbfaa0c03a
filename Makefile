# Conveniences; each target is a script under hack/ that works on its own.
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: build test setup example
build:
	go build -o bin/podrun .
setup:
	bash hack/setup.sh
test:
	bash hack/test.sh
example:
	bash hack/run-example.sh
