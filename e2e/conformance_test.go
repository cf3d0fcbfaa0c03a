package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podrun/podrun/clustertest"
)

// Kubernetes' own node conformance specs ([NodeConformance] in
// k8s.io/kubernetes/test/e2e, built with the images they name by
// hack/conformance-build.sh) against a podrun node: the real `kubeadm
// init` with podrun in the kubelet's place (startKubeadmCluster), the
// node made schedulable, then e2e.test.
//
// By default the test runs conformanceCISpecs, a fixed subset of a few
// minutes, and fails when one of them does not pass. With
// PODRUN_CONFORMANCE=all (`make conformance`) it runs every
// [NodeConformance] spec that is not [Slow] and fails when a spec fails
// that testdata/conformance-known-failures.txt (on containerd:
// conformance-known-failures-containerd.txt) does not list (each line
// there says why podrun cannot pass it yet), or when a listed one passes;
// with
// PODRUN_CONFORMANCE_REPORT=FILE it writes the report (docs/conformance.md).
//
// PODRUN_CONFORMANCE_FOCUS=REGEX runs exactly the specs whose full names
// match REGEX (ginkgo's --focus; the [Slow]... skip still applies),
// instead of the CI subset or all, and judges them as with all: a focused
// spec that fails and is not a known failure fails the test.
// PODRUN_CONFORMANCE_ARTIFACTS=DIR keeps e2e.test's log (e2e.log), its
// ginkgo report (report.json) and podrun's own log (podrun.log, whole:
// copied after podrun has stopped and taken its pods down) in DIR, which
// is made if missing, instead of in a temporary directory that is removed.

// conformanceCISpecs are the specs CI runs: one or two of each kind the
// first phase covers (volumes, env, exit codes and termination messages,
// init containers, security context, the Kubelet specs), the managed
// /etc/hosts and exec through the node API, picked for running in seconds
// each.
var conformanceCISpecs = []string{
	`EmptyDir volumes should support \(root,0644,default\)`,
	`ConfigMap should be consumable from pods in volume \[Conformance\]`,
	`Secrets should be consumable from pods in volume \[Conformance\]`,
	`Downward API volume should provide podname only`,
	`Variable Expansion should allow composing env vars into new env vars`,
	`Container Runtime blackbox test on terminated container should report termination message from file when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set`,
	`InitContainer should invoke init containers on a RestartNever pod`,
	`Security Context When creating a container with runAsUser should run the container with uid 65534`,
	`Kubelet when scheduling a busybox command in a pod should print the output to logs`,
	`Kubelet when scheduling an agnhost Pod with hostAliases should write entries to /etc/hosts`,
	`Pods should support remote command execution over websockets`,
}

// conformanceProcs is how many specs run at once.
const conformanceProcs = 4

// conformanceSkip leaves out what the suite itself marks as not for a
// node conformance run of one node.
const conformanceSkip = `\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:|\[Alpha\]`

