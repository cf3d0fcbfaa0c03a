package manifest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

func genericOf(t *testing.T, yamlData string) map[string]any {
	t.Helper()
	j, err := sigsyaml.YAMLToJSON([]byte(yamlData))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// typeErrors must accept everything the decoder accepts, or a manifest with
// one real problem would be reported with made-up ones.
func TestTypeErrorsAgreesWithTheDecoderOnValidInput(t *testing.T) {
	files, _ := filepath.Glob("testdata/kubeadm/*.yaml")
	var docs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	docs = append(docs, dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		  creationTimestamp: "2024-01-01T00:00:00Z"
		  labels: {app: web}
		spec:
		  terminationGracePeriodSeconds: 5
		  containers:
		  - name: app
		    image: nginx
		    resources:
		      limits: {cpu: 500m, memory: 1Gi}
		    env:
		    - name: A
		      valueFrom:
		        resourceFieldRef: {resource: limits.cpu, divisor: 1m}
		    livenessProbe:
		      grpc: {port: 9000}
		    readinessProbe:
		      tcpSocket: {port: 80}
		  ephemeralContainers:
		  - name: debug
		    image: busybox
		    targetContainerName: app
		  volumes:
		  - name: v
		    emptyDir: {sizeLimit: 1Gi, medium: Memory}
		`))
	for i, doc := range docs {
		if errs := typeErrors(reflect.TypeFor[v1.Pod](), genericOf(t, doc)); len(errs) != 0 {
			t.Errorf("document %d: %v", i, errs)
		}
	}
	secret := genericOf(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: YWJj}\nstringData: {b: x}\n")
	if errs := typeErrors(reflect.TypeFor[v1.Secret](), secret); len(errs) != 0 {
		t.Errorf("secret: %v", errs)
	}
}

func TestTypeErrors(t *testing.T) {
	m := genericOf(t, dedent(`
		metadata:
		  name: 5
		  labels: [a]
		spec:
		  hostNetwork: "true"
		  containers:
		  - name: app
		    command: echo
		    livenessProbe:
		      httpGet: {port: 1.5}
		`))
	got := map[string]string{}
	for _, e := range typeErrors(reflect.TypeFor[v1.Pod](), m) {
		got[e.path] = e.message
	}
	want := map[string]string{
		"metadata.name":                                 "wrong type: expected string, got number 5; quote the value",
		"metadata.labels":                               "wrong type: expected object, got list",
		"spec.hostNetwork":                              `wrong type: expected boolean (true or false), got string "true"; remove the quotes`,
		"spec.containers[0].command":                    `wrong type: expected list, got string "echo"`,
		"spec.containers[0].livenessProbe.httpGet.port": "wrong type: expected integer or string, got number 1.5",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("typeErrors:\n%v\nwant\n%v", got, want)
	}
}

func TestUnknownFieldSuggestion(t *testing.T) {
	fields := jsonFields(reflect.TypeFor[v1.Container]())
	for name, want := range map[string]string{
		"imagee":          `unknown field (did you mean "image"?)`,
		"ImagePullPolicy": `unknown field (did you mean "imagePullPolicy"?)`,
		"colour":          "unknown field",
	} {
		if got, _ := suggestField(name, fields); got != want {
			t.Errorf("suggestField(%q) = %q, want %q", name, got, want)
		}
	}
}
