package manifest

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDecodeErrorsNameFileLineAndField(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		data    string
		line    int
		field   string
		message string
	}{{
		name:   "unknown field deep in a container",
		source: "pod.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			    ports:
			    - containerPort: 80
			      protocl: TCP
			`),
		line: 11, field: "spec.containers[0].ports[0].protocl", message: `unknown field (did you mean "protocol"?)`,
	}, {
		name:   "wrong type: a quoted port",
		source: "pod.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			    ports:
			    - containerPort: 8080
			    - containerPort: "80"
			`),
		line: 11, field: "spec.containers[0].ports[1].containerPort",
		message: `wrong type: expected integer, got string "80"; remove the quotes`,
	}, {
		name:   "wrong type: a list where an object belongs",
		source: "pod.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			    resources:
			    - cpu
			`),
		line: 9, field: "spec.containers[0].resources", message: "wrong type: expected object, got list",
	}, {
		name:   "invalid quantity",
		source: "pod.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			    resources:
			      limits:
			        memory: 12 GB
			`),
		line: 11, field: "spec.containers[0].resources.limits[memory]", message: `invalid quantity "12 GB"`,
	}, {
		name:   "invalid YAML",
		source: "bad.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			   ports: []
			`),
		line: 8, field: "", message: "invalid YAML: ",
	}, {
		name:   "a tab in the indentation",
		source: "bad.yaml",
		data:   "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: web\n",
		line:   4, field: "", message: "(indent with spaces: YAML does not allow tabs)",
	}, {
		name:   "second document of a multi-document file",
		source: "multi.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: one
			spec:
			  containers:
			  - name: app
			    image: nginx
			---
			# the second pod
			apiVersion: v1
			kind: Pod
			metadata:
			  name: two
			spec:
			  containers:
			  - name: app
			    image: nginx
			    workingdir: /srv
			`),
		line: 19, field: "spec.containers[0].workingdir", message: `unknown field (did you mean "workingDir"?)`,
	}, {
		name:   "invalid YAML in the third document",
		source: "multi.yaml",
		data:   "a: 1\n---\nb: 2\n---\nc: d: e\n",
		line:   5, field: "", message: "mapping values are not allowed",
	}, {
		name:   "an item of a List",
		source: "list.yaml",
		data: dedent(`
			apiVersion: v1
			kind: List
			items:
			- apiVersion: v1
			  kind: ConfigMap
			  metadata:
			    name: cfg
			- apiVersion: v1
			  kind: Pod
			  metadata:
			    name: web
			  spec:
			    containers:
			    - name: app
			      image: nginx
			      env:
			      - name: A
			        valu: b
			`),
		line: 18, field: "items[1].spec.containers[0].env[0].valu", message: `unknown field (did you mean "value"?)`,
	}, {
		name:   "duplicate key",
		source: "dup.yaml",
		data: dedent(`
			apiVersion: v1
			kind: Pod
			metadata:
			  name: web
			spec:
			  containers:
			  - name: app
			    image: nginx
			    image: nginx:2
			`),
		line: 9, field: "spec.containers[0].image", message: "duplicate field (first given at line 8)",
	}, {
		name:   "unsupported kind",
		source: "deploy.yaml",
		data:   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
		line:   2, field: "kind", message: `kind "Deployment" is not supported`,
	}, {
		name:   "wrong apiVersion for a Pod",
		source: "pod.yaml",
		data:   "apiVersion: v2\nkind: Pod\nmetadata:\n  name: web\n",
		line:   1, field: "apiVersion", message: `Unsupported value: "v2"`,
	}, {
		name:   "missing kind",
		source: "pod.yaml",
		data:   "\n\napiVersion: v1\nmetadata:\n  name: web\n",
		line:   3, field: "kind", message: "Required value",
	}, {
		name:   "not an object",
		source: "list.yaml",
		data:   "- a\n- b\n",
		line:   1, field: "", message: "a document must be an object",
	}, {
		name:   "JSON: wrong type",
		source: "pod.json",
		data: `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web"},
  "spec": {
    "containers": [
      {"name": "app", "image": "nginx", "tty": "yes"}
    ]
  }
}
`,
		line: 7, field: "spec.containers[0].tty", message: `expected boolean (true or false), got string "yes"`,
	}, {
		name:   "JSON: syntax error",
		source: "pod.json",
		data:   "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",,\n}\n",
		line:   3, field: "", message: "invalid JSON: invalid character ','",
	}, {
		name:   "invalid base64 in a Secret",
		source: "secret.yaml",
		data:   "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  token: '!!!'\n",
		line:   6, field: "data[token]", message: "illegal base64 data",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseStrictErrors(t, tt.source, tt.data)
			e := findError(t, errs, tt.line, tt.field, tt.message)
			if e != nil && e.Source != tt.source {
				t.Errorf("Source = %q, want %q", e.Source, tt.source)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{Source: "pod.yaml", Line: 12, Field: "spec.containers[0].imagee", Message: "unknown field"},
			"pod.yaml:12: spec.containers[0].imagee: unknown field"},
		{Error{Source: "pod.yaml", Message: "file is too large"}, "pod.yaml: file is too large"},
		{Error{Source: "pod.yaml", Line: 3, Message: "invalid YAML: x"}, "pod.yaml:3: invalid YAML: x"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	list := ErrorList{&tests[0].err, &tests[1].err}
	if got, want := list.Error(), tests[0].want+"\n"+tests[1].want; got != want {
		t.Errorf("ErrorList.Error() = %q, want %q", got, want)
	}
}

func TestAllProblemsAreReportedInOneRun(t *testing.T) {
	errs := parseStrictErrors(t, "pod.yaml", dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  containers:
		  - name: app
		    image: nginx
		    imagee: x
		    ports:
		    - containerPort: "80"
		    - containerPort: 1.5
		      hostPort: 99999999999
		  - name: app
		    image: nginx
		    livenessProbe:
		      httpGet:
		        port: http
		`))
	want := []struct {
		line  int
		field string
	}{
		{9, "spec.containers[0].imagee"},
		{11, "spec.containers[0].ports[0].containerPort"},
		{12, "spec.containers[0].ports[1].containerPort"},
		{13, "spec.containers[0].ports[1].hostPort"},
		{14, "spec.containers[1].name"},
		{18, "spec.containers[1].livenessProbe.httpGet.port"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Field != w.field {
			t.Errorf("error %d = %v, want line %d field %s", i, errs[i], w.line, w.field)
		}
	}
}

func TestMultiDocumentListConfigMapSecret(t *testing.T) {
	snap := mustParse(t, "all.yaml", dedent(`
		# leading comment, then an empty document
		---
		apiVersion: v1
		kind: Pod
		metadata:
		  name: one
		spec:
		  containers:
		  - name: app
		    image: nginx
		---
		---
		apiVersion: v1
		kind: List
		items:
		- apiVersion: v1
		  kind: Pod
		  metadata:
		    name: two
		    namespace: web
		  spec:
		    containers:
		    - name: app
		      image: nginx
		- apiVersion: v1
		  kind: ConfigMap
		  metadata:
		    name: settings
		  data:
		    mode: fast
		---
		apiVersion: v1
		kind: Secret
		metadata:
		  name: creds
		  namespace: web
		data:
		  user: YWRtaW4=
		  pass: b2xk
		stringData:
		  pass: new
		...
		`))
	if got := len(snap.Pods); got != 2 {
		t.Fatalf("got %d pods, want 2", got)
	}
	if snap.Pods[0].Name != "one-node1" || snap.Pods[0].Namespace != "default" {
		t.Errorf("pod 0 = %s/%s, want default/one-node1", snap.Pods[0].Namespace, snap.Pods[0].Name)
	}
	if snap.Pods[1].Name != "two-node1" || snap.Pods[1].Namespace != "web" {
		t.Errorf("pod 1 = %s/%s, want web/two-node1", snap.Pods[1].Namespace, snap.Pods[1].Name)
	}
	if got := snap.Origin(snap.Pods[1]); got != "all.yaml:19" {
		t.Errorf("Origin(pod 1) = %q, want all.yaml:19", got)
	}
	if len(snap.ConfigMaps) != 1 || snap.ConfigMaps[0].Name != "settings" || snap.ConfigMaps[0].Namespace != "default" ||
		snap.ConfigMaps[0].Data["mode"] != "fast" {
		t.Errorf("ConfigMaps = %+v", snap.ConfigMaps)
	}
	if len(snap.Secrets) != 1 {
		t.Fatalf("got %d secrets, want 1", len(snap.Secrets))
	}
	sec := snap.Secrets[0]
	if string(sec.Data["user"]) != "admin" || string(sec.Data["pass"]) != "new" || sec.StringData != nil {
		t.Errorf("secret data = %q, stringData = %v: want user=admin, pass=new (stringData wins), no stringData", sec.Data, sec.StringData)
	}
	if sec.Type != v1.SecretTypeOpaque {
		t.Errorf("secret type = %q, want Opaque", sec.Type)
	}
	if len(snap.Warnings) != 0 {
		t.Errorf("warnings = %v", snap.Warnings)
	}
}

func TestEmptyInputs(t *testing.T) {
	for name, data := range map[string]string{
		"empty file":        "",
		"only comments":     "# nothing here\n\n",
		"only separators":   "---\n---\n",
		"null document":     "~\n",
		"empty List":        "apiVersion: v1\nkind: List\nitems: []\n",
		"List without item": "apiVersion: v1\nkind: List\n",
		"empty JSON List":   `{"apiVersion": "v1", "kind": "List", "items": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			snap := mustParse(t, "x.yaml", data)
			if !snap.Empty() {
				t.Errorf("snapshot not empty: %+v", snap)
			}
		})
	}
}

