package runner

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Container restart rules (KEP-5307, beta and on by default in Kubernetes
// v1.37): a container's own restartPolicy overrides the pod's, and its
// restartPolicyRules, tried in order, may restart it on some exit codes
// whatever the policy says.

// containerPolicy is the restart policy that governs c: its own when set,
// else the pod's. (The container policies have the pod policies' values.)
func containerPolicy(pod *v1.Pod, c *v1.Container) v1.RestartPolicy {
	if c.RestartPolicy != nil {
		return v1.RestartPolicy(*c.RestartPolicy)
	}
	return pod.Spec.RestartPolicy
}

// RestartsAfterExit reports whether c, having exited with exitCode, is
// started again, as the kubelet's ContainerShouldRestart: the first of its
// restartPolicyRules that matches the exit code decides; without a match,
// its own restartPolicy, then the pod's. Rules count only beside a
// container restartPolicy (validation requires one). The action
// RestartAllContainers (a second, alpha-era gate) is not carried out by
// podrun: such a rule falls back to the container's policy, as on a
// kubelet without that gate.
func RestartsAfterExit(pod *v1.Pod, c *v1.Container, exitCode int) bool {
	if c.RestartPolicy != nil {
		for _, r := range c.RestartPolicyRules {
			if ruleMatches(r, exitCode) {
				if r.Action == v1.ContainerRestartRuleActionRestart {
					return true
				}
				break
			}
		}
	}
	switch containerPolicy(pod, c) {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// ruleMatches reports whether the rule's requirement holds for exitCode.
func ruleMatches(r v1.ContainerRestartRule, exitCode int) bool {
	if r.ExitCodes == nil {
		return false
	}
	in := slices.Contains(r.ExitCodes.Values, int32(exitCode))
	switch r.ExitCodes.Operator {
	case v1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case v1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}
