package cmd

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// portPod serves on a host port.
func portPod(name string, port int) string {
	return webPod(name) + "    ports: [{containerPort: 80, hostPort: " + strconv.Itoa(port) + "}]\n"
}

// validate runs `podrun validate args...` with the env's options.
func (e *cmdEnv) validate(args ...string) error {
	e.t.Helper()
	var opts *validateOptions
	e.parse(func(g *globalOptions) *cobra.Command {
		return newValidateCmd(g, func(_ context.Context, o *validateOptions) error { opts = o; return nil })
	}, append([]string{"validate"}, args...)...)
	return validateRun(context.Background(), opts)
}

// TestValidateChecksBetweenObjects: validate reports, each at the line of
// its field, a host port a pod before holds (naming both places), a
// ConfigMap, key or imagePullSecret no argument defines, and a privileged
// container (naming --allow-privileged); an empty file is a warning.
func TestValidateChecksBetweenObjects(t *testing.T) {
	e := newCmdEnv(t)
	a := e.write("a.yaml", portPod("a", 8080))
	b := e.write("b.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: conf
data:
  k: v
---
apiVersion: v1
kind: Pod
metadata:
  name: b
spec:
  imagePullSecrets: [{name: regcred}]
  initContainers:
  - name: setup
    image: img:1
    securityContext: {privileged: true}
  containers:
  - name: app
    image: img:1
    ports: [{containerPort: 80, hostPort: 8080}]
    env:
    - name: K
      valueFrom: {configMapKeyRef: {name: conf, key: nokey}}
    - name: OPT
      valueFrom: {secretKeyRef: {name: nosecret, key: x, optional: true}}
  volumes:
  - name: files
    configMap: {name: missing}
`)
	empty := e.write("c.yaml", "# to do\n")

	err := e.validate(e.dir)
	want := []string{
		b + ":17: spec.initContainers[0].securityContext.privileged: container setup is privileged; pass --allow-privileged to run it",
		b + ":21: spec.containers[0].ports[0].hostPort: host port 8080/TCP of container app is held by pod default/a-node1 (" +
			a + ":15: spec.containers[0].ports[0].hostPort), which comes first: once and watch refuse this pod (NodePorts)",
		b + `:29: spec.volumes[0].configMap.name: configmap "missing" not found: once and watch run the pod, but its containers ` +
			"wait (CreateContainerConfigError) until it is defined; define it, or make the reference optional",
		b + `:24: spec.containers[0].env[0].valueFrom.configMapKeyRef.key: key "nokey" not found in configmap "conf": once and watch ` +
			"run the pod, but its containers wait (CreateContainerConfigError) until it is defined; define it, or make the reference optional",
		b + `:13: spec.imagePullSecrets[0].name: image pull secret "regcred" not found: images are pulled without it`,
	}
	wantExit(t, "validate", err, exitBadInput)
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("validate says:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if warning := "warning: " + empty + ": empty: no YAML or JSON document (blank, or only comments), so it defines nothing\n"; strings.Count(e.out.String(), warning) != 1 {
		t.Errorf("the empty file was not warned of once:\n%s", e.out)
	}

	// --allow-privileged is validate's too.
	err = e.validate("--allow-privileged", a, b)
	wantExit(t, "validate --allow-privileged", err, exitBadInput)
	if strings.Contains(err.Error(), "privileged") || strings.Count(err.Error(), "\n") != 3 {
		t.Errorf("validate --allow-privileged says:\n%v", err)
	}
	// Each alone, a is fine.
	e.reset()
	wantExit(t, "validate a", e.validate(a), exitOK)
	// Standard input that holds nothing is a warning, not an error.
	e.g.In = strings.NewReader("\n")
	wantExit(t, "validate -", e.validate("-"), exitOK)
	if !strings.Contains(e.out.String(), "warning: -: empty: no YAML or JSON document (blank, or only comments), so it defines nothing\n") {
		t.Errorf("empty standard input not warned of:\n%s", e.out)
	}
}

// TestOnceRefusesTheLaterPodOfAHostPort: once brings the first pod up and
// reports the second as refused (Failed, NodePorts, and why, under the
// table): exit 1, as for any pod that failed.
func TestOnceRefusesTheLaterPodOfAHostPort(t *testing.T) {
	e := newCmdEnv(t)
	a := e.write("a.yaml", portPod("a", 8080))
	b := e.write("b.yaml", portPod("b", 8080))
	err := e.once(a, b, "--timeout", "10s")
	wantExit(t, "once", err, exitPodFailed, "pods failed: [default/b-node1]")
	report := e.out.String()
	for _, s := range []string{"default    a-node1  Running  app        Running",
		"default    b-node1  Failed   -          NodePorts",
		"default/b-node1: Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: " +
			"spec.containers[0].ports[0].hostPort: host port 8080/TCP of container app is held by pod default/a-node1 " +
			"(spec.containers[0].ports[0].hostPort in " + a + ")"} {
		if !strings.Contains(report, s) {
			t.Errorf("report lacks %q:\n%s", s, report)
		}
	}
	if e.running("a-node1") == nil {
		t.Error("the first pod does not run")
	}
	if n := len(e.containers("b-node1")); n != 0 {
		t.Errorf("the refused pod has %d containers", n)
	}
}

// TestOnceWarnsOfMissingReference: a pod that needs a ConfigMap no
// argument defines runs, and waits with CreateContainerConfigError; once
// warned of it, at its line, before starting.
func TestOnceWarnsOfMissingReference(t *testing.T) {
	e := newCmdEnv(t)
	p := e.write("web.yaml", webPod("web")+"    envFrom: [{configMapRef: {name: settings}}]\n")
	err := e.once(p, "--timeout", "300ms")
	wantExit(t, "once", err, exitPodFailed, "timed out")
	if !strings.Contains(e.out.String(), `Waiting (CreateContainerConfigError: configmap "settings" not found)`) {
		t.Errorf("report:\n%s", e.out)
	}
	want := p + `:15: spec.containers[0].envFrom[0].configMapRef.name: configmap "settings" not found: once and watch run the pod`
	found := false
	for _, r := range e.log.records {
		found = found || (r.level.String() == "WARN" && strings.HasPrefix(r.msg, want))
	}
	if !found {
		t.Errorf("no warning %q:\n%s", want, e.log)
	}
}

// TestWatchRefusesTheLaterPodOfAHostPort: watch runs the pod that comes
// first and refuses the other (logged with the kubelet's reason); a pod
// added later that asks for the port is refused too, and the running one
// is never disturbed.
func TestWatchRefusesTheLaterPodOfAHostPort(t *testing.T) {
	e := newCmdEnv(t)
	e.write("a.yaml", portPod("a", 8080))
	e.write("b.yaml", portPod("b", 8080))
	rejected := func() []logRecord { return e.log.find("pod rejected") }
	err := e.watch([]string{"--path", e.dir}, func() bool { return e.running("a-node1") != nil && len(rejected()) > 0 })
	wantExit(t, "watch", err, exitOK)
	if got := rejected(); len(got) != 1 || got[0].attrs["pod"] != "default/b-node1" || got[0].attrs["reason"] != "NodePorts" {
		t.Errorf("rejections logged: %+v", got)
	}
	first := e.running("a-node1")
	if n := len(e.containers("b-node1")); n != 0 {
		t.Errorf("the refused pod has %d containers", n)
	}

	// podrun again, and a pod that sorts first (0.yaml) now asks for the
	// port: a runs, so 0 is refused.
	e.write("0.yaml", portPod("zero", 8080))
	err = e.watch([]string{"--path", e.dir}, func() bool { return len(rejected()) >= 3 })
	wantExit(t, "watch again", err, exitOK)
	if c := e.running("a-node1"); c == nil || c.ID != first.ID {
		t.Errorf("the running pod was disturbed: %+v, was %s", c, first.ID)
	}
	if n := len(e.containers("zero-node1")); n != 0 {
		t.Errorf("the new pod has %d containers", n)
	}
}

// TestTablesShowARefusedPod: ps shows a refused pod's reason as kubectl
// does (and its message with -o wide); once's report its reason and,
// under the table, its message.
func TestTablesShowARefusedPod(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-n", Namespace: "default"}}
	p.Spec.Containers = []v1.Container{{Name: "app"}}
	p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "NodePorts", Message: "Pod was rejected: port taken"}
	var b bytes.Buffer
	if err := writePodTable(&b, []*v1.Pod{p}, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME   READY   STATUS      RESTARTS   AGE   IP       CONTAINERS\n" +
		"default     b-n    0/1     NodePorts   0          -     <none>   \n" +
		"default/b-n: Pod was rejected: port taken\n"
	if b.String() != want {
		t.Errorf("ps:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := writeReport(&b, "table", []*v1.Pod{p}); err != nil {
		t.Fatal(err)
	}
	want = "NAMESPACE  POD  PHASE   CONTAINER  STATE      RESTARTS  EXIT CODE\n" +
		"default    b-n  Failed  -          NodePorts  -         -\n" +
		"default/b-n: Pod was rejected: port taken\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}
