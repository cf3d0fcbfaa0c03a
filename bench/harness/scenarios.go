package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/podrun/podrun/bench/benchkit"
)

// BringUp is one subject's bring-up of N pods on one engine, every
// repetition.
type BringUp struct {
	Subject string
	// Engine is what the pods ran on: engineDocker or engineContainerd.
	Engine  string
	Pods    int
	Seconds []float64
}

// The engines bring-up is measured on, and each one's bound's label.
const (
	engineDocker     = "Docker"
	engineContainerd = "containerd"
	boundDocker      = "bound"
	boundCRI         = "CRI bound"
)

// bringUp measures every subject and the bound at n pods, runs times,
// alternating the order so that neither always goes first; with a CRI
// runtime (e.rs), also every subject on it and the CRI bound, in the same
// rotation.
func (e *env) bringUp(ctx context.Context, n int) ([]BringUp, error) {
	var ms []measure
	var subjects, engines []string
	add := func(subject, engine string, fn func() (float64, error)) {
		ms = append(ms, measure{subject + " on " + engine, fn})
		subjects, engines = append(subjects, subject), append(engines, engine)
	}
	for _, s := range e.subs {
		add(s.Label, engineDocker, func() (float64, error) { return e.onceUp(ctx, s, n, "") })
	}
	add(boundDocker, engineDocker, func() (float64, error) { return e.boundUp(ctx, n) })
	if e.rs != nil {
		for _, s := range e.subs {
			add(s.Label, engineContainerd, func() (float64, error) { return e.onceUp(ctx, s, n, e.cfg.criEndpoint) })
		}
		add(boundCRI, engineContainerd, func() (float64, error) { return e.criBoundUp(ctx, n) })
	}
	secs, err := e.alternate(fmt.Sprintf("bring-up of %d pods", n), ms)
	if err != nil {
		return nil, err
	}
	out := make([]BringUp, len(ms))
	for i := range ms {
		out[i] = BringUp{Subject: subjects[i], Engine: engines[i], Pods: n, Seconds: secs[i]}
	}
	return out, nil
}

// measure is one subject of a scenario: its label, and what times it once.
type measure struct {
	label string
	fn    func() (float64, error)
}

// alternate times each of ms runs times, in an order that turns from run
// to run so that none always goes first, each try made again on failure
// (again), and returns the seconds of each, in ms's order. what names the
// scenario in the log.
func (e *env) alternate(what string, ms []measure) ([][]float64, error) {
	out := make([][]float64, len(ms))
	for r := 0; r < e.cfg.runs; r++ {
		for k := range ms {
			i := (k + r) % len(ms)
			secs, err := again(e, fmt.Sprintf("%s (%s)", what, ms[i].label), ms[i].fn)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ms[i].label, err)
			}
			out[i] = append(out[i], secs)
			log.Printf("%s, run %d: %-28s %7.3f s", what, r+1, ms[i].label, secs)
		}
	}
	return out, nil
}

