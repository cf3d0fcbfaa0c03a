package paritytest

func addResourceCases(b *corpusBuilder) {
	r := "spec.containers[0].resources"
	lim := func(name string) string { return r + `.limits["` + name + `"]` }
	req := func(name string) string { return r + `.requests["` + name + `"]` }

	// Quantities.
	b.mut("res/cpu-negative", "full", set(lim("cpu"), "-1"))
	b.mut("res/memory-negative", "full", set(req("memory"), "-64Mi"))
	b.mut("res/storage-negative", "full", set(req("ephemeral-storage"), "-1Gi"))
	b.mut("res/cpu-bad-quantity", "full", set(lim("cpu"), "1 core"))
	b.mut("res/cpu-number", "full", set(lim("cpu"), 2))
	b.mut("res/cpu-tiny", "full", set(req("cpu"), "0.0001"))
	b.mut("res/cpu-zero", "full", set(req("cpu"), "0"))
	b.mut("res/memory-exponent", "full", set(lim("memory"), "1e9"))
	b.mut("res/memory-fraction", "full", set(req("memory"), "0.5Mi"))
	b.mut("res/request-over-limit", "full", set(req("cpu"), "2"))
	b.mut("res/memory-request-over-limit", "full", set(req("memory"), "256Mi"))
	b.mut("res/limit-only", "minimal", set(r+".limits", M{"cpu": "1", "memory": "1Gi"}))
	b.mut("res/request-only", "minimal", set(r+".requests", M{"cpu": "1", "memory": "1Gi"}))

	// Names.
	b.mut("res/name-unknown", "minimal", set(r+".limits", M{"gpu": "1"}))
	b.mut("res/name-space", "minimal", set(r+".limits", M{"my resource": "1"}))
	b.mut("res/name-kubernetes-io", "minimal", set(r+".limits", M{"kubernetes.io/gpu": "1"}))
	b.mut("res/name-requests-prefix", "minimal", set(r+".limits", M{"requests.example.com/gpu": "1"}))
	b.mut("res/name-pods", "minimal", set(r+".limits", M{"pods": "1"}))
	b.mut("res/name-storage", "minimal", set(r+".limits", M{"storage": "1Gi"}))

	// Extended resources: whole numbers, request equal to limit.
	b.mut("res/ext-ok", "minimal", set(r+".limits", M{"example.com/gpu": "1"}))
	b.mut("res/ext-request-equal", "minimal", set(r+".limits", M{"example.com/gpu": "2"}), set(r+".requests", M{"example.com/gpu": "2"}))
	b.mut("res/ext-fraction", "minimal", set(r+".limits", M{"example.com/gpu": "500m"}))
	b.mut("res/ext-request-below", "minimal", set(r+".limits", M{"example.com/gpu": "2"}), set(r+".requests", M{"example.com/gpu": "1"}))
	b.mut("res/ext-request-only", "minimal", set(r+".requests", M{"example.com/gpu": "1"}))
	b.mut("res/ext-name-bad", "minimal", set(r+".limits", M{"example.com/my gpu": "1"}))
	b.mut("res/ext-two-slashes", "minimal", set(r+".limits", M{"example.com/a/b": "1"}))

	// Huge pages: a multiple of the page size, with cpu or memory,
	// request equal to limit.
	b.mut("res/hugepages-ok", "minimal", set(r+".limits", M{"hugepages-2Mi": "4Mi", "memory": "64Mi"}))
	b.mut("res/hugepages-alone", "minimal", set(r+".limits", M{"hugepages-2Mi": "4Mi"}))
	b.mut("res/hugepages-not-multiple", "minimal", set(r+".limits", M{"hugepages-2Mi": "3Mi", "memory": "64Mi"}))
	b.mut("res/hugepages-request-below", "minimal", set(r+".limits", M{"hugepages-2Mi": "4Mi", "memory": "64Mi"}),
		set(r+".requests", M{"hugepages-2Mi": "2Mi"}))
	b.mut("res/hugepages-bad-size", "minimal", set(r+".limits", M{"hugepages-abc": "4Mi", "memory": "64Mi"}))
	b.mut("res/hugepages-volume", "minimal", set("spec.volumes", L{M{"name": "huge", "emptyDir": M{"medium": "HugePages"}}}),
		set(r+".limits", M{"hugepages-2Mi": "4Mi", "memory": "64Mi"}))

	// Overhead, pod level: in corpus_spec_test.go.
}
