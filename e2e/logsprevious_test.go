package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLogsPreviousAfterOnce: `logs --previous` of a container that restarted once
// prints the run before; of one that never restarted it fails as kubectl
// does, rather than print the current run.
func TestLogsPreviousAfterOnce(t *testing.T) {
	e := newEnv(t)
	retry := e.write("retry.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: retry}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 1
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: retry
    image: %[1]s
    volumeMounts: [{name: d, mountPath: /d}]
    command: ["sh", "-c", "if [ -f /d/ran ]; then echo second run; else touch /d/ran; echo first run; exit 1; fi"]
`, testImage))
	job := e.write("job.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {name: job, image: %[1]s, command: ["echo", "only run"]}
`, testImage))
	if r := e.podrun(2*time.Minute, "once", retry, job, "--wait", "complete", "--timeout", "90s"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{[]string{"retry"}, 0, "second run\n", ""},
		{[]string{"retry", "--previous"}, 0, "first run\n", ""},
		{[]string{"job"}, 0, "only run\n", ""},
		{[]string{"job", "--previous"}, 2, "", `previous terminated container "job" in pod "job-` + e.node + `" not found`},
	} {
		r := e.podrun(time.Minute, "logs", tc.args...)
		if r.code != tc.code || r.stdout != tc.out || !strings.Contains(r.stderr, tc.inErr) {
			t.Errorf("logs %v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.out, tc.inErr)
		}
	}
}
