package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/bench/benchkit"
)

// Update reaction and idle cost on containerd (podrun's CRI engine), next
// to what containerd itself takes in the same run: the figures the Docker
// sections give, for the second engine.

// CRIIdle is one subject's idle cost with Pods pods on containerd.
type CRIIdle struct {
	Subject string
	Pods    int
	Seconds float64
	// RSS of podrun at the end of the window; CPUPercent its CPU in it.
	RSS        int64
	CPUPercent float64
	// RuntimeCalls per minute by method (podrun_runtime_calls_total).
	RuntimeCalls  map[string]float64
	RuntimePerMin float64
	// Containerd is containerd's CPU in the window, and alone (its shims,
	// one per pod, are not counted: they serve the containers, not podrun).
	Containerd DaemonCPU
}

// containerdPID is the pid of the containerd that serves endpoint, from
// the pid file hack/containerd.sh keeps beside its socket.
func containerdPID(endpoint string) (int, error) {
	sock := strings.TrimPrefix(endpoint, "unix://")
	file := filepath.Join(filepath.Dir(sock), "containerd.pid")
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("containerd's pid (hack/containerd.sh writes %s): %w", file, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("containerd's pid in %s: %w", file, err)
	}
	return pid, nil
}

// criWatch starts subject s's `podrun watch` of dir on the CRI runtime.
func (e *env) criWatch(s subject, node, root, dir string) (*benchkit.Proc, int, error) {
	p := &benchkit.Podrun{Bin: s.Bin, Node: node, Root: root, Endpoint: e.cfg.criEndpoint}
	return e.watch(p, dir)
}

// criRunning counts node's running app containers on the CRI runtime.
func (e *env) criRunning(ctx context.Context, node string) func() (int, error) {
	return func() (int, error) {
		running, _, _, err := benchkit.RunningCRI(ctx, e.rs, node)
		return running, err
	}
}

// criUpdate is update on containerd: an edited manifest's new container,
// from the write to its start (containerd's StartedAt), against
// containerd's own create + start and stop of a container in a sandbox
// the harness made.
func (e *env) criUpdate(ctx context.Context, s subject) (Update, error) {
	n := e.cfg.updatePods
	u := Update{Subject: s.Label, Pods: n}
	node := track(benchkit.NodeName("bench-cri-upd"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	defer e.cleanupCRI(node, e.trackCRI(node))
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		return u, err
	}
	pr, _, err := e.criWatch(s, node, root, dir)
	if err != nil {
		return u, err
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	if err := waitUp(ctx, pr, n, e.criRunning(ctx, node)); err != nil {
		return u, err
	}
	// The reference's sandbox is another node's: podrun would remove a
	// sandbox of its own node that no manifest defines.
	refNode := node + "-ref"
	defer e.cleanupCRI(refNode, e.trackCRI(refNode))
	ref, err := e.newCRIReference(ctx, refNode, filepath.Dir(dir))
	if err != nil {
		return u, err
	}
	time.Sleep(3 * time.Second) // let the bring-up's stragglers pass
	ops := updateOps{
		engine: "containerd",
		appOf: func(ctx context.Context, pod, not string) (string, error) {
			return e.criAppOf(ctx, node, pod, not)
		},
		startedAt: func(ctx context.Context, id string) (time.Time, error) {
			st, err := e.rs.ContainerStatus(ctx, id, false)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(0, st.GetStatus().GetStartedAt()), nil
		},
		reference: func(ctx context.Context, _, _ string, cmd []string) (float64, float64, error) {
			return ref.createStartStop(ctx, cmd)
		},
	}
	return u, e.updateTrials(ctx, &u, s.Label, node, dir, pr, ops)
}

// criAppOf returns the running app container of pod other than not on the
// CRI runtime; "" when there is none.
func (e *env) criAppOf(ctx context.Context, node, pod, not string) (string, error) {
	cs, err := e.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{benchkit.LabelNode: node, "io.podrun.pod.name": pod},
	})
	if err != nil {
		return "", err
	}
	for _, c := range cs {
		if c.GetMetadata().GetName() == "app" && c.Id != not {
			return c.Id, nil
		}
	}
	return "", nil
}

// criReference is a sandbox the harness runs to time containerd's own
// create + start and stop of a container: the reference of an update.
type criReference struct {
	e       *env
	sandbox string
	config  *runtimeapi.PodSandboxConfig
	labels  map[string]string
	// attempt numbers the reference's containers: CRI reserves a
	// container's name and attempt in its sandbox.
	attempt uint32
}

// newCRIReference runs the reference's sandbox, labelled with node (whose
// cleanup removes it), its logs under logDir.
func (e *env) newCRIReference(ctx context.Context, node, logDir string) (*criReference, error) {
	labels := map[string]string{benchkit.LabelNode: node, "io.podrun.pod.name": "reference-" + node}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "reference-" + node, Uid: node + "-reference", Namespace: "default"},
		Hostname:     "reference",
		LogDirectory: filepath.Join(logDir, "reference"),
		Labels:       labels,
	}
	id, err := e.rs.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		return nil, fmt.Errorf("reference sandbox: %w", err)
	}
	return &criReference{e: e, sandbox: id, config: cfg, labels: labels}, nil
}

