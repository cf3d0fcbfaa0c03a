package manifest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every string of a manifest that becomes part of a host path (the pod's
// UID, namespace and name, container and volume names, file paths in
// volumes, subPaths, ConfigMap and Secret keys, seccomp profiles) is checked
// before anything runs: these tests give each of them hostile values.

// hostileNames are values no name that becomes a path element may have.
var hostileNames = map[string]string{
	"parent escape": "../../victim",
	"absolute":      "/etc",
	"slash":         "a/b",
	"dot dot":       "..",
	"dot":           ".",
	"dot dot data":  "..data",
	"NUL":           "a\x00b",
	"newline":       "a\nb",
	"300 chars":     strings.Repeat("a", 300),
	"empty element": "a//b",
	"trailing dots": "a/..",
}

// yamlString quotes s for a YAML double-quoted scalar (Go's escapes \n,
// \x00, \" and \\ are YAML's too).
func yamlString(s string) string {
	return strconv.Quote(s)
}

// podWithUID is minimalPod with metadata.uid at line 5.
func podWithUID(uid string) string {
	return strings.Replace(minimalPod, "name: web\n", "name: web\n  uid: "+yamlString(uid)+"\n", 1)
}

func TestHostileUID(t *testing.T) {
	bad := map[string]string{
		"leading dash":       "-abc",
		"leading underscore": "_abc",
		"dot dot inside":     "a..b",
		"129 chars":          strings.Repeat("a", 129),
		"space":              "a b",
		"backslash":          `a\b`,
		"non-ASCII":          "caf\u00e9",
	}
	for name, uid := range hostileNames {
		bad[name] = uid
	}
	for name, uid := range bad {
		t.Run(name, func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", podWithUID(uid))
			e := findError(t, errs, 5, "metadata.uid", "must be a safe name such as a UUID")
			if e != nil && !strings.Contains(e.Message, "it names the pod's directory under the root dir") {
				t.Errorf("message does not say why: %s", e.Message)
			}
			if e != nil && strings.ContainsAny(e.Error(), "\x00\n") {
				t.Errorf("message is not one line: %q", e.Error())
			}
		})
	}
}

func TestSafeUIDs(t *testing.T) {
	for _, uid := range []string{
		"2f1d4c3e-8a7b-4c6d-9e0f-1a2b3c4d5e6f",                             // UUID
		"6e8f0c0d1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5", // hex SHA-256
		"d41d8cd98f00b204e9800998ecf8427e",                                 // hex MD5, the kubelet's file source
		"a", "A.b_c-d", "a.", strings.Repeat("a", 128),
	} {
		t.Run(uid, func(t *testing.T) {
			snap := mustParse(t, "pod.yaml", podWithUID(uid))
			if got := string(snap.Pods[0].UID); got != uid {
				t.Errorf("UID = %q, want %q", got, uid)
			}
		})
	}
}

// TestUIDErrorNamesFileLineField: the error `podrun validate` prints for a
// hostile UID is file:line: metadata.uid, as for any other field.
func TestUIDErrorNamesFileLineField(t *testing.T) {
	_, err := Parse("pod.yaml", []byte(podWithUID("../../victim")), testOptions())
	want := `pod.yaml:5: metadata.uid: Invalid value: "../../victim": podrun: must be a safe name such as a UUID`
	if err == nil || !IsInvalid(err) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to start with %s", err, want)
	}

	// Read from a file (podrun validate DIR), in a List, after other
	// documents: the line is still the uid's.
	dir := t.TempDir()
	p := filepath.Join(dir, "pods.yaml")
	data := podNamed("first") + "---\n" + dedent(`
		apiVersion: v1
		kind: List
		items:
		- apiVersion: v1
		  kind: Pod
		  metadata:
		    name: second
		    uid: ../../victim
		  spec:
		    containers:
		    - name: app
		      image: nginx:1.27
		`)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadPath(dir, testOptions())
	if err == nil || !IsInvalid(err) {
		t.Fatalf("ReadPath: err = %v, want a validation error", err)
	}
	line := strings.Count(podNamed("first"), "\n") + 1 + 8
	want = p + ":" + strconv.Itoa(line) + `: items[0].metadata.uid: Invalid value: "../../victim"`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to contain %s", err, want)
	}
}