func TestJSONInput(t *testing.T) {
	snap := mustParse(t, "pod.json", `{
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {"name": "web", "namespace": "kube-system"},
	"spec": {
		"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]
	}
}`)
	if len(snap.Pods) != 1 {
		t.Fatalf("got %d pods", len(snap.Pods))
	}
	pod := snap.Pods[0]
	if pod.Name != "web-node1" || pod.Spec.Containers[0].Ports[0].ContainerPort != 80 {
		t.Errorf("pod = %s, port %d", pod.Name, pod.Spec.Containers[0].Ports[0].ContainerPort)
	}
	// A JSON document with a duplicate key is an error too.
	errs := parseErrors(t, "pod.json", "{\n\"apiVersion\": \"v1\",\n\"kind\": \"Pod\",\n\"kind\": \"Pod\"\n}")
	findError(t, errs, 4, "kind", "duplicate field")
}

func TestYAML11Semantics(t *testing.T) {
	// The kubelet reads YAML 1.1: a leading 0 is octal.
	snap := mustParse(t, "pod.yaml", minimalPod+dedent(`
		  volumes:
		  - name: cfg
		    configMap:
		      name: cfg
		      defaultMode: 0600
		`))
	if got := *snap.Pods[0].Spec.Volumes[0].ConfigMap.DefaultMode; got != 0o600 {
		t.Errorf("defaultMode = %o, want 600", got)
	}
}

