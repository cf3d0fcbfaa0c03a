package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFSGroupOwnsVolumes: under fsGroup, a non-root container is in the
// group, its emptyDir and configMap volumes belong to the group (setgid
// directories, group bits on files), and what it creates inherits it.
func TestFSGroupOwnsVolumes(t *testing.T) {
	e := newEnv(t)
	e.write("pod.yaml", fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  key: value
---
apiVersion: v1
kind: Pod
metadata:
  name: fsg
spec:
  restartPolicy: Never
  securityContext:
    runAsUser: 1000
    fsGroup: 2000
  volumes:
  - name: data
    emptyDir: {}
  - name: cfg
    configMap:
      name: cfg
      defaultMode: 0400
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo groups $(id -G); stat -c 'data %%g %%a' /data; stat -L -c 'key %%g %%a' /cfg/key; cat /cfg/key; echo; touch /data/new && stat -c 'new %%g' /data/new"]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: cfg, mountPath: /cfg}
`, testImage))
	if r := e.podrun(2*time.Minute, "once", "--wait", "complete", e.dir); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := e.podrun(30*time.Second, "logs", "fsg").stdout
	for _, want := range []string{"data 2000 2777", "key 2000 440", "value", "new 2000"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "groups ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "2000") {
		t.Errorf("the container is not in the fsGroup:\n%s", out)
	}
}
