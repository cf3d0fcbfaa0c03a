package nodes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podrun/podrun/bench/benchkit"
	"github.com/podrun/podrun/clustertest"
)

// Settings (environment):
//
//	BENCH_NODES=50                how many node agents
//	BENCH_NODES_DURATION=2m       the measured window, after every node is Ready
//	BENCH_NODES_READY_TIMEOUT=5m  how long the agents get to register and be Ready
//	BENCH_NODES_PODRUN=<file>     a podrun binary to measure (default: built
//	                              from this checkout, static)
const (
	// leaseJitter is the jitter factor of the node-lease controller
	// (k8s.io/component-helpers/apimachinery/lease: JitterUntil 0.04).
	leaseJitter = 0.04
	// leaseSlack is what a renewal may take beyond its jittered interval
	// (the request itself, a busy machine) before its gap is counted as
	// over the interval.
	leaseSlack = 2 * time.Second
	// sampleEvery is how often RSS is sampled in the window.
	sampleEvery = 5 * time.Second
	stopWait    = 30 * time.Second
)

// agent is one podrun watch process.
type agent struct {
	name, root, log string
	cmd             *exec.Cmd
	done            chan struct{}
	err             error

	cpu0, cpu1 time.Duration
	rss        []float64 // MiB samples in the window
	hwm        int64     // peak RSS since start, bytes (VmHWM at the window's end)
}

