package manifest

import (
	"path/filepath"
	"testing"
)

// TestFieldAt: the line of any field of a decoded object, in a YAML file of
// several documents, in a List item and in JSON; a field the manifest
// does not write is placed at its nearest written parent.
func TestFieldAt(t *testing.T) {
	data := dedent(`
		# a comment
		apiVersion: v1
		kind: ConfigMap
		metadata:
		  name: conf
		data:
		  a: "1"
		---
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  containers:
		  - name: app
		    image: nginx:1.27
		    ports:
		    - containerPort: 80
		      hostPort: 8080
		---
		apiVersion: v1
		kind: List
		items:
		- apiVersion: v1
		  kind: Pod
		  metadata:
		    name: db
		  spec:
		    containers:
		    - name: db
		      image: postgres
		      securityContext:
		        privileged: true
		`)
	snap := mustParse(t, "pods.yaml", data)
	if len(snap.Pods) != 2 || len(snap.ConfigMaps) != 1 {
		t.Fatalf("snapshot: %d pods, %d ConfigMaps", len(snap.Pods), len(snap.ConfigMaps))
	}
	web, db := snap.Pods[0], snap.Pods[1]
	tests := []struct {
		obj   any
		path  string
		line  int
		field string
	}{
		{web, "spec.containers[0].ports[0].hostPort", 19, "spec.containers[0].ports[0].hostPort"},
		{web, "spec.containers[0].image", 16, "spec.containers[0].image"},
		// Defaulted, not written: its nearest written parent.
		{web, "spec.containers[0].ports[0].protocol", 18, "spec.containers[0].ports[0].protocol"},
		{db, "spec.containers[0].securityContext.privileged", 33, "items[0].spec.containers[0].securityContext.privileged"},
		{snap.ConfigMaps[0], "data[a]", 7, "data[a]"},
	}
	for _, tt := range tests {
		e, ok := snap.FieldAt(tt.obj, tt.path)
		if !ok || e.Source != "pods.yaml" || e.Line != tt.line || e.Field != tt.field {
			t.Errorf("FieldAt(%s) = %+v, %v; want pods.yaml:%d %s", tt.path, e, ok, tt.line, tt.field)
		}
	}
	// Asked again: the same answer from the kept parse.
	if e, _ := snap.FieldAt(web, "spec.containers[0].ports[0].hostPort"); e.Line != 19 {
		t.Errorf("second FieldAt: line %d", e.Line)
	}
	if _, ok := snap.FieldAt(web.DeepCopy(), "spec"); ok {
		t.Errorf("FieldAt answered for an object not of the snapshot")
	}

	js := mustParse(t, "pod.json", "{\n\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n\"metadata\": {\"name\": \"j\"},\n"+
		"\"spec\": {\"containers\": [{\"name\": \"x\", \"image\": \"y\",\n \"env\": [{\"name\": \"A\", \"value\": \"b\"}]}]}}\n")
	if e, ok := js.FieldAt(js.Pods[0], "spec.containers[0].env[0].name"); !ok || e.Line != 5 {
		t.Errorf("JSON FieldAt = %+v, %v; want line 5", e, ok)
	}
}

// TestFieldAtDirectory: a directory's snapshot places fields in the file
// that defines the object.
func TestFieldAtDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), podNamed("a"), 0o644)
	writeFile(t, filepath.Join(dir, "b.yaml"), "\n\n"+podNamed("b"), 0o644)
	snap, err := ReadPath(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := snap.FieldAt(snap.Pods[1], "spec.containers[0].image")
	if !ok || e.Source != filepath.Join(dir, "b.yaml") || e.Line != 10 {
		t.Errorf("FieldAt = %+v, %v; want b.yaml:10", e, ok)
	}
}
