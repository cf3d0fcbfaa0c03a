package paritytest

import "strings"

// Strings on the boundaries of Kubernetes' name rules.
var (
	label63      = strings.Repeat("a", 63)
	label64      = strings.Repeat("a", 64)
	subdomain253 = strings.Repeat(strings.Repeat("a", 62)+".", 4)[:252] + "a"
	subdomain254 = subdomain253 + "a"
)

func addMetadataCases(b *corpusBuilder) {
	// metadata.name: a DNS-1123 subdomain; podrun's static pod is named
	// <name>-<node>, which must be one too.
	b.mut("meta/name-missing", "minimal", del("metadata.name"))
	b.mut("meta/name-empty", "minimal", set("metadata.name", ""))
	b.mut("meta/generate-name-only", "minimal", del("metadata.name"), set("metadata.generateName", "web-"))
	b.mut("meta/generate-name-and-name", "minimal", set("metadata.generateName", "web-"))
	b.mut("meta/generate-name-bad", "minimal", del("metadata.name"), set("metadata.generateName", "Web_"))
	forEach(map[string]any{
		"upper": "Web", "underscore": "web_1", "leading-dash": "-web", "trailing-dash": "web-",
		"trailing-dot": "web.", "leading-dot": ".web", "double-dot": "web..app", "space": "web app",
		"unicode": "wéb", "slash": "web/app", "colon": "web:1", "254": subdomain254,
		"dotted": "web.example.com", "digits": "123", "63": label63, "64": label64,
		"253": subdomain253, "247": subdomain253[:247], "248": subdomain253[:248],
		"long-label": label64 + ".b", "number": 123, "percent": "web%20app", "dots": "...",
	}, func(name string, value any) {
		b.mut("meta/name-"+name, "minimal", set("metadata.name", value))
	})

	// metadata.namespace: a DNS-1123 label (the case is sent to it).
	b.mut("meta/ns-kube-system", "minimal", set("metadata.namespace", "kube-system"))
	b.mut("meta/ns-default", "minimal", set("metadata.namespace", "default"))
	b.mut("meta/ns-63", "minimal", set("metadata.namespace", "n"+label63[1:]))
	b.mut("meta/ns-64", "minimal", set("metadata.namespace", label64))
	b.mut("meta/ns-upper", "minimal", set("metadata.namespace", "Parity"))
	b.mut("meta/ns-dotted", "minimal", set("metadata.namespace", "par.ity"))
	b.mut("meta/ns-empty", "minimal", set("metadata.namespace", ""))

	// Labels: qualified-name keys, label values.
	forEach(map[string]any{
		"prefixed": "example.com/app", "upper": "App", "63": label63, "64": label64,
		"prefix-253": subdomain253 + "/a", "prefix-254": subdomain254 + "/a", "two-slashes": "a/b/c",
		"empty-prefix": "/app", "underscore-lead": "_app", "prefix-upper": "Example.com/app",
		"dot-lead": ".app", "space": "my app", "kubernetes-io": "kubernetes.io/hostname",
	}, func(name string, key any) {
		b.mut("meta/label-key-"+name, "minimal", set(`metadata.labels["`+key.(string)+`"]`, "v"))
	})
	b.mut("meta/label-key-empty", "minimal", set(`metadata.labels[""]`, "v"))
	forEach(map[string]any{
		"63": label63, "64": label64, "empty": "", "space": "a b", "slash": "a/b", "dot-end": "a.",
		"inner-underscore": "a_b", "dash-lead": "-a", "number": 1, "bool": true, "null": nil,
	}, func(name string, value any) {
		b.mut("meta/label-value-"+name, "minimal", set(`metadata.labels["app"]`, value))
	})

	// Annotations: qualified-name keys, 256 KiB in all.
	b.mut("meta/ann-key-space", "minimal", set(`metadata.annotations["bad key"]`, "v"))
	b.mut("meta/ann-key-prefixed", "minimal", set(`metadata.annotations["example.com/note"]`, "v"))
	b.mut("meta/ann-key-upper-prefix", "minimal", set(`metadata.annotations["Example.com/note"]`, "v"))
	b.mut("meta/ann-value-multiline", "minimal", set(`metadata.annotations["note"]`, "line 1\nline 2\n"))
	b.mut("meta/ann-value-number", "minimal", set(`metadata.annotations["note"]`, 5))
	b.mut("meta/ann-total-200k", "minimal", set(`metadata.annotations["big"]`, strings.Repeat("x", 200*1024)))
	b.mut("meta/ann-total-over-256k", "minimal", set(`metadata.annotations["big"]`, strings.Repeat("x", 256*1024)))

	// Annotations the pod validation reads.
	b.mut("meta/ann-mirror-without-node", "minimal", set(`metadata.annotations["kubernetes.io/config.mirror"]`, "abc"))
	b.mut("meta/ann-mirror-with-node", "minimal", set(`metadata.annotations["kubernetes.io/config.mirror"]`, "abc"),
		set("spec.nodeName", nodeName))
	b.mut("meta/ann-tolerations-not-json", "minimal", set(`metadata.annotations["scheduler.alpha.kubernetes.io/tolerations"]`, "not json"))
	b.mut("meta/ann-tolerations-bad-key", "minimal", set(`metadata.annotations["scheduler.alpha.kubernetes.io/tolerations"]`,
		`[{"key":"bad key","operator":"Exists"}]`))
	b.mut("meta/ann-deletion-cost-ok", "minimal", set(`metadata.annotations["controller.kubernetes.io/pod-deletion-cost"]`, "10"))
	b.mut("meta/ann-deletion-cost-bad", "minimal", set(`metadata.annotations["controller.kubernetes.io/pod-deletion-cost"]`, "ten"))
	b.mut("meta/ann-seccomp-pod-ok", "minimal", set(`metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`, "runtime/default"))
	b.mut("meta/ann-seccomp-pod-bad", "minimal", set(`metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`, "bogus"))
	b.mut("meta/ann-seccomp-pod-abs", "minimal", set(`metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`, "localhost//etc/seccomp/audit.json"))
	b.mut("meta/ann-seccomp-container-up", "minimal",
		set(`metadata.annotations["container.seccomp.security.alpha.kubernetes.io/app"]`, "localhost/../profile.json"))
	b.mut("meta/ann-seccomp-mismatch", "etcd", set(`metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`, "unconfined"))
	b.mut("meta/ann-apparmor-ok", "minimal", set(`metadata.annotations["container.apparmor.security.beta.kubernetes.io/app"]`, "runtime/default"))
	b.mut("meta/ann-apparmor-no-container", "minimal",
		set(`metadata.annotations["container.apparmor.security.beta.kubernetes.io/nosuch"]`, "runtime/default"))
	b.mut("meta/ann-apparmor-bad-profile", "minimal", set(`metadata.annotations["container.apparmor.security.beta.kubernetes.io/app"]`, "bogus"))

	// uid: the apiserver makes its own; podrun names a directory with it.
	b.mut("meta/uid-uuid", "minimal", set("metadata.uid", "0d3b9c6e-0b7f-4d0e-9a59-0f5f1b4f0a11"))
	b.mut("meta/uid-path", "minimal", set("metadata.uid", "../../etc"))
	b.mut("meta/uid-slash", "minimal", set("metadata.uid", "a/b"))
	b.mut("meta/uid-200", "minimal", set("metadata.uid", strings.Repeat("a", 200)))

	// Other metadata.
	owner := M{"apiVersion": "v1", "kind": "Node", "name": nodeName, "uid": "0d3b9c6e-0b7f-4d0e-9a59-0f5f1b4f0a11"}
	b.mut("meta/owner-ok", "minimal", set("metadata.ownerReferences", L{owner}))
	b.mut("meta/owner-no-uid", "minimal", set("metadata.ownerReferences", L{M{"apiVersion": "v1", "kind": "Node", "name": nodeName}}))
	b.mut("meta/owner-no-kind", "minimal", set("metadata.ownerReferences", L{M{"apiVersion": "v1", "name": nodeName, "uid": "x"}}))
	b.mut("meta/owner-two-controllers", "minimal", set("metadata.ownerReferences", L{
		M{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "1", "controller": true},
		M{"apiVersion": "v1", "kind": "Node", "name": "b", "uid": "2", "controller": true},
	}))
	b.mut("meta/finalizer-ok", "minimal", set("metadata.finalizers", L{"example.com/cleanup"}))
	b.mut("meta/finalizer-unqualified", "minimal", set("metadata.finalizers", L{"cleanup"}))
	b.mut("meta/finalizer-bad", "minimal", set("metadata.finalizers", L{"bad finalizer"}))
	b.mut("meta/resource-version", "minimal", set("metadata.resourceVersion", "123"))
	b.mut("meta/generation", "minimal", set("metadata.generation", 3))
	b.mut("meta/creation-timestamp", "minimal", set("metadata.creationTimestamp", "2025-01-01T00:00:00Z"))
	b.mut("meta/creation-timestamp-bad", "minimal", set("metadata.creationTimestamp", "yesterday"))
	b.mut("meta/deletion-timestamp", "minimal", set("metadata.deletionTimestamp", "2025-01-01T00:00:00Z"))
	b.mut("meta/self-link", "minimal", set("metadata.selfLink", "/api/v1/namespaces/parity/pods/web"))
	b.mut("meta/managed-fields-bad", "minimal", set("metadata.managedFields", L{M{"manager": "me", "operation": "Bogus"}}))
	b.mut("meta/unknown-field", "minimal", set("metadata.nmae", "web"))
}