func (a *agent) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// BenchmarkNodeAgents runs BENCH_NODES `podrun watch --kubeconfig` agents
// (no pods) against one kube-apiserver for BENCH_NODES_DURATION and reports
// their Lease renewals, their apiserver requests per node per minute (audit
// log), and their CPU and RSS. Run it once:
//
//	go test -run '^$' -bench NodeAgents -benchtime 1x -timeout 30m ./bench/nodes/
func BenchmarkNodeAgents(b *testing.B) {
	n := envInt(b, "BENCH_NODES", 50)
	window := envDuration(b, "BENCH_NODES_DURATION", 2*time.Minute)
	readyTimeout := envDuration(b, "BENCH_NODES_READY_TIMEOUT", 5*time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	loadStart := loadAvg()
	othersStart := benchkit.OtherTestBinaries()
	tmp, err := os.MkdirTemp("", "podrun-bench-nodes-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(tmp) })
	forgetTmp := benchkit.OnInterrupt(func() { os.RemoveAll(tmp) })
	defer forgetTmp()

	cli, err := benchkit.Docker()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		b.Fatalf("docker: %v (the agents need a Docker engine: is dockerd running?)", err)
	}
	benchkit.CleanUpOnInterrupt(cli)

	// podrun, and an infra image of its own (never pulled or built by 50
	// agents at once; removed at the end).
	bin := os.Getenv("BENCH_NODES_PODRUN")
	if bin == "" {
		repo, err := filepath.Abs("../..")
		if err != nil {
			b.Fatal(err)
		}
		bin = filepath.Join(tmp, "podrun")
		b.Logf("building podrun from %s", repo)
		if err := benchkit.BuildPodrun(repo, bin); err != nil {
			b.Fatal(err)
		}
	}
	infra, removeInfra, err := benchkit.InfraImage(ctx, cli, bin, filepath.Base(tmp))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(removeInfra)
	forgetInfra := benchkit.OnInterrupt(removeInfra)
	defer forgetInfra()

	// Every Docker request of the agents, through one counting proxy.
	proxy, err := benchkit.StartDockerProxy(tmp)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(proxy.Close) // after the agents stop

	// The control plane, with an audit log of every request.
	policy := filepath.Join(tmp, "audit-policy.yaml")
	auditLog := filepath.Join(tmp, "audit.log")
	if err := os.WriteFile(policy, []byte(AuditPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	c := clustertest.Start(b, clustertest.Options{ExtraAPIServerArgs: []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + auditLog,
		"--audit-log-maxsize=0", // never rotate: the whole run stays in one file
	}})
	// An interrupted run leaves no etcd data behind either (the cleanups
	// do not run then).
	forgetCluster := benchkit.OnInterrupt(func() {
		for k, pid := range controlPlanePids(c) {
			if k != "dockerd" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.RemoveAll(c.Dir)
		os.Remove(filepath.Dir(c.Dir)) // the test's temporary directory, if now empty
	})
	defer forgetCluster()
	admin := c.Client(b)

	// Every Lease renewal, from an admin watch started before the agents.
	leases := newLeaseLog()
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace("kube-node-lease"))
	inf := factory.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    leases.record,
		UpdateFunc: func(_, o any) { leases.record(o) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// The agents.
	prefix := benchkit.NodeName("bench")
	empty := filepath.Join(tmp, "manifests")
	must(b, os.MkdirAll(empty, 0o755))
	must(b, os.MkdirAll(filepath.Join(tmp, "logs"), 0o755))
	agents := make([]*agent, n)
	names := make([]string, n)
	for i := range agents {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		names[i] = name
		kc, _ := c.NodeKubeconfig(b, name)
		agents[i] = &agent{name: name, root: filepath.Join(tmp, "nodes", name), log: filepath.Join(tmp, "logs", name+".log")}
		defer benchkit.TrackNode(name)()
		must(b, os.MkdirAll(agents[i].root, 0o755))
		agents[i].args(bin, kc, empty, infra, proxy.Host())
	}
	stopAll := sync.OnceFunc(func() { stopAgents(agents) })
	b.Cleanup(stopAll) // before the apiserver stops (cleanups run last first)
	forgetAgents := benchkit.OnInterrupt(func() {
		for _, a := range agents {
			if a.cmd.Process != nil {
				_ = a.cmd.Process.Kill()
			}
		}
	})
	defer forgetAgents()
	firstStart := time.Now()
	for _, a := range agents {
		if err := a.start(); err != nil {
			b.Fatalf("start podrun for %s: %v", a.name, err)
		}
	}

	// Every node registered, Ready, with a Lease.
	readyAt, err := waitReady(ctx, admin, agents, leases, readyTimeout)
	if err != nil {
		b.Fatal(err)
	}
	warmUp := readyAt.Sub(firstStart)
	b.Logf("%d nodes Ready %.1fs after the first agent started", n, warmUp.Seconds())

	// The window.
	from := time.Now()
	busy0 := machineCPU()
	docker0 := proxy.Counts()
	cp := controlPlanePids(c)
	cp0 := procCPUs(cp)
	for _, a := range agents {
		st, err := benchkit.ReadProc(a.cmd.Process.Pid)
		if err != nil {
			b.Fatalf("%s: %v", a.name, err)
		}
		a.cpu0 = st.CPU
	}
	to := from.Add(window)
	for {
		for _, a := range agents {
			if st, err := benchkit.ReadProc(a.cmd.Process.Pid); err == nil {
				a.rss = append(a.rss, float64(st.RSS)/(1<<20))
			}
		}
		left := time.Until(to)
		if left <= 0 {
			break
		}
		time.Sleep(min(left, sampleEvery))
	}
	to = time.Now()
	for _, a := range agents {
		if a.exited() {
			b.Fatalf("podrun of %s exited in the window (%v); its log:\n%s", a.name, a.err, tail(a.log, 30))
		}
		st, err := benchkit.ReadProc(a.cmd.Process.Pid)
		if err != nil {
			b.Fatalf("%s: %v", a.name, err)
		}
		a.cpu1, a.hwm = st.CPU, st.HWM
	}
	cp1 := procCPUs(cp)
	busy1 := machineCPU()
	docker1 := proxy.Counts()
	notReady, err := readyNodes(ctx, admin, names)
	if err != nil {
		b.Fatal(err)
	}
	loadEnd := loadAvg()
	othersEnd := benchkit.OtherTestBinaries()

	// Stop the agents, then read what the apiserver logged.
	stopStart := time.Now()
	stopAll()
	stopTook := time.Since(stopStart)
	cancel() // the lease watch
	var badExits []string
	for _, a := range agents {
		if a.err != nil {
			badExits = append(badExits, fmt.Sprintf("%s: %v", a.name, a.err))
		}
	}
	left := 0
	for _, name := range names {
		cs, err := benchkit.List(context.Background(), cli, name)
		if err != nil {
			b.Fatal(err)
		}
		left += len(cs)
	}
	for _, a := range agents {
		if err := os.RemoveAll(a.root); err != nil {
			b.Errorf("remove %s: %v", a.root, err)
		}
	}
	reqs, err := ReadAuditFile(auditLog)
	if err != nil {
		b.Fatal(err)
	}

	// Figures.
	leaseDur := leases.duration()
	renew := leaseDur / 4
	over := time.Duration(float64(renew)*(1+leaseJitter)) + leaseSlack
	var all []time.Duration
	var maxGap time.Duration
	var maxNode string
	overN, lateN, renewals := 0, 0, 0
	for _, name := range names {
		g := Gaps(name, leases.renewals(name), from, to, over, leaseDur)
		all = append(all, g.Gaps...)
		if g.Max > maxGap {
			maxGap, maxNode = g.Max, name
		}
		overN += g.Over
		lateN += g.Late
		renewals += g.Renewals
	}
	win := CountNodes(reqs, names, from, to)
	warm := CountNodes(reqs, names, firstStart, from)
	mins := to.Sub(from).Minutes()
	perNodeMin := float64(win.Total) / float64(n) / mins
	var cpu, rssMean, rssMax, hwm []float64
	var cpuTotal time.Duration
	for _, a := range agents {
		d := a.cpu1 - a.cpu0
		cpuTotal += d
		cpu = append(cpu, 100*d.Seconds()/to.Sub(from).Seconds())
		s := Summarize(a.rss)
		rssMean = append(rssMean, s.Mean)
		rssMax = append(rssMax, s.Max)
		hwm = append(hwm, float64(a.hwm)/(1<<20))
	}
	cpuS, rssS, rssMaxS, hwmS := Summarize(cpu), Summarize(rssMean), Summarize(rssMax), Summarize(hwm)

	b.ReportMetric(perNodeMin, "req/node/min")
	b.ReportMetric(maxGap.Seconds(), "max-lease-gap-s")
	b.ReportMetric(float64(lateN), "late-renewals")
	b.ReportMetric(float64(overN), "over-interval-gaps")
	b.ReportMetric(cpuS.Mean, "cpu-%/agent")
	b.ReportMetric(rssS.Mean, "rss-MiB/agent")

	// The report.
	w := os.Stdout
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n## Node agents against one apiserver\n\n")
	p("%d `podrun watch --kubeconfig` agents (distinct node names, no pods, `--log-level warn`, node API and healthz off) "+
		"against one kube-apiserver %s + etcd (clustertest, audit log at level Metadata), measured over %s after every node was Ready "+
		"(Ready %.1f s after the first agent started). Machine: %d CPUs, %s; load average %s at the start, %s at the end.\n",
		n, clustertest.Version, to.Sub(from).Round(time.Second), warmUp.Seconds(), runtime.NumCPU(), runtime.Version(), loadStart, loadEnd)
	if len(othersStart)+len(othersEnd) > 0 {
		p("Other Go test binaries were running (start: %d, end: %d).\n", len(othersStart), len(othersEnd))
	}
	p("\n| nodes | window | apiserver req / node / min | Lease renewals / node / min | max Lease gap (s) | median / p99 gap (s) | gaps > %.1f s | gaps > %s (expired) | CPU / agent, avg (max) | RSS / agent, MiB avg (max) |\n",
		over.Seconds(), leaseDur)
	p("|---:|---|---:|---:|---:|---|---:|---:|---|---|\n")
	p("| %d | %s | %.2f | %.2f | %.2f | %.2f / %.2f | %d | %d | %.2f%% (%.2f%%) | %.1f (%.1f) |\n",
		n, to.Sub(from).Round(time.Second), perNodeMin, float64(renewals)/float64(n)/mins, maxGap.Seconds(),
		Percentile(all, 50).Seconds(), Percentile(all, 99).Seconds(), overN, lateN, cpuS.Mean, cpuS.Max, rssS.Mean, rssMaxS.Max)
	p("\nLease: duration %s, renewed every %s (a quarter of it) with %.0f%% jitter; a gap counts as over the interval past %.1f s "+
		"(interval + jitter + %s slack). The largest gap was %s's; the gap from a node's last renewal to the window's end counts.\n",
		leaseDur, renew, leaseJitter*100, over.Seconds(), leaseSlack, maxNode)

	p("\nApiserver requests of the nodes (users `system:node:<name>`), by verb and resource:\n\n")
	p("| verb | resource | window: req / node / min | errors | warm-up: req / node |\n|---|---|---:|---:|---:|\n")
	warmBy := map[string]Count{}
	for _, c := range warm.Counts {
		warmBy[c.Key()] = c
	}
	seen := map[string]bool{}
	for _, c := range win.Counts {
		seen[c.Key()] = true
		p("| %s | %s | %.2f | %d | %.2f |\n", c.Verb, c.Resource, float64(c.N)/float64(n)/mins, c.Errors, float64(warmBy[c.Key()].N)/float64(n))
	}
	for _, c := range warm.Counts {
		if !seen[c.Key()] {
			p("| %s | %s | 0 | 0 | %.2f |\n", c.Verb, c.Resource, float64(c.N)/float64(n))
		}
	}
	p("| **all** | | **%.2f** | %d | **%.2f** |\n", perNodeMin, win.Errors, float64(warm.Total)/float64(n))
	lo, hi := minMax(win.PerNode)
	p("\nPer node in the window: %d to %d requests (%.2f to %.2f / min). Warm-up: %.1f s, %d requests in all.\n",
		lo, hi, float64(lo)/mins, float64(hi)/mins, warmUp.Seconds(), warm.Total)
	if len(win.ErrorCodes)+len(warm.ErrorCodes) > 0 {
		p("Error responses: window %s; warm-up %s.\n", codes(win.ErrorCodes), codes(warm.ErrorCodes))
	}
	users := Users(reqs, from, to)
	others := 0
	var top []string
	for u, k := range users {
		if !strings.HasPrefix(u, NodeUserPrefix) {
			others += k
			top = append(top, fmt.Sprintf("`%s` %d", u, k))
		}
	}
	sort.Strings(top)
	p("Other users' requests in the window: %d (%s).\n", others, strings.Join(top, ", "))

	p("\nCPU (%% of one core) over the window: all %d agents %.1f%%", n, 100*cpuTotal.Seconds()/to.Sub(from).Seconds())
	for _, k := range []string{"kube-apiserver", "etcd", "dockerd"} {
		c0, ok0 := cp0[k]
		c1, ok1 := cp1[k]
		switch {
		case ok0 && ok1:
			p(", %s %.1f%%", k, 100*(c1-c0).Seconds()/to.Sub(from).Seconds())
		case ok0:
			p(", %s ? (pid %d gone by the window's end: restarted?)", k, cp[k])
		}
	}
	if busy0.total > 0 && busy1.total > busy0.total {
		p("; the machine was %.0f%% busy (all CPUs)", 100*float64(busy1.busy-busy0.busy)/float64(busy1.total-busy0.total))
	}
	p(". RSS per agent: mean of samples every %s %.1f MiB (max %.1f), peak since start %.1f MiB (max %.1f).\n",
		sampleEvery, rssS.Mean, rssMaxS.Max, hwmS.Mean, hwmS.Max)
	p("Docker requests per agent per minute (through a counting proxy): %s.\n", dockerRates(docker0, docker1, n, mins))
	p("Stop: SIGTERM to all %d agents, all exited in %.1f s", n, stopTook.Seconds())
	if len(badExits) > 0 {
		p("; not cleanly: %s", strings.Join(badExits, "; "))
	}
	p("; containers left: %d.\n", left)
	if msgs := logSummary(agents); msgs != "" {
		p("Agents' warnings and errors: %s.\n", msgs)
	}
	if len(notReady) > 0 {
		p("**Not Ready at the window's end:** %s.\n", strings.Join(notReady, ", "))
	}
	p("\n")

	switch {
	case len(notReady) > 0:
		b.Errorf("nodes not Ready at the window's end: %v", notReady)
	case lateN > 0:
		b.Errorf("%d Lease gaps longer than the lease duration %s (max %s, %s)", lateN, leaseDur, maxGap, maxNode)
	case left > 0:
		b.Errorf("%d containers of the bench's nodes left", left)
	}
}

func (a *agent) args(bin, kubeconfig, path, infra, dockerHost string) {
	a.cmd = exec.Command(bin, "watch",
		"--node-name", a.name,
		"--root-dir", a.root,
		"--kubeconfig", kubeconfig,
		"--path", path,
		"--healthz-port", "0",
		"--port", "0",
		"--log-level", "warn",
		"--config", "",
		"--pod-infra-image", infra,
		// 50 agents share this machine's dockerd with whatever else runs
		// on it: none of them may remove an image, even with a full disk.
		"--image-gc-high-threshold", "100",
	)
	a.cmd.Env = append(os.Environ(), "DOCKER_HOST="+dockerHost)
	// Its own process group; killed if the bench dies (a go test timeout
	// exits without cleanups).
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func (a *agent) start() error {
	f, err := os.Create(a.log)
	if err != nil {
		return err
	}
	a.cmd.Stdout, a.cmd.Stderr = f, f
	a.done = make(chan struct{})
	if err := a.cmd.Start(); err != nil {
		f.Close()
		return err
	}
	go func() {
		a.err = a.cmd.Wait()
		f.Close()
		close(a.done)
	}()
	return nil
}

// stopAgents sends SIGTERM to every agent and waits for all, killing one
// that takes longer than stopWait.
func stopAgents(agents []*agent) {
	var wg sync.WaitGroup
	for _, a := range agents {
		if a.done == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-a.done:
			case <-time.After(stopWait):
				_ = a.cmd.Process.Kill()
				<-a.done
				if a.err == nil {
					a.err = errors.New("killed")
				}
				a.err = fmt.Errorf("did not exit within %s of SIGTERM: %w", stopWait, a.err)
			}
		}()
	}
	wg.Wait()
}

// waitReady waits until every agent's Node is Ready and its Lease exists,
// failing early when an agent exits.
func waitReady(ctx context.Context, admin kubernetes.Interface, agents []*agent, leases *leaseLog, timeout time.Duration) (time.Time, error) {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.name
	}
	deadline := time.Now().Add(timeout)
	for {
		for _, a := range agents {
			if a.exited() {
				return time.Time{}, fmt.Errorf("podrun of %s exited (%v); its log:\n%s", a.name, a.err, tail(a.log, 30))
			}
		}
		notReady, err := readyNodes(ctx, admin, names)
		if err == nil && len(notReady) == 0 {
			var noLease []string
			for _, n := range names {
				if len(leases.renewals(n)) == 0 {
					noLease = append(noLease, n)
				}
			}
			if len(noLease) == 0 {
				return time.Now(), nil
			}
			notReady = noLease
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("after %s, %d of %d nodes not Ready or without a Lease (%v): %v",
				timeout, len(notReady), len(names), err, notReady[:min(len(notReady), 10)])
		}
		time.Sleep(time.Second)
	}
}

// readyNodes returns the nodes of names that do not exist or are not
// Ready.
func readyNodes(ctx context.Context, admin kubernetes.Interface, names []string) ([]string, error) {
	list, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return names, err
	}
	ready := map[string]bool{}
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				ready[node.Name] = true
			}
		}
	}
	var out []string
	for _, n := range names {
		if !ready[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// leaseLog records every distinct renewTime of every Lease.
type leaseLog struct {
	mu  sync.Mutex
	by  map[string][]time.Time
	dur time.Duration
}

func newLeaseLog() *leaseLog { return &leaseLog{by: map[string][]time.Time{}} }

func (l *leaseLog) record(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Spec.RenewTime == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.by[lease.Name]
	t := lease.Spec.RenewTime.Time
	if len(rs) == 0 || !rs[len(rs)-1].Equal(t) {
		l.by[lease.Name] = append(rs, t)
	}
	if d := lease.Spec.LeaseDurationSeconds; d != nil {
		l.dur = time.Duration(*d) * time.Second
	}
}

func (l *leaseLog) renewals(node string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.by[node]...)
}

func (l *leaseLog) duration() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dur == 0 {
		return 40 * time.Second
	}
	return l.dur
}

