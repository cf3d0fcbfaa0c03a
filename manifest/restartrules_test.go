package manifest

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestContainerRestartRulesAccepted: a container's own restartPolicy and
// its restartPolicyRules (KEP-5307, on by default in v1.37) pass as
// kube-apiserver passes them, and reach the pod as written.
func TestContainerRestartRulesAccepted(t *testing.T) {
	data := podWith(`
		restartPolicy: Never
		restartPolicyRules:
		- action: Restart
		  exitCodes:
		    operator: In
		    values: [42]
		`, "restartPolicy: Always\n")
	pod := mustParse(t, "pod.yaml", data).Pods[0]
	c := pod.Spec.Containers[0]
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyNever {
		t.Fatalf("restartPolicy = %v, want Never", c.RestartPolicy)
	}
	if len(c.RestartPolicyRules) != 1 || c.RestartPolicyRules[0].ExitCodes == nil ||
		c.RestartPolicyRules[0].ExitCodes.Operator != v1.ContainerRestartRuleOnExitCodesOpIn ||
		len(c.RestartPolicyRules[0].ExitCodes.Values) != 1 || c.RestartPolicyRules[0].ExitCodes.Values[0] != 42 {
		t.Fatalf("restartPolicyRules = %+v", c.RestartPolicyRules)
	}
	// A container policy alone (OnFailure under a pod's Never) passes too.
	mustParse(t, "pod.yaml", podWith("restartPolicy: OnFailure\n", "restartPolicy: Never\n"))
}

// TestContainerRestartRulesRefused: what kube-apiserver rejects in restart
// rules is rejected, and the action podrun does not carry out is refused
// with its reason.
func TestContainerRestartRulesRefused(t *testing.T) {
	tests := []struct {
		name, container string
		field, message  string
	}{{
		name:      "rules without a container restartPolicy",
		container: "restartPolicyRules:\n- action: Restart\n  exitCodes: {operator: In, values: [1]}\n",
		field:     "spec.containers[0].restartPolicy", message: "must specify restartPolicy",
	}, {
		name:      "unknown operator",
		container: "restartPolicy: Never\nrestartPolicyRules:\n- action: Restart\n  exitCodes: {operator: Equals, values: [1]}\n",
		field:     "spec.containers[0].restartPolicyRules[0].exitCodes.operator", message: "Unsupported value",
	}, {
		name:      "rule without exitCodes",
		container: "restartPolicy: Never\nrestartPolicyRules:\n- action: Restart\n",
		field:     "spec.containers[0].restartPolicyRules[0].exitCodes", message: "Required value",
	}, {
		name:      "unknown container restartPolicy",
		container: "restartPolicy: Sometimes\n",
		field:     "spec.containers[0].restartPolicy", message: "Unsupported value",
	}, {
		name:      "RestartAllContainers",
		container: "restartPolicy: Never\nrestartPolicyRules:\n- action: RestartAllContainers\n  exitCodes: {operator: In, values: [42]}\n",
		field:     "spec.containers[0].restartPolicyRules[0].action", message: "does not restart all of a pod's containers",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, "pod.yaml", podWith(tt.container, ""))
			for _, e := range errs {
				if e.Field == tt.field && strings.Contains(e.Message, tt.message) {
					return
				}
			}
			t.Errorf("no error of %s containing %q; got:\n%v", tt.field, tt.message, errs)
		})
	}
}
