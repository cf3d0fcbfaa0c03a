package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestAppArmorAdmission: a pod whose AppArmor profile the host cannot
// enforce is refused (Failed, reason AppArmor, the kubelet's message) and
// never started; Unconfined runs. Where the host has AppArmor, a
// RuntimeDefault pod runs instead.
func TestAppArmorAdmission(t *testing.T) {
	_, err := os.Stat("/sys/kernel/security/apparmor")
	hostHasAppArmor := err == nil
	e := newEnv(t)
	pod := func(name, profile string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: %s
    command: ["true"]
    securityContext:
      appArmorProfile: {type: %s}
`, name, testImage, profile)
	}
	confined := e.write("confined.yaml", pod("confined", "RuntimeDefault"))
	r := e.podrun(2*time.Minute, "once", "--wait", "complete", "-o", "json", confined)
	if hostHasAppArmor {
		if r.code != 0 {
			t.Fatalf("with AppArmor on the host: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		return
	}
	if r.code == 0 {
		t.Fatalf("a RuntimeDefault profile on a host without AppArmor was not refused:\n%s", r.stdout)
	}
	contains(t, "once's report", r.stdout, `"reason": "AppArmor"`,
		`"message": "Cannot enforce AppArmor: AppArmor is not enabled on the host"`)
	if n := len(e.containers()); n != 0 {
		t.Errorf("the refused pod has %d containers or sandboxes", n)
	}

	unconfined := e.write("unconfined.yaml", pod("unconfined", "Unconfined"))
	if r := e.podrun(2*time.Minute, "once", "--wait", "complete", unconfined); r.code != 0 {
		t.Fatalf("an Unconfined pod: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