// onceUp times `podrun once --wait running` of n new pods, checks that
// they all run, and removes them. endpoint is the CRI runtime to run them
// on ("" for Docker).
func (e *env) onceUp(ctx context.Context, s subject, n int, endpoint string) (float64, error) {
	node := track(benchkit.NodeName("bench"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	p := &benchkit.Podrun{Bin: s.Bin, Node: node, Root: root, Infra: e.infra}
	check := func() error { return e.checkRunning(ctx, node, 2*n) }
	if endpoint != "" {
		defer e.cleanupCRI(node, e.trackCRI(node))
		// The sandbox image is containerd's own (its sandbox_image).
		p.Infra, p.Endpoint = "", endpoint
		check = func() error { return e.checkRunningCRI(ctx, node, n) }
	} else {
		defer e.cleanup(node)
	}
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		return 0, err
	}
	res, err := p.Run(ctx, 10*time.Minute, "once", "--wait", "running", "--timeout", "5m", dir)
	if err != nil {
		return 0, err
	}
	if res.Code != 0 {
		return 0, fmt.Errorf("podrun once exited %d:\n%s", res.Code, lastLines(res.Stderr, 20))
	}
	if err := check(); err != nil {
		return 0, err
	}
	return res.Took.Seconds(), nil
}

// criBoundUp times bench/bound -cri-endpoint making n pods, checks them
// (bound -check) and removes them (bound -remove).
func (e *env) criBoundUp(ctx context.Context, n int) (float64, error) {
	node := benchkit.NodeName("bench-cri-bound")
	defer e.cleanupCRI(node, e.trackCRI(node))
	bound := func(args ...string) (time.Duration, error) {
		args = append([]string{"-cri-endpoint", e.cfg.criEndpoint, "-node", node, "-n", strconv.Itoa(n)}, args...)
		cmd := exec.CommandContext(ctx, e.cfg.bound, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if _, err := cmd.Output(); err != nil {
			return 0, fmt.Errorf("bound %v: %v: %s", args, err, stderr.String())
		}
		return time.Since(start), nil
	}
	took, err := bound()
	if err != nil {
		return 0, err
	}
	if _, err := bound("-check"); err != nil {
		return 0, err
	}
	// The bound's own -remove also removes the log directory it made.
	if _, err := bound("-remove"); err != nil {
		return 0, err
	}
	return took.Seconds(), nil
}

// checkRunningCRI checks that node has want running containers and want
// ready sandboxes, each with an IP.
func (e *env) checkRunningCRI(ctx context.Context, node string, want int) error {
	cs, sbs, noIP, err := benchkit.RunningCRI(ctx, e.rs, node)
	if err != nil {
		return err
	}
	if cs != want || sbs != want || noIP != 0 {
		return fmt.Errorf("%d containers run and %d sandboxes are ready (%d without an IP), want %d of each", cs, sbs, noIP, want)
	}
	return nil
}

// trackCRI has an interrupt remove node's sandboxes from the CRI runtime
// (benchkit's own interrupt cleanup knows Docker only); the returned
// function forgets it.
func (e *env) trackCRI(node string) func() {
	return benchkit.OnInterrupt(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = benchkit.RemoveCRINode(ctx, e.rs, node)
	})
}

// cleanupCRI removes the node's sandboxes (and their containers) from the
// CRI runtime and lets it settle, as cleanup does on Docker; then forget
// (trackCRI's) stops tracking it.
func (e *env) cleanupCRI(node string, forget func()) {
	defer forget()
	defer benchkit.TrackNode(node)()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := benchkit.RemoveCRINode(ctx, e.rs, node); err != nil {
		log.Printf("cleanup %s on containerd: %v", node, err)
	}
	time.Sleep(time.Second)
}

// boundUp times bench/bound making n pods.
func (e *env) boundUp(ctx context.Context, n int) (float64, error) {
	node := track(benchkit.NodeName("bench-bound"))
	defer e.cleanup(node)
	cmd := exec.CommandContext(ctx, e.cfg.bound, "-n", strconv.Itoa(n), "-node", node, "-infra", e.infra)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if _, err := cmd.Output(); err != nil {
		return 0, fmt.Errorf("bound: %v: %s", err, stderr.String())
	}
	took := time.Since(start)
	if err := e.checkRunning(ctx, node, 2*n); err != nil {
		return 0, err
	}
	return took.Seconds(), nil
}

func (e *env) checkRunning(ctx context.Context, node string, want int) error {
	running, dups, err := benchkit.Running(ctx, e.cli, node)
	if err != nil {
		return err
	}
	if len(dups) > 0 {
		return fmt.Errorf("duplicates: %v", dups)
	}
	if len(running) != want {
		return fmt.Errorf("%d containers run, want %d", len(running), want)
	}
	return nil
}

// dirs makes a manifest directory and a root dir for node.
func (e *env) dirs(node string) (string, string) {
	base := filepath.Join(e.tmp, node)
	dir, root := filepath.Join(base, "manifests"), filepath.Join(base, "root")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(root, 0o755)
	return dir, root
}

// track records node for removal on an interrupt, and returns it.
func track(node string) string {
	benchkit.TrackNode(node)
	return node
}

// cleanup removes the node's containers and lets the engine settle, so the
// next measurement starts from the same state.
func (e *env) cleanup(node string) {
	defer benchkit.TrackNode(node)() // tracked until now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := benchkit.Cleanup(ctx, e.cli, node); err != nil {
		log.Printf("cleanup %s: %v", node, err)
	}
	time.Sleep(time.Second)
}