// TestHostileObjectNames: the names that become path elements (namespace,
// pod name, init and app container names, volume names) are DNS labels or
// subdomains: no '/', no "..", no NUL or newline, bounded.
func TestHostileObjectNames(t *testing.T) {
	volumePod := func(name string) string {
		return podWith(`
			volumeMounts:
			- name: `+yamlString(name)+`
			  mountPath: /data
			`, `
			volumes:
			- name: `+yamlString(name)+`
			  emptyDir: {}
			`)
	}
	initPod := func(name string) string {
		return podWith("", `
			initContainers:
			- name: `+yamlString(name)+`
			  image: busybox
			`)
	}
	cases := []struct {
		field string
		line  int
		pod   func(string) string
	}{
		{"metadata.namespace", 5, func(n string) string {
			return strings.Replace(minimalPod, "name: web\n", "name: web\n  namespace: "+yamlString(n)+"\n", 1)
		}},
		{"metadata.name", 4, func(n string) string {
			return strings.Replace(minimalPod, "name: web\n", "name: "+yamlString(n)+"\n", 1)
		}},
		{"spec.containers[0].name", 7, func(n string) string {
			return strings.Replace(minimalPod, "- name: app\n", "- name: "+yamlString(n)+"\n", 1)
		}},
		{"spec.initContainers[0].name", 10, initPod},
		{"spec.volumes[0].name", 13, volumePod},
	}
	for _, c := range cases {
		for name, value := range hostileNames {
			t.Run(c.field+"/"+name, func(t *testing.T) {
				errs := parseErrors(t, "pod.yaml", c.pod(value))
				findError(t, errs, c.line, c.field, "Invalid value")
			})
		}
	}
}

// TestHostileVolumeFilePaths: the paths of files in configMap, secret,
// downwardAPI and projected volumes stay inside the volume.
func TestHostileVolumeFilePaths(t *testing.T) {
	type volume struct {
		field string // of the first item's path
		line  int
		yaml  func(path string) string
	}
	volumes := []volume{{
		"spec.volumes[0].configMap.items[0].path", 15, func(p string) string {
			return `
				volumes:
				- name: v
				  configMap:
				    name: cfg
				    items:
				    - key: a
				      path: ` + yamlString(p) + "\n"
		},
	}, {
		"spec.volumes[0].secret.items[0].path", 15, func(p string) string {
			return `
				volumes:
				- name: v
				  secret:
				    secretName: sec
				    items:
				    - key: a
				      path: ` + yamlString(p) + "\n"
		},
	}, {
		"spec.volumes[0].downwardAPI.items[0].path", 13, func(p string) string {
			return `
				volumes:
				- name: v
				  downwardAPI:
				    items:
				    - path: ` + yamlString(p) + `
				      fieldRef: {fieldPath: metadata.name}
				`
		},
	}, {
		"spec.volumes[0].projected.sources[0].configMap.items[0].path", 17, func(p string) string {
			return `
				volumes:
				- name: v
				  projected:
				    sources:
				    - configMap:
				        name: cfg
				        items:
				        - key: a
				          path: ` + yamlString(p) + "\n"
		},
	}, {
		"spec.volumes[0].projected.sources[0].secret.items[0].path", 17, func(p string) string {
			return `
				volumes:
				- name: v
				  projected:
				    sources:
				    - secret:
				        name: sec
				        items:
				        - key: a
				          path: ` + yamlString(p) + "\n"
		},
	}, {
		"spec.volumes[0].projected.sources[0].downwardAPI.items[0].path", 15, func(p string) string {
			return `
				volumes:
				- name: v
				  projected:
				    sources:
				    - downwardAPI:
				        items:
				        - path: ` + yamlString(p) + `
				          fieldRef: {fieldPath: metadata.name}
				`
		},
	}}
	bad := map[string]string{
		"../../x":        "must not contain '..'",
		"..":             "must not contain '..'",
		"a/../../b":      "must not contain '..'",
		"a/..":           "must not contain '..'",
		"a/../b":         "must not contain '..'",
		"/etc/passwd":    "must be a relative path",
		"/":              "must be a relative path",
		"..data":         "must not start with '..'",
		"..data/x":       "must not start with '..'",
		"...":            "must not start with '..'",
		"./..data":       "must not start with '..'",
		".":              "not the volume itself",
		"./":             "not the volume itself",
		"a\x00b":         "must not contain a NUL byte",
		"../" + "\x00":   "must not contain", // the API server faults the ".." first
		"./../../victim": "must not contain '..'",
	}
	good := []string{"a", "a/b", "a//b", "./a", "a/", ".a", "a/..b", "a..b", "a/.data", "a\nb", strings.Repeat("d/", 150) + "f"}
	for _, v := range volumes {
		for p, msg := range bad {
			t.Run(v.field+"/"+strconv.Quote(p), func(t *testing.T) {
				errs := parseErrors(t, "pod.yaml", podWith("", v.yaml(p)))
				findError(t, errs, v.line, v.field, msg)
			})
		}
		for _, p := range good {
			t.Run(v.field+"/good/"+strconv.Quote(p), func(t *testing.T) {
				mustParse(t, "pod.yaml", podWith("", v.yaml(p)))
			})
		}
	}
}

