package paritytest

// Scheduling fields mean nothing on one machine, but the apiserver
// validates them all the same.
func addSchedulingCases(b *corpusBuilder) {
	// nodeSelector: label keys and values.
	b.mut("sched/node-selector-key-space", "sched", set(`spec.nodeSelector["bad key"]`, "x"))
	b.mut("sched/node-selector-key-prefix-bad", "sched", set(`spec.nodeSelector["Example.com/pool"]`, "x"))
	b.mut("sched/node-selector-value-space", "sched", set(`spec.nodeSelector["example.com/pool"]`, "a b"))
	b.mut("sched/node-selector-value-64", "sched", set(`spec.nodeSelector["example.com/pool"]`, label64))
	b.mut("sched/node-selector-value-empty", "sched", set(`spec.nodeSelector["example.com/pool"]`, ""))

	// Tolerations.
	tol := "spec.tolerations[0]"
	b.mut("sched/toleration-key-space", "sched", set(tol+".key", "bad key"))
	b.mut("sched/toleration-key-prefix-bad", "sched", set(tol+".key", "Example.com/x"))
	b.mut("sched/toleration-operator-bad", "sched", set(tol+".operator", "In"))
	b.mut("sched/toleration-exists-value", "sched", set(tol+".value", "x"))
	b.mut("sched/toleration-empty-key-equal", "sched", set(tol+".key", ""), set(tol+".operator", "Equal"))
	b.mut("sched/toleration-empty-key-exists", "sched", set(tol+".key", ""))
	b.mut("sched/toleration-seconds-noschedule", "sched", set(tol+".tolerationSeconds", 30))
	b.mut("sched/toleration-effect-bad", "sched", set(tol+".effect", "NoRun"))
	b.mut("sched/toleration-value-space", "sched", set("spec.tolerations[1].value", "a b"))
	b.mut("sched/toleration-seconds-negative", "sched", set("spec.tolerations[1].tolerationSeconds", -1))

	// Node affinity.
	req := "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	expr := req + ".nodeSelectorTerms[0].matchExpressions[0]"
	b.mut("sched/node-aff-no-terms", "sched", set(req+".nodeSelectorTerms", L{}))
	b.mut("sched/node-aff-empty-term", "sched", set(req+".nodeSelectorTerms", L{M{}}))
	b.mut("sched/node-aff-operator-bad", "sched", set(expr+".operator", "Like"))
	b.mut("sched/node-aff-in-no-values", "sched", set(expr+".values", L{}))
	b.mut("sched/node-aff-exists-values", "sched", set(expr+".operator", "Exists"))
	b.mut("sched/node-aff-gt-two-values", "sched", set(expr+".operator", "Gt"), set(expr+".values", L{"1", "2"}))
	b.mut("sched/node-aff-gt-ok", "sched", set(expr+".operator", "Gt"), set(expr+".values", L{"1"}))
	b.mut("sched/node-aff-key-space", "sched", set(expr+".key", "bad key"))
	b.mut("sched/node-aff-value-space", "sched", set(expr+".values[0]", "a b"))
	b.mut("sched/node-aff-field-key-bad", "sched", set(req+".nodeSelectorTerms[0].matchFields[0].key", "metadata.labels"))
	b.mut("sched/node-aff-field-two-values", "sched", set(req+".nodeSelectorTerms[0].matchFields[0].values", L{"a", "b"}))
	b.mut("sched/node-aff-field-value-bad", "sched", set(req+".nodeSelectorTerms[0].matchFields[0].values[0]", "Node_1"))
	pref := "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
	b.mut("sched/node-aff-weight-0", "sched", set(pref+".weight", 0))
	b.mut("sched/node-aff-weight-101", "sched", set(pref+".weight", 101))
	b.mut("sched/node-aff-pref-value-space", "sched", set(pref+".preference.matchExpressions[0].operator", "In"),
		set(pref+".preference.matchExpressions[0].values", L{"a b"}))

	// Pod affinity and anti-affinity.
	pa := "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
	b.mut("sched/pod-aff-weight-0", "sched", set(pa+".weight", 0))
	b.mut("sched/pod-aff-topology-empty", "sched", set(pa+".podAffinityTerm.topologyKey", ""))
	b.mut("sched/pod-aff-topology-space", "sched", set(pa+".podAffinityTerm.topologyKey", "bad key"))
	b.mut("sched/pod-aff-selector-key-bad", "sched", set(pa+".podAffinityTerm.labelSelector.matchLabels", M{"bad key": "x"}))
	b.mut("sched/pod-aff-selector-value-bad", "sched", set(pa+".podAffinityTerm.labelSelector.matchLabels", M{"app": "a b"}))
	b.mut("sched/pod-aff-match-label-keys", "sched", set(pa+".podAffinityTerm.matchLabelKeys", L{"pod-template-hash"}))
	b.mut("sched/pod-aff-match-keys-overlap", "sched", set(pa+".podAffinityTerm.matchLabelKeys", L{"app"}))
	b.mut("sched/pod-aff-match-mismatch-same", "sched", set(pa+".podAffinityTerm.matchLabelKeys", L{"version"}),
		set(pa+".podAffinityTerm.mismatchLabelKeys", L{"version"}))
	b.mut("sched/pod-aff-keys-no-selector", "sched", del(pa+".podAffinityTerm.labelSelector"),
		set(pa+".podAffinityTerm.matchLabelKeys", L{"version"}))
	anti := "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
	b.mut("sched/anti-aff-topology-empty", "sched", set(anti+".topologyKey", ""))
	b.mut("sched/anti-aff-ns-bad", "sched", set(anti+".namespaces[0]", "Bad_NS"))
	b.mut("sched/anti-aff-operator-bad", "sched", set(anti+".labelSelector.matchExpressions[0].operator", "Like"))
	b.mut("sched/anti-aff-exists-values", "sched", set(anti+".labelSelector.matchExpressions[0].operator", "Exists"))
	b.mut("sched/anti-aff-ns-selector", "sched", set(anti+".namespaceSelector", M{"matchLabels": M{"team": "a"}}))
	b.mut("sched/anti-aff-ns-selector-bad", "sched", set(anti+".namespaceSelector", M{"matchLabels": M{"bad key": "a"}}))

	// Topology spread.
	ts := "spec.topologySpreadConstraints[0]"
	b.mut("sched/spread-max-skew-0", "sched", set(ts+".maxSkew", 0))
	b.mut("sched/spread-topology-empty", "sched", set(ts+".topologyKey", ""))
	b.mut("sched/spread-topology-space", "sched", set(ts+".topologyKey", "bad key"))
	b.mut("sched/spread-unsatisfiable-bad", "sched", set(ts+".whenUnsatisfiable", "Ignore"))
	b.mut("sched/spread-duplicate", "sched", set("spec.topologySpreadConstraints[1]", M{
		"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}))
	b.mut("sched/spread-min-domains-0", "sched", set(ts+".minDomains", 0))
	b.mut("sched/spread-min-domains-anyway", "sched", set(ts+".whenUnsatisfiable", "ScheduleAnyway"))
	b.mut("sched/spread-affinity-policy-bad", "sched", set(ts+".nodeAffinityPolicy", "Always"))
	b.mut("sched/spread-taints-policy-bad", "sched", set(ts+".nodeTaintsPolicy", "Always"))
	b.mut("sched/spread-match-keys-overlap", "sched", set(ts+".matchLabelKeys", L{"app"}))
	b.mut("sched/spread-match-key-bad", "sched", set(ts+".matchLabelKeys", L{"bad key"}))
	b.mut("sched/spread-selector-bad", "sched", set(ts+".labelSelector.matchLabels", M{"app": "a b"}))
	b.mut("sched/spread-keys-no-selector", "sched", del(ts+".labelSelector"))

	// Readiness gates.
	b.mut("sched/readiness-gate-space", "sched", set("spec.readinessGates[0].conditionType", "bad type"))
	b.mut("sched/readiness-gate-empty", "sched", set("spec.readinessGates[0].conditionType", ""))
	b.mut("sched/readiness-gate-plain", "sched", set("spec.readinessGates[0].conditionType", "Ready"))
	b.mut("sched/readiness-gate-ok", "sched", set("spec.readinessGates[0].conditionType", "example.com/ready"))

	// Scheduler and priority.
	b.mut("sched/scheduler-name-odd", "sched", set("spec.schedulerName", "My Scheduler"))
	b.mut("sched/priority-value-match", "sched", set("spec.priority", 2000000000))
	b.mut("sched/preemption-never", "sched", set("spec.preemptionPolicy", "Never"))
}