// Update is one subject's update reaction, every trial.
type Update struct {
	Subject string
	Pods    int
	// Reaction is from the file write to the new container's StartedAt;
	// Seen to when a poll of Docker saw it running.
	Reaction []float64
	Seen     []float64
	// CreateStart is Docker's create + start of the same container (the
	// reference), Kill Docker's stop (timeout 0) of it.
	CreateStart []float64
	Kill        []float64
}

// watchProxied runs subject s's `podrun watch` of dir with its Docker
// requests going through a counting proxy; the caller closes both.
func (e *env) watchProxied(s subject, node, root, dir string) (*benchkit.Proc, int, *benchkit.DockerProxy, error) {
	proxy, err := benchkit.StartDockerProxy(filepath.Dir(dir))
	if err != nil {
		return nil, 0, nil, err
	}
	p := &benchkit.Podrun{Bin: s.Bin, Node: node, Root: root, Infra: e.infra, Env: []string{"DOCKER_HOST=" + proxy.Host()}}
	pr, port, err := e.watch(p, dir)
	if err != nil {
		proxy.Close()
		return nil, 0, nil, err
	}
	return pr, port, proxy, nil
}

// watch starts `podrun watch` over dir with its HTTP server on a free port.
func (e *env) watch(p *benchkit.Podrun, dir string) (*benchkit.Proc, int, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, 0, err
	}
	pr, err := p.Start("watch", "--path", dir, "--healthz-port", strconv.Itoa(port),
		"--file-check-frequency", "20s", "--log-level", "warn")
	return pr, port, err
}

// waitUp waits until count says want containers run, or the podrun
// watch pr exits.
func waitUp(ctx context.Context, pr *benchkit.Proc, want int, count func() (int, error)) error {
	_, err := benchkit.WaitFor(ctx, 10*time.Minute, 200*time.Millisecond, fmt.Sprintf("%d containers to run", want), func() (bool, error) {
		if pr.Exited() {
			return false, fmt.Errorf("podrun watch exited:\n%s", lastLines(pr.Stderr(4000), 20))
		}
		running, err := count()
		return running == want, err
	})
	return err
}

// dockerRunning counts node's running containers on Docker (sandboxes
// included).
func (e *env) dockerRunning(ctx context.Context, node string) func() (int, error) {
	return func() (int, error) {
		running, _, err := benchkit.Running(ctx, e.cli, node)
		return len(running), err
	}
}