func TestConflictingPodsInOneSnapshot(t *testing.T) {
	data := minimalPod + "---\n" + minimalPod
	snap, err := Parse("pods.yaml", []byte(data), testOptions())
	errs, _ := err.(ErrorList)
	if len(errs) != 1 {
		t.Fatalf("err = %v, want one conflict", err)
	}
	e := errs[0]
	if e.Line != 13 || e.Field != "metadata.name" || !strings.Contains(e.Message, "conflicts with the pod defined at pods.yaml:4") {
		t.Errorf("conflict = %v", e)
	}
	if len(snap.Pods) != 1 || snap.Origin(snap.Pods[0]) != "pods.yaml:4" {
		t.Errorf("the first pod must be kept: %v", snap.Pods)
	}
}

func TestParseNeedsANodeName(t *testing.T) {
	for _, node := range []string{"", "no_underscores"} {
		_, err := Parse("pod.yaml", []byte(minimalPod), Options{NodeName: node})
		if err == nil || IsInvalid(err) {
			t.Errorf("NodeName %q: err = %v, want an options error", node, err)
		}
	}
	snap, err := Parse("pod.yaml", []byte(minimalPod), Options{NodeName: "Node-A"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Pods[0].Name != "web-node-a" || snap.Pods[0].Spec.NodeName != "node-a" {
		t.Errorf("node name not lowercased: %s, %s", snap.Pods[0].Name, snap.Pods[0].Spec.NodeName)
	}
}

func TestTypedListsAndNesting(t *testing.T) {
	snap := mustParse(t, "pods.yaml", dedent(`
		apiVersion: v1
		kind: PodList
		items:
		- metadata:
		    name: a
		  spec:
		    containers:
		    - name: app
		      image: nginx:1.27
		`))
	if len(snap.Pods) != 1 || snap.Pods[0].Name != "a-node1" {
		t.Errorf("PodList items without kind: %v", podNames(snap))
	}

	errs := parseErrors(t, "nested.yaml", dedent(`
		apiVersion: v1
		kind: List
		items:
		- apiVersion: v1
		  kind: List
		  items: []
		- kind: Pod
		- apiVersion: v1
		  kind: pod
		- null
		`))
	findError(t, errs, 5, "items[0].kind", "a List may not hold another List")
	findError(t, errs, 7, "items[1].apiVersion", "Required value")
	findError(t, errs, 9, "items[2].kind", `did you mean "Pod"?`)
	findError(t, errs, 10, "items[3]", "a list item must be an object")
}

func TestReadFile(t *testing.T) {
	path := t.TempDir() + "/web.yaml"
	writeFile(t, path, minimalPod, 0o600)
	snap, err := ReadFile(path, testOptions())
	if err != nil || len(snap.Pods) != 1 || snap.Source != path {
		t.Fatalf("ReadFile = %+v, %v", snap, err)
	}
	if _, err := ReadFile(path, Options{}); err == nil {
		t.Errorf("ReadFile without a node name must fail")
	}
}

// TestUnknownFields: as the kubelet, podrun drops a field the Pod type does
// not have, and says so; with Strict it refuses the pod. A typo of a field
// the pod then lacks and needs is an error either way, in the lack's place.
func TestUnknownFields(t *testing.T) {
	data := dedent(`
		apiVersion: v1
		kind: Pod
		metadata:
		  name: web
		spec:
		  containers:
		  - name: app
		    image: nginx:1.27
		    imagePullPolicyy: Always
		  colour: blue
		`)
	snap, err := Parse("pod.yaml", []byte(data), testOptions())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(snap.Pods) != 1 {
		t.Fatalf("pods = %d, want 1", len(snap.Pods))
	}
	if got := snap.Pods[0].Spec.Containers[0].ImagePullPolicy; got != "IfNotPresent" {
		t.Errorf("imagePullPolicy = %q, want the default IfNotPresent (the typo is dropped)", got)
	}
	want := []string{
		`pod.yaml:9: spec.containers[0].imagePullPolicyy: unknown field (did you mean "imagePullPolicy"?), ignored`,
		`pod.yaml:10: spec.colour: unknown field, ignored`,
	}
	if strings.Join(snap.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(snap.Warnings, "\n"), strings.Join(want, "\n"))
	}

	errs := parseStrictErrors(t, "pod.yaml", data)
	findError(t, errs, 9, "spec.containers[0].imagePullPolicyy", `unknown field (did you mean "imagePullPolicy"?) (--strict)`)
	findError(t, errs, 10, "spec.colour", "unknown field (--strict)")

	// Without its image the pod is invalid anyway: the typo is the error.
	errs = parseErrors(t, "pod.yaml", strings.Replace(data, "image: nginx:1.27", "imagee: nginx:1.27", 1))
	findError(t, errs, 8, "spec.containers[0].imagee", `unknown field (did you mean "image"?)`)
	for _, e := range errs {
		if e.Field == "spec.containers[0].image" {
			t.Errorf("the missing image is reported besides its typo: %v", e)
		}
	}
}