func TestNodeConformance(t *testing.T) {
	e2eTest := filepath.Join(clustertest.BinDir(), "conformance", "e2e.test")
	if _, err := os.Stat(e2eTest); err != nil {
		t.Fatalf("%v: run hack/conformance-build.sh first (hack/test.sh does)", err)
	}
	all := os.Getenv("PODRUN_CONFORMANCE") == "all"
	focused := os.Getenv("PODRUN_CONFORMANCE_FOCUS")
	focus := `\[NodeConformance\]`
	switch {
	case focused != "":
		if _, err := regexp.Compile(focused); err != nil {
			t.Fatalf("PODRUN_CONFORMANCE_FOCUS: %v", err)
		}
		focus = focused
	case !all:
		focus = strings.Join(conformanceCISpecs, "|")
	}
	// Known failures are judged, and the long timeout given, for every
	// run that is not the fixed CI subset.
	judgeKnown := all || focused != ""

	// The first TempDir of the test: its removal, registered now, runs
	// after every cleanup registered below, the cluster's too.
	dir := t.TempDir()
	var c *cluster
	if artifacts := os.Getenv("PODRUN_CONFORMANCE_ARTIFACTS"); artifacts != "" {
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			t.Fatalf("PODRUN_CONFORMANCE_ARTIFACTS: %v", err)
		}
		dir = artifacts
		// Registered before the cluster's cleanup, so it runs after it:
		// podrun has stopped and taken its pods down, its log is whole.
		t.Cleanup(func() {
			if c == nil {
				return
			}
			if err := copyFileTo(c.podrunLog, filepath.Join(artifacts, "podrun.log")); err != nil {
				t.Errorf("keeping podrun's log: %v", err)
			}
		})
	}

	// PODRUN_CONFORMANCE_RUNTIME=containerd runs the node on the private
	// containerd (hack/containerd.sh), with every registry.k8s.io image of
	// the local dockerd imported into it.
	onCRI := false
	engineName, knownFailures := "Docker", "conformance-known-failures.txt"
	switch rt := os.Getenv("PODRUN_CONFORMANCE_RUNTIME"); rt {
	case "", "docker":
	case "containerd":
		onCRI = true
		// What fails depends on the engine (Docker cannot start a
		// privileged container here, containerd can), so each has its list.
		engineName, knownFailures = "containerd", "conformance-known-failures-containerd.txt"
		if err := importRegistryImages(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("PODRUN_CONFORMANCE_RUNTIME=%q: docker or containerd", rt)
	}

	var err error
	c, err = startKubeadmCluster(t, onCRI)
	if err != nil {
		t.Fatalf("kubeadm init: %v", err)
	}
	c.makeSchedulable(t)

	jsonReport := filepath.Join(dir, "report.json")
	timeout := 20 * time.Minute
	if judgeKnown {
		timeout = 4 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Minute)
	defer cancel()
	// The ginkgo CLI runs the specs in parallel processes: most of a spec
	// is waiting for a pod, and one at a time the whole set takes hours.
	ginkgo := filepath.Join(filepath.Dir(e2eTest), "ginkgo")
	cmd := exec.CommandContext(ctx, ginkgo,
		"--procs", strconv.Itoa(conformanceProcs),
		"--focus", focus,
		"--skip", conformanceSkip,
		"--timeout", timeout.String(),
		"--json-report", "report.json",
		"--output-dir", dir,
		"--no-color",
		e2eTest, "--",
		"--kubeconfig", c.admin,
		"--provider", "local",
		"--kubectl-path", c.kubectl,
		"--allowed-not-ready-nodes", "0",
		"--minStartupPods", "0",
		"--system-pods-startup-timeout", "5m",
		"--disable-log-dump",
		"--dump-logs-on-failure=false",
		"--report-dir", dir,
	)
	logPath := filepath.Join(dir, "e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	runErr := cmd.Run()
	logFile.Close()
	t.Logf("e2e.test (%s): %v", time.Since(start).Round(time.Second), runErr)

	specs, err := readGinkgoReport(jsonReport)
	if err != nil {
		t.Fatalf("e2e.test wrote no report (%v); its log ends:\n%s", err, tailFile(logPath, 80))
	}
	ran := 0
	for _, s := range specs {
		if s.State != "skipped" && s.State != "pending" {
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("e2e.test ran no spec; its log ends:\n%s", tailFile(logPath, 80))
	}
	if !judgeKnown && ran < len(conformanceCISpecs) {
		t.Errorf("e2e.test ran %d specs, want the %d of conformanceCISpecs: a name has changed", ran, len(conformanceCISpecs))
	}
	known := map[string]string{}
	if judgeKnown {
		known = readKnownFailures(t, filepath.Join("testdata", knownFailures))
	}
	for _, s := range specs {
		_, isKnown := known[s.Name]
		switch {
		case s.failed() && !isKnown:
			t.Errorf("spec failed (%s): %s\n%s", s.State, s.Name, s.Message)
		case s.State == "passed" && isKnown:
			t.Errorf("spec passed, but testdata/%s says it fails: remove it there: %s", knownFailures, s.Name)
		}
	}
	if path := os.Getenv("PODRUN_CONFORMANCE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(conformanceReport(specs, known, engineName)), 0o644); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.Logf("e2e.test's log ends:\n%s", tailFile(logPath, 120))
	}
}

// copyFileTo copies the file at src to dst (made or truncated).
// importRegistryImages sets the private containerd up and imports into it
// the images of the local dockerd named registry.k8s.io/...: the control
// plane's (hack/k8s.sh) and the specs' (hack/conformance-build.sh).
func importRegistryImages() error {
	list, err := docker.ImageList(context.Background(), image.ListOptions{})
	if err != nil {
		return fmt.Errorf("list docker images: %w", err)
	}
	refs := []string{"import"}
	for _, img := range list {
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, "registry.k8s.io/") {
				refs = append(refs, tag)
			}
		}
	}
	return containerdScript(refs...)
}

func copyFileTo(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// makeSchedulable readies the one-node kubeadm cluster for the specs, as
// a single-node cluster is readied for conformance: the control-plane
// taint is lifted so that test pods land on the node; CoreDNS, whose image
// no registry here serves, is scaled to zero, and kube-proxy's DaemonSet
// (privileged, a stand-in here) is removed, so that kube-system's pods
// are all ready, which the suite waits for before any spec.
func (c *cluster) makeSchedulable(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	waitUntil(t, 2*time.Minute, "node Ready", func() (bool, string) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, c.e.node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady {
				return cond.Status == v1.ConditionTrue, cond.Reason + ": " + cond.Message
			}
		}
		return false, "no Ready condition"
	})
	for _, args := range [][]string{
		{"taint", "nodes", c.e.node, "node-role.kubernetes.io/control-plane:NoSchedule-"},
		{"-n", "kube-system", "scale", "deployment", "coredns", "--replicas=0"},
		{"-n", "kube-system", "delete", "daemonset", "kube-proxy", "--ignore-not-found"},
	} {
		if out, errOut, err := c.runKubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}
	waitUntil(t, 3*time.Minute, "kube-system's pods all Running and ready", func() (bool, string) {
		pods, err := c.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !podReady(p) {
				bad = append(bad, p.Name+" "+podState(&p))
			}
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	})
}