func (e *env) update(ctx context.Context, s subject) (Update, error) {
	n := e.cfg.updatePods
	u := Update{Subject: s.Label, Pods: n}
	node := track(benchkit.NodeName("bench-upd"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	defer e.cleanup(node)
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		return u, err
	}
	p := &benchkit.Podrun{Bin: s.Bin, Node: node, Root: root, Infra: e.infra}
	pr, _, err := e.watch(p, dir)
	if err != nil {
		return u, err
	}
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	if err := waitUp(ctx, pr, 2*n, e.dockerRunning(ctx, node)); err != nil {
		return u, err
	}
	time.Sleep(3 * time.Second) // let the bring-up's stragglers (events, relists) pass
	ops := updateOps{
		engine: "docker",
		appOf: func(ctx context.Context, pod, not string) (string, error) {
			id, _, err := e.appOf(ctx, node, pod, not)
			return id, err
		},
		startedAt: func(ctx context.Context, id string) (time.Time, error) {
			ins, err := e.cli.ContainerInspect(ctx, id)
			if err != nil {
				return time.Time{}, err
			}
			return time.Parse(time.RFC3339Nano, ins.State.StartedAt)
		},
		reference: func(ctx context.Context, pod, id string, _ []string) (float64, float64, error) {
			_, sandbox, err := e.appOf(ctx, node, pod, "")
			if err != nil {
				return 0, 0, err
			}
			ins, err := e.cli.ContainerInspect(ctx, id)
			if err != nil {
				return 0, 0, err
			}
			return e.reference(ctx, node, sandbox, ins.Config.Image, ins.Config.Entrypoint, ins.Config.Cmd)
		},
	}
	return u, e.updateTrials(ctx, &u, s.Label, node, dir, pr, ops)
}

// updateOps are what an update trial asks of the engine its pods run on.
type updateOps struct {
	engine string // for the log
	// appOf is the running app container of pod other than not ("" when
	// there is none).
	appOf func(ctx context.Context, pod, not string) (string, error)
	// startedAt is when the engine says container id started.
	startedAt func(ctx context.Context, id string) (time.Time, error)
	// reference times the engine's own create + start of the container
	// the edit made (id of pod, running cmd), then its stop.
	reference func(ctx context.Context, pod, id string, cmd []string) (createStart, kill float64, err error)
}

// updateTrials edits one pod's manifest per trial (a new command) and
// records into u the time from the write to the new container's start,
// with the engine's own create + start and kill as the reference.
func (e *env) updateTrials(ctx context.Context, u *Update, label, node, dir string, pr *benchkit.Proc, ops updateOps) error {
	n := e.cfg.updatePods
	for trial := 0; trial < e.cfg.updateTrials; trial++ {
		name := fmt.Sprintf("p-%03d", (trial*17+5)%n)
		podName := name + "-" + node
		old, err := ops.appOf(ctx, podName, "")
		if err != nil {
			return err
		}
		cmd := []string{"sleep", strconv.Itoa(3601 + trial)}
		t0 := time.Now()
		if err := benchkit.WriteFile(filepath.Join(dir, name+".yaml"), benchkit.Pod{Name: name, Command: cmd}.YAML()); err != nil {
			return err
		}
		var newID string
		_, err = benchkit.WaitFor(ctx, time.Minute, 5*time.Millisecond, "the edited container to run", func() (bool, error) {
			id, err := ops.appOf(ctx, podName, old)
			newID = id
			return err == nil && id != "", nil
		})
		seen := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, lastLines(pr.Stderr(4000), 20))
		}
		started, err := ops.startedAt(ctx, newID)
		if err != nil {
			return err
		}
		cs, kill, err := ops.reference(ctx, podName, newID, cmd)
		if err != nil {
			return err
		}
		u.Reaction = append(u.Reaction, started.Sub(t0).Seconds())
		u.Seen = append(u.Seen, seen.Seconds())
		u.CreateStart = append(u.CreateStart, cs)
		u.Kill = append(u.Kill, kill)
		log.Printf("update on %s %-18s trial %d: reaction %.3f s (seen %.3f s); %s create+start %.3f s, kill %.3f s",
			ops.engine, label, trial+1, started.Sub(t0).Seconds(), seen.Seconds(), ops.engine, cs, kill)
		time.Sleep(2 * time.Second)
	}
	return nil
}

// appOf returns the running app container of pod other than not, and the
// pod's sandbox; "" when there is none.
func (e *env) appOf(ctx context.Context, node, pod, not string) (string, string, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", benchkit.LabelNode+"="+node), filters.Arg("label", "io.podrun.pod.name="+pod))})
	if err != nil {
		return "", "", err
	}
	var app, sb string
	for _, c := range cs {
		if c.State != "running" {
			continue
		}
		switch {
		case c.Labels["io.podrun.container.type"] == "sandbox":
			sb = c.ID
		case c.Labels["io.podrun.container.name"] == "app" && c.ID != not:
			app = c.ID
		}
	}
	return app, sb, nil
}

// reference times Docker's create + start of the container the edit made
// (same image and command, joined to the pod's sandbox), then its kill.
func (e *env) reference(ctx context.Context, node, sandbox, img string, entry, cmd []string) (float64, float64, error) {
	ns := "container:" + sandbox
	start := time.Now()
	c, err := e.cli.ContainerCreate(ctx,
		&container.Config{Image: img, Entrypoint: entry, Cmd: cmd, Labels: map[string]string{benchkit.LabelNode: node}},
		&container.HostConfig{NetworkMode: container.NetworkMode(ns), IpcMode: container.IpcMode(ns)}, nil, nil, "")
	if err != nil {
		return 0, 0, err
	}
	defer e.cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := e.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return 0, 0, err
	}
	cs := time.Since(start).Seconds()
	zero := 0
	start = time.Now()
	if err := e.cli.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &zero}); err != nil {
		return 0, 0, err
	}
	return cs, time.Since(start).Seconds(), nil
}