// controlPlanePids finds this cluster's kube-apiserver and etcd (by their
// flags naming its etcd URL) and the machine's dockerd, for their CPU.
func controlPlanePids(c *clustertest.Cluster) map[string]int {
	out := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		base := filepath.Base(args[0])
		has := func(flag string) bool {
			for _, a := range args[1:] {
				if a == flag {
					return true
				}
			}
			return false
		}
		switch {
		case base == "kube-apiserver" && has("--etcd-servers="+c.EtcdURL):
			out["kube-apiserver"] = pid
		case base == "etcd" && has("--listen-client-urls="+c.EtcdURL):
			out["etcd"] = pid
		case base == "dockerd":
			out["dockerd"] = pid
		}
	}
	return out
}

// procCPUs reads the CPU time of each process that still runs.
func procCPUs(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, pid := range pids {
		if st, err := benchkit.ReadProc(pid); err == nil {
			out[k] = st.CPU
		}
	}
	return out
}

type cpuTicks struct{ busy, total int64 }

// machineCPU reads the busy and total ticks of all CPUs from /proc/stat.
func machineCPU() cpuTicks {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTicks{}
	}
	fields := strings.Fields(sc.Text())
	var t cpuTicks
	for i, s := range fields[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// logSummary counts the agents' log lines by level and message.
func logSummary(agents []*agent) string {
	count := map[string]int{}
	for _, a := range agents {
		f, err := os.Open(a.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			count[logKey(sc.Text())]++
		}
		f.Close()
	}
	var keys []string
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for i, k := range keys {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more kinds", len(keys)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d x %s", count[k], k))
	}
	return strings.Join(parts, "; ")
}

