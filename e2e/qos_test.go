package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// qosPod is a pod of one container that sleeps, with resources (YAML, may
// be "") and extra spec lines.
func qosPod(name, resources, spec string) string {
	s := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
%s  containers:
  - name: main
    image: %s
    command: [sleep, "3600"]
`, name, spec, testImage)
	if resources != "" {
		s += "    resources:\n" + resources
	}
	return s
}

// ownOOMScoreAdj is this process's oom_score_adj: podrun, its child,
// starts with it.
func ownOOMScoreAdj(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQOSOOMScoreAdj: the pods of an etcd-like Guaranteed manifest, a
// node-critical one (kubeadm's priority class), a Burstable and a
// BestEffort one all start; ps reports their QoS classes; each container
// (and each sandbox) runs with the kubelet's oom_score_adj where this
// machine lets podrun lower scores (-997, -998), and otherwise with
// podrun's own score, below every Burstable and BestEffort container's,
// which podrun says.
func TestQOSOOMScoreAdj(t *testing.T) {
	e := newEnv(t)
	// What this machine allows, found apart from podrun: may a child of
	// this process lower its score (CAP_SYS_RESOURCE)?
	canLower := exec.Command("sh", "-c", "echo -999 > /proc/self/oom_score_adj").Run() == nil
	floor := ownOOMScoreAdj(t)
	t.Logf("this machine may lower oom_score_adj: %v; own score %d", canLower, floor)

	info := e.podrun(time.Minute, "info", "-o", "json")
	if info.code != 0 {
		t.Fatalf("info: exit %d\n%s", info.code, info.stderr)
	}
	var facts struct {
		MemoryBytes int64 `json:"memoryBytes"`
		OOM         *struct {
			CanLower bool `json:"canLower"`
			Own      int  `json:"own"`
		} `json:"oomScoreAdj"`
	}
	if err := json.Unmarshal([]byte(info.stdout), &facts); err != nil {
		t.Fatalf("info: %v\n%s", err, info.stdout)
	}
	if facts.OOM == nil || facts.OOM.CanLower != canLower || facts.OOM.Own != floor {
		t.Errorf("info says %+v; want canLower %v, own %d", facts.OOM, canLower, floor)
	}
	if facts.MemoryBytes <= 0 {
		t.Fatalf("info: memory %d", facts.MemoryBytes)
	}

	const burstableRequest = 256 << 20
	e.write("etcd.yaml", qosPod("etcd", "      requests: {cpu: 100m, memory: 64Mi}\n      limits: {cpu: 100m, memory: 64Mi}\n", ""))
	e.write("critical.yaml", qosPod("critical", "      requests: {cpu: 50m, memory: 32Mi}\n", "  priorityClassName: system-node-critical\n"))
	e.write("burstable.yaml", qosPod("burstable", "      requests: {memory: 256Mi}\n", ""))
	e.write("besteffort.yaml", qosPod("besteffort", "", ""))

	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if warned := strings.Contains(r.stderr, "may not lower oom_score_adj"); warned == canLower {
		t.Errorf("warning said: %v, machine may lower: %v\nstderr:\n%s", warned, canLower, r.stderr)
	}

	// ps, from Docker alone (no daemon): the classes kept with the sandboxes.
	ps := e.podrun(time.Minute, "ps", "-o", "json", "--daemon=false")
	if ps.code != 0 {
		t.Fatalf("ps: exit %d\n%s", ps.code, ps.stderr)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(ps.stdout), &list); err != nil {
		t.Fatalf("ps: %v\n%s", err, ps.stdout)
	}
	wantClass := map[string]v1.PodQOSClass{"etcd": v1.PodQOSGuaranteed, "critical": v1.PodQOSBurstable,
		"burstable": v1.PodQOSBurstable, "besteffort": v1.PodQOSBestEffort}
	for _, p := range list.Items {
		name := strings.TrimSuffix(p.Name, "-"+e.node)
		if p.Status.QOSClass != wantClass[name] || p.Status.Phase != v1.PodRunning {
			t.Errorf("ps: %s is %s, QoS class %q; want Running, %q", p.Name, p.Status.Phase, p.Status.QOSClass, wantClass[name])
		}
		delete(wantClass, name)
	}
	if len(wantClass) != 0 {
		t.Errorf("ps lacks %v:\n%s", wantClass, ps.stdout)
	}

	// The scores the running processes have, read from the host.
	scores := map[string]int{} // pod name, or pod name + "/sandbox"
	for _, c := range e.containers() {
		ins, err := docker.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ins.State == nil || !ins.State.Running || ins.State.Pid == 0 {
			t.Fatalf("%s is not running: %+v", ins.Name, ins.State)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", ins.State.Pid))
		if err != nil {
			t.Fatal(err)
		}
		score, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if score != ins.HostConfig.OomScoreAdj {
			t.Errorf("%s: oom_score_adj %d, Docker was asked for %d", ins.Name, score, ins.HostConfig.OomScoreAdj)
		}
		key := strings.TrimSuffix(c.Labels["io.podrun.pod.name"], "-"+e.node)
		if c.Labels["io.podrun.container.type"] == "sandbox" {
			key += "/sandbox"
		}
		scores[key] = score
	}
	t.Logf("scores: %v", scores)

	burstable := 1000 - int(1000*int64(burstableRequest)/facts.MemoryBytes)
	burstable = min(max(burstable, 3), 999)
	want := map[string]int{"burstable": burstable, "besteffort": 1000}
	protected := []string{"etcd", "critical"}
	sandboxes := []string{"etcd/sandbox", "critical/sandbox", "burstable/sandbox", "besteffort/sandbox"}
	if canLower {
		for _, p := range protected {
			want[p] = -997
		}
		for _, s := range sandboxes {
			want[s] = -998
		}
	} else {
		for _, p := range append(protected, sandboxes...) {
			want[p] = floor
		}
	}
	for k, w := range want {
		if got, ok := scores[k]; !ok || got != w {
			t.Errorf("%s: oom_score_adj %d (found %v), want %d", k, got, ok, w)
		}
	}
	if len(scores) != len(want) {
		t.Errorf("scores of %v, want of %v", scores, want)
	}
	// Whatever the machine: the protected pods below every other one.
	for _, p := range protected {
		for _, o := range []string{"burstable", "besteffort"} {
			if scores[p] >= scores[o] {
				t.Errorf("%s (%d) is not below %s (%d)", p, scores[p], o, scores[o])
			}
		}
	}
}

// TestQOSWatchPodsAndOwnScore: podrun watch serves each pod's QoS class on
// /pods, and runs itself at the kubelet's -999 where the machine lets it,
// at the score it was started with otherwise (and says why, once).
func TestQOSWatchPodsAndOwnScore(t *testing.T) {
	e := newEnv(t)
	canLower := exec.Command("sh", "-c", "echo -999 > /proc/self/oom_score_adj").Run() == nil
	own := ownOOMScoreAdj(t)
	e.write("etcd.yaml", qosPod("etcd", "      requests: {cpu: 100m, memory: 64Mi}\n      limits: {cpu: 100m, memory: 64Mi}\n", ""))
	e.write("besteffort.yaml", qosPod("besteffort", "", ""))

	port := freePort(t)
	cmd, stderr := e.start("watch", "--path", e.dir, "--file-check-frequency", "1s", "--healthz-port", strconv.Itoa(port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, "the HTTP server", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	e.waitSynced("etcd", "besteffort")
	got := e.pods()
	for name, want := range map[string]v1.PodQOSClass{"etcd": v1.PodQOSGuaranteed, "besteffort": v1.PodQOSBestEffort} {
		if c := got[name+"-"+e.node].Status.QOSClass; c != want {
			t.Errorf("/pods: %s has QoS class %q, want %q", name, c, want)
		}
	}

	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	want := own
	if canLower {
		want = -999
	}
	if score := strings.TrimSpace(string(b)); score != strconv.Itoa(want) {
		t.Errorf("podrun watch runs at oom_score_adj %s, want %d", score, want)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if n := strings.Count(stderr.String(), "may not lower oom_score_adj"); n != map[bool]int{true: 0, false: 1}[canLower] {
		t.Errorf("warned %d times (machine may lower: %v):\n%s", n, canLower, stderr)
	}
}