// Steady is one subject's steady state with Pods pods.
type Steady struct {
	Subject string
	Pods    int
	Seconds float64
	// RSS at the end, the highest sampled during the window, and the
	// process's peak since it started (VmHWM, bring-up included).
	RSS, MaxRSS, HWM int64
	CPUPercent       float64
	// RuntimeCalls per minute by method (podrun_runtime_calls_total);
	// DockerCalls per minute by endpoint (the counting proxy).
	RuntimeCalls    map[string]float64
	DockerCalls     map[string]float64
	RuntimePerMin   float64
	DockerPerMin    float64
	BringUpSeconds  float64
	Threads         int
	SyncsInWindow   float64
	ContainerStarts float64
	// ListBytesPerMin is what podrun read from Docker's container lists
	// per minute.
	ListBytesPerMin float64
	// Events are the costs of one container killed under watch.
	Events []EventCost
	// Dockerd is dockerd's CPU in the window, and alone (dockerd.go).
	Dockerd DaemonCPU
}

// EventCost is what one runtime event (a container killed) cost podrun:
// the time until the new container ran, and the Docker requests and list
// bytes beyond the steady rate measured in the window before.
type EventCost struct {
	Seconds       float64
	ExtraRequests float64
	ExtraListKiB  float64
	// NodeLists and PodLists are the lists of the whole node and of one
	// pod made from the kill until 1 s after the restart, and
	// ExpectedNodeLists what the steady rate accounts for in that time.
	NodeLists, PodLists int
	ExpectedNodeLists   float64
	Requests            map[string]int
	// DieToStart is from Docker's die event of the killed container to
	// the new one's State.StartedAt (both Docker's stamps).
	DieToStart float64
}