// specResult is one spec of a run, as the report shows it.
type specResult struct {
	Name    string
	State   string // ginkgo's: passed, failed, skipped, panicked, timedout, ...
	Seconds float64
	Message string
}

func (s specResult) failed() bool {
	return s.State != "passed" && s.State != "skipped" && s.State != "pending"
}

// readGinkgoReport reads the specs of a ginkgo JSON report
// (-ginkgo.json-report), in the order they ran.
func readGinkgoReport(path string) ([]specResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suites []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
			RunTime                 int64 // nanoseconds
			Failure                 struct{ Message string }
		}
	}
	if err := json.Unmarshal(data, &suites); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []specResult
	for _, s := range suites {
		for _, r := range s.SpecReports {
			if r.LeafNodeType != "It" {
				continue // suite setup and teardown nodes
			}
			name := strings.Join(append(slices.Clone(r.ContainerHierarchyTexts), r.LeafNodeText), " ")
			out = append(out, specResult{Name: name, State: r.State, Seconds: float64(r.RunTime) / 1e9, Message: r.Failure.Message})
		}
	}
	return out, nil
}

// readKnownFailures reads "spec name<TAB>why" lines ('#' starts a
// comment): the specs podrun is known not to pass yet, with the reason.
func readKnownFailures(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s: %q: want \"spec<TAB>reason\"", path, line)
		}
		known[name] = strings.TrimSpace(why)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

var areaOfSpec = regexp.MustCompile(`^\[(sig-[a-z]+)\]`)

// conformanceReport renders the run as docs/conformance.md (on Docker) or
// docs/conformance-containerd.md; engineName names the node's engine.
func conformanceReport(specs []specResult, known map[string]string, engineName string) string {
	var b strings.Builder
	counts := map[string]int{}
	for _, s := range specs {
		counts[s.State]++
	}
	ran := len(specs) - counts["skipped"] - counts["pending"]
	fmt.Fprintf(&b, "# Node conformance\n\n")
	fmt.Fprintf(&b, "Kubernetes %s's own [NodeConformance] specs (k8s.io/kubernetes/test/e2e, not [Slow], [Serial], "+
		"[Disruptive], [Flaky], [Feature:...] or [Alpha]) against a podrun node: the real `kubeadm init` with "+
		"`podrun watch` in the kubelet's place, on %s, on one machine. Made by `make conformance` "+
		"(e2e TestNodeConformance with PODRUN_CONFORMANCE=all); the images the specs name are built locally by "+
		"hack/conformance-build.sh.\n\n", clustertest.Version, engineName)
	fmt.Fprintf(&b, "**%d of %d passed** (%d failed, %d skipped by the suite itself).\n\n",
		counts["passed"], ran, ran-counts["passed"], counts["skipped"])
	byArea := map[string][2]int{}
	for _, s := range specs {
		if s.State == "skipped" || s.State == "pending" {
			continue
		}
		area := "other"
		if m := areaOfSpec.FindStringSubmatch(s.Name); m != nil {
			area = m[1]
		}
		n := byArea[area]
		n[1]++
		if s.State == "passed" {
			n[0]++
		}
		byArea[area] = n
	}
	fmt.Fprintf(&b, "| area | passed | ran |\n|---|---|---|\n")
	for _, area := range slices.Sorted(func(yield func(string) bool) {
		for a := range byArea {
			if !yield(a) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", area, byArea[area][0], byArea[area][1])
	}
	fmt.Fprintf(&b, "\n## Failed\n\n")
	for _, s := range specs {
		if !s.failed() {
			continue
		}
		why := known[s.Name]
		if why == "" {
			why = "not known yet"
		}
		msg := strings.Join(strings.Fields(s.Message), " ")
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		fmt.Fprintf(&b, "- %s (%s)\n  - why: %s\n  - message: %s\n", s.Name, s.State, why, msg)
	}
	fmt.Fprintf(&b, "\n## Passed\n\n")
	for _, s := range specs {
		if s.State == "passed" {
			fmt.Fprintf(&b, "- %s (%.0f s)\n", s.Name, s.Seconds)
		}
	}
	return b.String()
}
