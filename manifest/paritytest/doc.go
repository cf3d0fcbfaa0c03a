// Package paritytest holds the differential test of podrun's Pod
// validation against the Kubernetes release podrun names
// (clustertest.Version): TestValidationParity sends one generated corpus
// of Pod manifests, as the same bytes, to a real kube-apiserver (a
// dry-run create with strict field validation) and to manifest.Parse
// (Strict), and fails when podrun accepts a pod the apiserver rejects, or
// rejects one the apiserver accepts without saying, in each of its
// messages, that the rule is podrun's ("podrun" in the message).
//
// The package has no code of its own: it is a test that may import both
// manifest and clustertest. docs/validation-parity.md is its report from
// a run; PODRUN_PARITY_REPORT=<file> writes it again.
package paritytest