func (e *env) steadyState(ctx context.Context, s subject, n int) (Steady, error) {
	st := Steady{Subject: s.Label, Pods: n}
	node := track(benchkit.NodeName("bench-steady"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	defer e.cleanup(node)
	if err := benchkit.WritePods(dir, "p", n); err != nil {
		return st, err
	}
	start := time.Now()
	pr, port, proxy, err := e.watchProxied(s, node, root, dir)
	if err != nil {
		return st, err
	}
	defer proxy.Close()
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	if err := waitUp(ctx, pr, 2*n, e.dockerRunning(ctx, node)); err != nil {
		return st, err
	}
	st.BringUpSeconds = time.Since(start).Seconds()
	time.Sleep(5 * time.Second) // the bring-up's tail is not the steady state
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	settleRelist(ctx, url)

	m0, err := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	if err != nil {
		return st, err
	}
	syncs0, _ := benchkit.Metrics(ctx, url, "podrun_pod_sync_duration_seconds_count")
	starts0, _ := benchkit.Metrics(ctx, url, "podrun_container_starts_total")
	d0, b0 := proxy.Counts(), proxy.Bytes()
	p0, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, err
	}
	dockerd, err := dockerdPID()
	if err != nil {
		return st, err
	}
	dockerdMeter, err := daemonCPUMeter(dockerd)
	if err != nil {
		return st, err
	}
	t0 := time.Now()
	tick := time.NewTicker(time.Second)
	for time.Since(t0) < e.cfg.steady {
		<-tick.C
		if pr.Exited() {
			tick.Stop()
			return st, fmt.Errorf("podrun watch exited:\n%s", lastLines(pr.Stderr(4000), 20))
		}
		if ps, err := benchkit.ReadProc(pr.Pid()); err == nil && ps.RSS > st.MaxRSS {
			st.MaxRSS = ps.RSS
		}
	}
	tick.Stop()
	if st.Dockerd.WithPodrun, err = dockerdMeter(); err != nil {
		return st, err
	}
	p1, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, err
	}
	d1, b1 := proxy.Counts(), proxy.Bytes()
	m1, err := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	if err != nil {
		return st, err
	}
	syncs1, _ := benchkit.Metrics(ctx, url, "podrun_pod_sync_duration_seconds_count")
	starts1, _ := benchkit.Metrics(ctx, url, "podrun_container_starts_total")
	el := time.Since(t0)
	perMin := 60 / el.Seconds()
	st.Seconds = el.Seconds()
	st.RSS, st.HWM, st.Threads = p1.RSS, p1.HWM, p1.Threads
	st.MaxRSS = max(st.MaxRSS, p1.RSS)
	st.CPUPercent = 100 * (p1.CPU - p0.CPU).Seconds() / el.Seconds()
	st.RuntimeCalls, st.RuntimePerMin = callsPerMin(m0, m1, perMin)
	st.DockerCalls = map[string]float64{}
	keys, diff := benchkit.Diff(d0, d1)
	for _, k := range keys {
		st.DockerCalls[k] = float64(diff[k]) * perMin
		st.DockerPerMin += float64(diff[k]) * perMin
	}
	st.SyncsInWindow = benchkit.Sum(syncs1) - benchkit.Sum(syncs0)
	st.ContainerStarts = benchkit.Sum(starts1) - benchkit.Sum(starts0)
	st.ListBytesPerMin = float64(listBytes(b1)-listBytes(b0)) * perMin

	// Events: kill one app container at a time; what did podrun do beyond
	// its steady rate until the new one ran (and 1 s more)?
	reqRate := st.DockerPerMin / 60
	bytesRate := st.ListBytesPerMin / 60
	for k := 0; k < e.cfg.eventTrials; k++ {
		name := fmt.Sprintf("p-%03d", (k*37+3)%n)
		podName := name + "-" + node
		old, _, err := e.appOf(ctx, node, podName, "")
		if err != nil || old == "" {
			return st, fmt.Errorf("event trial: no app container of %s (%v)", name, err)
		}
		c0, lb0 := proxy.Counts(), listBytes(proxy.Bytes())
		die := e.watchDie(ctx, old)
		t0 := time.Now()
		if err := e.cli.ContainerKill(ctx, old, "KILL"); err != nil {
			die.cancel()
			return st, err
		}
		var newID string
		if _, err := benchkit.WaitFor(ctx, time.Minute, 5*time.Millisecond, "the killed container to be replaced", func() (bool, error) {
			id, _, err := e.appOf(ctx, node, podName, old)
			newID = id
			return err == nil && id != "", nil
		}); err != nil {
			die.cancel()
			return st, fmt.Errorf("%s: %w\n%s", name, err, lastLines(pr.Stderr(4000), 20))
		}
		took := time.Since(t0)
		fromDie, err := e.dieToStart(ctx, die, newID)
		if err != nil {
			return st, fmt.Errorf("%s: %w", name, err)
		}
		time.Sleep(time.Second)
		window := time.Since(t0).Seconds()
		_, dc := benchkit.Diff(c0, proxy.Counts())
		var reqs int
		for _, v := range dc {
			reqs += v
		}
		ev := EventCost{Seconds: took.Seconds(),
			ExtraRequests:     float64(reqs) - reqRate*window,
			ExtraListKiB:      (float64(listBytes(proxy.Bytes())-lb0) - bytesRate*window) / 1024,
			NodeLists:         dc["GET /containers/json"],
			PodLists:          dc["GET /containers/json (one pod)"],
			ExpectedNodeLists: st.DockerCalls["GET /containers/json"] / 60 * window,
			Requests:          dc,
			DieToStart:        fromDie}
		st.Events = append(st.Events, ev)
		log.Printf("event %3d pods %-18s: restarted in %.3f s (%.3f s from the die event), %+.1f requests, %+.1f KiB of lists beyond the steady rate (%v)",
			n, s.Label, ev.Seconds, ev.DieToStart, ev.ExtraRequests, ev.ExtraListKiB, dc)
		time.Sleep(time.Second)
	}
	log.Printf("steady %3d pods %-18s: RSS %.1f MiB (max %.1f), CPU %.2f%%, runtime calls %.1f/min, docker requests %.1f/min %v",
		n, s.Label, mib(st.RSS), mib(st.MaxRSS), st.CPUPercent, st.RuntimePerMin, st.DockerPerMin, st.DockerCalls)
	if st.Dockerd.Alone, err = daemonAlone(pr, dockerd, el); err != nil {
		return st, err
	}
	logDockerdCPU(n, s.Label, st.CPUPercent, st.Dockerd)
	return st, nil
}

