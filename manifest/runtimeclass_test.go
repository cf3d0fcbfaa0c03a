package manifest

import (
	"testing"
)

// TestRuntimeClassesAreRead: RuntimeClass objects (node.k8s.io/v1), alone
// or in a List or RuntimeClassList, are read beside the pods that name
// them, cluster-scoped (no namespace), with the API server's validation.
func TestRuntimeClassesAreRead(t *testing.T) {
	snap := mustParse(t, "rc.yaml", minimalPod+dedent(`
		---
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: fast
		handler: runc
		---
		apiVersion: node.k8s.io/v1
		kind: RuntimeClassList
		items:
		- metadata: {name: sandboxed}
		  handler: runsc
		---
		apiVersion: v1
		kind: List
		items:
		- apiVersion: node.k8s.io/v1
		  kind: RuntimeClass
		  metadata: {name: kata}
		  handler: kata
		`))
	if len(snap.Pods) != 1 || len(snap.RuntimeClasses) != 3 {
		t.Fatalf("%d pods, %d RuntimeClasses", len(snap.Pods), len(snap.RuntimeClasses))
	}
	got := map[string]string{}
	for _, rc := range snap.RuntimeClasses {
		got[rc.Name] = rc.Handler
		if rc.Namespace != "" {
			t.Errorf("RuntimeClass %s has namespace %q", rc.Name, rc.Namespace)
		}
	}
	if got["fast"] != "runc" || got["sandboxed"] != "runsc" || got["kata"] != "kata" {
		t.Errorf("handlers %v", got)
	}
	if o := snap.Origin(snap.RuntimeClasses[0]); o != "rc.yaml:13" {
		t.Errorf("origin %q", o)
	}
}

func TestRuntimeClassErrors(t *testing.T) {
	errs := parseErrors(t, "rc.yaml", dedent(`
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: fast
		handler: io.containerd.runc.v2
		---
		apiVersion: v1
		kind: RuntimeClass
		metadata:
		  name: slow
		handler: runc
		---
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: none
		---
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: fast
		handler: runc
		`))
	findError(t, errs, 5, "handler", "Invalid value")
	findError(t, errs, 7, "apiVersion", "RuntimeClass is apiVersion node.k8s.io/v1")
	findError(t, errs, 13, "handler", "Required value")
	if len(errs) != 3 {
		t.Errorf("got %d errors, want 3:\n%v", len(errs), errs)
	}

	// Two good definitions of one name: the first is kept.
	_, err := Parse("rc.yaml", []byte(dedent(`
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: fast
		handler: runc
		---
		apiVersion: node.k8s.io/v1
		kind: RuntimeClass
		metadata:
		  name: fast
		handler: crun
		`)), testOptions())
	list, _ := err.(ErrorList)
	findError(t, list, 10, "metadata.name", "RuntimeClass fast conflicts with the RuntimeClass defined at rc.yaml:4")
}