// logKey is a log line's level and message (slog's text format), or the
// line itself cut short.
func logKey(line string) string {
	field := func(name string) string {
		i := strings.Index(line, " "+name+"=")
		if i < 0 {
			if !strings.HasPrefix(line, name+"=") {
				return ""
			}
			i = -1
		}
		v := line[i+len(name)+2:]
		if strings.HasPrefix(v, `"`) {
			if q, err := strconv.QuotedPrefix(v); err == nil {
				s, _ := strconv.Unquote(q)
				return s
			}
		}
		if j := strings.IndexByte(v, ' '); j >= 0 {
			v = v[:j]
		}
		return v
	}
	lvl, msg := field("level"), field("msg")
	if msg == "" {
		if len(line) > 120 {
			line = line[:120] + "..."
		}
		return fmt.Sprintf("`%s`", line)
	}
	return fmt.Sprintf("%s `%s`", lvl, msg)
}

func minMax(m map[string]int) (lo, hi int) {
	first := true
	for _, v := range m {
		if first || v < lo {
			lo = v
		}
		if first || v > hi {
			hi = v
		}
		first = false
	}
	return lo, hi
}

func codes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("`%s` x%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func tail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return v
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// dockerRates renders the Docker requests between two readings of the
// proxy, per agent per minute, most first.
func dockerRates(before, after map[string]int, n int, mins float64) string {
	total := 0
	var parts []string
	keys := make([]string, 0, len(after))
	for k := range after {
		if after[k] > before[k] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		di, dj := after[keys[i]]-before[keys[i]], after[keys[j]]-before[keys[j]]
		if di != dj {
			return di > dj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		d := after[k] - before[k]
		total += d
		parts = append(parts, fmt.Sprintf("`%s` %.1f", k, float64(d)/float64(n)/mins))
	}
	if total == 0 {
		return "none"
	}
	return fmt.Sprintf("%.1f in all (%s)", float64(total)/float64(n)/mins, strings.Join(parts, ", "))
}