// TestHostileTokenPath: a projected serviceAccountToken's path passes
// the API's checks as "./..data" or "./..podrun-tmp" would, and would then
// name the volume's own entries; podrun refuses it as any file path of
// the volume (for a pod of the apiserver, which this package does not
// check, the runner does: writeVolumeFiles).
func TestHostileTokenPath(t *testing.T) {
	pod := func(p string) string {
		return podWith("", `
			serviceAccountName: default
			volumes:
			- name: v
			  projected:
			    sources:
			    - serviceAccountToken:
			        path: `+yamlString(p)+"\n")
	}
	for _, p := range []string{"./..data", "./..podrun-tmp", "."} {
		t.Run(strconv.Quote(p), func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", pod(p))
			findError(t, errs, 15, "spec.volumes[0].projected.sources[0].serviceAccountToken.path", "podrun: must")
		})
	}
	// A good path draws no word of its own (a static pod's token is
	// refused as such: there is no apiserver).
	for _, e := range parseErrors(t, "pod.yaml", pod("token")) {
		if strings.HasSuffix(e.Field, "serviceAccountToken.path") {
			t.Errorf("path \"token\": %v", e)
		}
	}
}

// TestHostileMountPaths: subPath, subPathExpr, mountPath,
// terminationMessagePath, workingDir and seccomp profiles.
func TestHostileMountPaths(t *testing.T) {
	mount := func(extra string) string {
		return podWith(`
			volumeMounts:
			- name: data
			  mountPath: /data
			  `+extra+`
			`, `
			volumes:
			- name: data
			  emptyDir: {}
			`)
	}
	tests := []struct {
		name, data    string
		line          int
		field, substr string
	}{
		{"subPath escape", mount(`subPath: ../../victim`), 12, "spec.containers[0].volumeMounts[0].subPath", "must not contain '..'"},
		{"subPath escape after a name", mount(`subPath: a/../../victim`), 12, "spec.containers[0].volumeMounts[0].subPath", "must not contain '..'"},
		{"subPath dot dot", mount(`subPath: ..`), 12, "spec.containers[0].volumeMounts[0].subPath", "must not contain '..'"},
		{"subPath absolute", mount(`subPath: /etc`), 12, "spec.containers[0].volumeMounts[0].subPath", "must be a relative path"},
		{"subPath NUL", mount(`subPath: "a\0b"`), 12, "spec.containers[0].volumeMounts[0].subPath", "must not contain a NUL byte"},
		{"subPathExpr escape", mount(`subPathExpr: $(POD_NAME)/../../victim`), 12, "spec.containers[0].volumeMounts[0].subPathExpr", "must not contain '..'"},
		{"subPathExpr dot dot", mount(`subPathExpr: ..`), 12, "spec.containers[0].volumeMounts[0].subPathExpr", "must not contain '..'"},
		{"subPathExpr absolute", mount(`subPathExpr: /$(POD_NAME)`), 12, "spec.containers[0].volumeMounts[0].subPathExpr", "must be a relative path"},
		{"subPathExpr with subPath", podWith(`
			volumeMounts:
			- name: data
			  mountPath: /data
			  subPath: a
			  subPathExpr: $(POD_NAME)
			`, "volumes: [{name: data, emptyDir: {}}]\n"), 13, "spec.containers[0].volumeMounts[0].subPathExpr", "mutually exclusive"},
		{"terminationMessagePath relative", podWith("terminationMessagePath: dev/termination-log\n", ""), 9, "spec.containers[0].terminationMessagePath", "podrun: Docker needs an absolute path"},
		{"terminationMessagePath NUL", podWith("terminationMessagePath: \"/dev/a\\0b\"\n", ""), 9, "spec.containers[0].terminationMessagePath", "must not contain a NUL byte"},
		{"hostPath dot dot", podWith("", `
			volumes:
			- name: data
			  hostPath:
			    path: /srv/../etc
			`), 12, "spec.volumes[0].hostPath.path", "must not contain '..'"},
		{"pod seccomp profile escape", podWith("", `
			securityContext:
			  seccompProfile:
			    type: Localhost
			    localhostProfile: ../../etc/shadow
			`), 12, "spec.securityContext.seccompProfile.localhostProfile", "must not contain '..'"},
		{"container seccomp profile absolute", podWith(`
			securityContext:
			  seccompProfile:
			    type: Localhost
			    localhostProfile: /etc/shadow
			`, ""), 12, "spec.containers[0].securityContext.seccompProfile.localhostProfile", "must be a relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", tt.data)
			findError(t, errs, tt.line, tt.field, tt.substr)
		})
	}

	for name, data := range map[string]string{
		"subPath with empty elements": mount(`subPath: a//b`),
		"subPath dot":                 mount(`subPath: .`),
		"subPath starting with dots":  mount(`subPath: ..data`),
		"subPathExpr":                 mount(`subPathExpr: $(POD_NAME)/logs`),
		"seccomp profile":             podWith("", "securityContext:\n  seccompProfile:\n    type: Localhost\n    localhostProfile: profiles/audit.json\n"),
		// Paths inside the container, which Docker resolves within the
		// container's root: the API server accepts them, and so does podrun.
		"mountPath dot dot":              strings.Replace(mount(""), "mountPath: /data", "mountPath: /data/../etc", 1),
		"terminationMessagePath dot dot": podWith("terminationMessagePath: /dev/../../victim\n", ""),
		"workingDir dot dot":             podWith("workingDir: /srv/../..\n", ""),
	} {
		t.Run("good/"+name, func(t *testing.T) {
			mustParse(t, "pod.yaml", data)
		})
	}
}

// TestHostileDataKeys: the keys of a ConfigMap or Secret become file names
// in a volume that lists no items; the API server's rules (IsConfigMapKey)
// keep them single, safe path elements.
func TestHostileDataKeys(t *testing.T) {
	kinds := []struct {
		kind, field, extra string
	}{
		{"ConfigMap", "data", ""},
		{"ConfigMap", "binaryData", ""},
		{"Secret", "data", ""},
		{"Secret", "stringData", ""},
	}
	for _, k := range kinds {
		for name, key := range hostileNames {
			t.Run(k.kind+"."+k.field+"/"+name, func(t *testing.T) {
				value := "x"
				if k.field == "binaryData" || (k.kind == "Secret" && k.field == "data") {
					value = "eA==" // base64
				}
				data := "apiVersion: v1\nkind: " + k.kind + "\nmetadata:\n  name: obj\n" +
					k.field + ":\n  " + yamlString(key) + ": " + value + "\n"
				errs := parseErrors(t, "objs.yaml", data)
				findError(t, errs, 6, k.field+"["+key+"]", "Invalid value")
			})
		}
	}
}