// createStartStop times CreateContainer + StartContainer of a container
// running cmd in the reference sandbox, then its StopContainer (timeout 0),
// and removes it.
func (r *criReference) createStartStop(ctx context.Context, cmd []string) (float64, float64, error) {
	rs := r.e.rs
	r.attempt++
	start := time.Now()
	id, err := rs.CreateContainer(ctx, r.sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: r.attempt},
		Image:    &runtimeapi.ImageSpec{Image: benchkit.TestImage},
		Command:  cmd,
		Labels:   r.labels,
		LogPath:  "app.log",
	}, r.config)
	if err != nil {
		return 0, 0, fmt.Errorf("reference create: %w", err)
	}
	defer rs.RemoveContainer(context.Background(), id)
	if err := rs.StartContainer(ctx, id); err != nil {
		return 0, 0, fmt.Errorf("reference start: %w", err)
	}
	cs := time.Since(start).Seconds()
	start = time.Now()
	if err := rs.StopContainer(ctx, id, 0); err != nil {
		return 0, 0, fmt.Errorf("reference stop: %w", err)
	}
	return cs, time.Since(start).Seconds(), nil
}

// criIdle measures `podrun watch` of n running pods on containerd over the
// steady window: podrun's CPU, RSS and runtime calls, and containerd's CPU
// with podrun and then, podrun stopped, alone over as long a window.
func (e *env) criIdle(ctx context.Context, s subject, n int) (CRIIdle, error) {
	st := CRIIdle{Subject: s.Label, Pods: n}
	pid, err := containerdPID(e.cfg.criEndpoint)
	if err != nil {
		return st, err
	}
	node := track(benchkit.NodeName("bench-cri-idle"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	defer e.cleanupCRI(node, e.trackCRI(node))
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		return st, err
	}
	pr, port, err := e.criWatch(s, node, root, dir)
	if err != nil {
		return st, err
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	if err := waitUp(ctx, pr, n, e.criRunning(ctx, node)); err != nil {
		return st, err
	}
	// The bring-up's tail is not the steady state. The relist period is
	// not waited for (settleRelist): without an event stream (containerd
	// 1.6's CRI has none) it stays at its minimum.
	time.Sleep(5 * time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)

	m0, err := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	if err != nil {
		return st, err
	}
	p0, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, err
	}
	meter, err := daemonCPUMeter(pid)
	if err != nil {
		return st, err
	}
	t0 := time.Now()
	select {
	case <-time.After(e.cfg.steady):
	case <-ctx.Done():
		return st, ctx.Err()
	}
	if st.Containerd.WithPodrun, err = meter(); err != nil {
		return st, err
	}
	el := time.Since(t0)
	p1, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, fmt.Errorf("podrun watch: %w\n%s", err, lastLines(pr.Stderr(4000), 20))
	}
	m1, err := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	if err != nil {
		return st, err
	}
	perMin := 60 / el.Seconds()
	st.Seconds, st.RSS = el.Seconds(), p1.RSS
	st.CPUPercent = 100 * (p1.CPU - p0.CPU).Seconds() / el.Seconds()
	st.RuntimeCalls, st.RuntimePerMin = callsPerMin(m0, m1, perMin)
	if st.Containerd.Alone, err = daemonAlone(pr, pid, el); err != nil {
		return st, err
	}
	log.Printf("idle on containerd %3d pods %-18s: RSS %.1f MiB, podrun CPU %.2f%%, containerd %.2f%% with podrun, %.2f%% alone; runtime calls %.1f/min %v",
		n, s.Label, mib(st.RSS), st.CPUPercent, st.Containerd.WithPodrun, st.Containerd.Alone, st.RuntimePerMin, st.RuntimeCalls)
	return st, nil
}

// containerdSection reports update reaction and idle cost on containerd.
func containerdSection(b *strings.Builder, r *Results) {
	if len(r.CRIUpdate) == 0 && len(r.CRIIdle) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## On containerd: update reaction and idle cost\n\n")
	p("The two sections above, with `podrun watch --container-runtime-endpoint` on podrun's private containerd (hack/containerd.sh) " +
		"in the same run. No targets are set for them; they are here beside Docker's.\n\n")
	if len(r.CRIUpdate) > 0 {
		p("**Update reaction** (%s pods; the same edit as on Docker): from the write to the new container's `StartedAt` (containerd's clock, "+
			"the same host). The reference is containerd's own CreateContainer + StartContainer of a container of the same image and command "+
			"in a sandbox the harness runs beside the pods, timed right after, and its StopContainer (timeout 0).\n\n", r.Config["update pods"])
		p("| subject | reaction, median (s) | seen, median (s) | containerd create+start (s) | containerd stop (s) | reaction - (stop + create+start) (s) | reactions (s) |\n")
		p("|---|---:|---:|---:|---:|---:|---|\n")
		for _, u := range r.CRIUpdate {
			p("| %s | %.3f | %.3f | %.3f | %.3f | %+.3f | %s |\n", u.Subject, median(u.Reaction), median(u.Seen),
				median(u.CreateStart), median(u.Kill), median(u.Reaction)-median(u.CreateStart)-median(u.Kill), secs(u.Reaction))
		}
		p("\n")
	}
	if len(r.CRIIdle) > 0 {
		p("**Idle cost** over %s with N pods running and nothing changing: podrun's CPU and RSS, and containerd's CPU with podrun "+
			"and then, podrun stopped (its pods keep running), alone over as long a window; the difference is what podrun makes "+
			"containerd spend (the per-pod shims are not counted: they serve the containers). containerd 1.6's CRI has no event stream, "+
			"so podrun relists the node every second there (one ListPodObjects: ListPodSandbox and ListContainers), where on Docker "+
			"the relist is a safety net whose period grows to a minute while events flow.\n\n", r.Config["steady"])
		p("| N | subject | podrun CPU (%% of one core) | containerd with podrun (%%) | containerd alone (%%) | podrun + what it causes (%%) | RSS (MiB) | runtime calls / min |\n")
		p("|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.CRIIdle {
			p("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f |\n", s.Pods, s.Subject, s.CPUPercent, s.Containerd.WithPodrun,
				s.Containerd.Alone, s.CPUPercent+s.Containerd.Caused(), mib(s.RSS), s.RuntimePerMin)
		}
		p("\n")
	}
}