// callsPerMin is podrun_runtime_calls_total's growth from m0 to m1 by
// method, scaled by perMin, and its sum.
func callsPerMin(m0, m1 map[string]float64, perMin float64) (map[string]float64, float64) {
	out := map[string]float64{}
	var total float64
	for k, v := range m1 {
		if d := v - m0[k]; d > 0 {
			method := strings.TrimSuffix(strings.TrimPrefix(k, `method="`), `"`)
			out[method] = d * perMin
			total += d * perMin
		}
	}
	return out, total
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// listBytes adds up the bytes of container lists.
func listBytes(b map[string]int64) int64 {
	var n int64
	for k, v := range b {
		if strings.HasPrefix(k, "GET /containers/json") {
			n += v
		}
	}
	return n
}

// Stuck is a pod that cannot start, under watch, for a while: what it
// costs.
type Stuck struct {
	Case, Subject    string
	Seconds          float64
	DockerPerMin     float64
	ContainersMade   int
	CPUPercent       float64
	TopEndpoints     string
	SandboxAttempts  int
	RuntimeCallsPerM float64
}

// stuck runs one pod that cannot start under watch for e.cfg.stuck: its
// image is absent with imagePullPolicy Never, or its host port is taken.
func (e *env) stuck(ctx context.Context, s subject, kind string) (Stuck, error) {
	st := Stuck{Case: kind, Subject: s.Label}
	node := track(benchkit.NodeName("bench-stuck"))
	dir, root := e.dirs(node)
	defer os.RemoveAll(filepath.Dir(dir))
	defer e.cleanup(node)
	pod := benchkit.Pod{Name: "stuck"}
	switch kind {
	case "image absent, pull policy Never":
		pod.Image, pod.PullPolicy = "podrun-bench/absent:never", "Never"
	case "host port taken":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return st, err
		}
		defer ln.Close()
		pod.HostPort = ln.Addr().(*net.TCPAddr).Port
	}
	if err := benchkit.WriteFile(filepath.Join(dir, "stuck.yaml"), pod.YAML()); err != nil {
		return st, err
	}
	pr, port, proxy, err := e.watchProxied(s, node, root, dir)
	if err != nil {
		return st, err
	}
	defer proxy.Close()
	defer pr.Stop(syscall.SIGTERM, 30*time.Second)
	time.Sleep(3 * time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	m0, _ := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	cs0, err := benchkit.List(ctx, e.cli, node)
	if err != nil {
		return st, err
	}
	d0 := proxy.Counts()
	p0, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, err
	}
	t0 := time.Now()
	time.Sleep(e.cfg.stuck)
	if pr.Exited() {
		return st, fmt.Errorf("podrun watch exited:\n%s", lastLines(pr.Stderr(4000), 20))
	}
	p1, err := benchkit.ReadProc(pr.Pid())
	if err != nil {
		return st, err
	}
	el := time.Since(t0)
	keys, diff := benchkit.Diff(d0, proxy.Counts())
	m1, _ := benchkit.Metrics(ctx, url, "podrun_runtime_calls_total")
	cs1, err := benchkit.List(ctx, e.cli, node)
	if err != nil {
		return st, err
	}
	perMin := 60 / el.Seconds()
	st.Seconds = el.Seconds()
	var total int
	type kv struct {
		k string
		v int
	}
	var top []kv
	for _, k := range keys {
		total += diff[k]
		top = append(top, kv{k, diff[k]})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v })
	var parts []string
	for i, t := range top {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("`%s` %.0f", t.k, float64(t.v)*perMin))
	}
	st.TopEndpoints = strings.Join(parts, ", ")
	st.DockerPerMin = float64(total) * perMin
	st.RuntimeCallsPerM = (benchkit.Sum(m1) - benchkit.Sum(m0)) * perMin
	st.ContainersMade = len(cs1) - len(cs0)
	st.CPUPercent = 100 * (p1.CPU - p0.CPU).Seconds() / el.Seconds()
	for _, c := range cs1 {
		if c.Labels["io.podrun.container.type"] == "sandbox" {
			st.SandboxAttempts++
		}
	}
	log.Printf("stuck %-32s %-18s: %.0f Docker requests/min (%s), %d containers made in %.0f s, CPU %.2f%%",
		kind, s.Label, st.DockerPerMin, st.TopEndpoints, st.ContainersMade, st.Seconds, st.CPUPercent)
	return st, nil
}
