// Package benchkit holds what podrun's benchmarks (bench/) and reliability
// suite (test/chaos) share: a Docker client, node names of their own, an
// infra image of their own, manifests, cleanup of everything a node made,
// and readings of a process (/proc) and of podrun's /metrics.
//
// Everything here touches only containers labelled with the caller's node
// name, and images it made itself.
package benchkit

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/podrun/podrun/pause"
)

// TestImage is the local image hack/setup.sh builds.
const TestImage = "podrun/busybox:test"

// LabelNode is podrun's node label (engine/docker.LabelNode).
const LabelNode = "io.podrun.node"

// InfraRepo is the repository of the infra images benchkit makes. It is not
// podrun/pause: the e2e tests remove every podrun/pause image made while
// they run, and another engineer's e2e run must not pull the image from
// under a benchmark.
const InfraRepo = "podrun-bench/pause"

// Docker returns a client of the local engine (DOCKER_HOST honoured).
func Docker() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// NodeName returns prefix-<8 hex>: a node of one's own.
func NodeName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// NodeFilter selects the containers of node.
func NodeFilter(node string) filters.Args {
	return filters.NewArgs(filters.Arg("label", LabelNode+"="+node))
}

// List returns every container of node, sandboxes included.
func List(ctx context.Context, cli *client.Client, node string) ([]container.Summary, error) {
	return cli.ContainerList(ctx, container.ListOptions{All: true, Filters: NodeFilter(node)})
}

// CleanupWait bounds how long Cleanup keeps trying to remove containers
// that Docker cannot remove yet.
const CleanupWait = 30 * time.Second

// Cleanup force-removes every container of node, several at a time, until
// none is left (a podrun still running may make one more meanwhile). What
// Docker cannot remove at once is tried again, polling with backoff (50 ms
// doubling to 2 s), for up to CleanupWait: a container Docker left "dead"
// after a dockerd restart, its overlay still mounted ("unlinkat .../merged:
// device or resource busy"), or one whose removal is already in progress.
// The error then names every container left, with its state and Docker's
// last answer.
func Cleanup(ctx context.Context, cli *client.Client, node string) error {
	return removeAll(ctx, node, CleanupWait,
		func(ctx context.Context) ([]container.Summary, error) { return List(ctx, cli, node) },
		func(ctx context.Context, id string) error {
			return cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		})
}

// removeAll is Cleanup over list and remove: rounds of removing everything
// listed (8 at a time) until a list is empty, for up to wait.
func removeAll(ctx context.Context, node string, wait time.Duration,
	list func(context.Context) ([]container.Summary, error), remove func(context.Context, string) error) error {
	deadline := time.Now().Add(wait)
	interval := 50 * time.Millisecond
	lastErr := map[string]error{}
	var mu sync.Mutex
	for round := 1; ; round++ {
		cs, err := list(ctx)
		if err != nil {
			return fmt.Errorf("cleanup of node %s: %w", node, err)
		}
		if len(cs) == 0 {
			return nil
		}
		if round > 1 && !time.Now().Before(deadline) {
			return fmt.Errorf("cleanup of node %s: %d containers left after %s (%d rounds): %s",
				node, len(cs), wait, round-1, describeLeft(cs, lastErr))
		}
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := remove(ctx, c.ID)
				if errdefs.IsNotFound(err) {
					err = nil
				}
				mu.Lock()
				lastErr[c.ID] = err
				mu.Unlock()
			}()
		}
		wg.Wait()
		pause := 10 * time.Millisecond // all went: look again at once
		for _, c := range cs {
			if lastErr[c.ID] != nil {
				pause = interval
				interval = min(2*interval, 2*time.Second)
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cleanup of node %s: %w", node, ctx.Err())
		case <-time.After(min(pause, max(time.Until(deadline), 0))):
		}
	}
}

// describeLeft names each container left: "name (id12, state): error".
func describeLeft(cs []container.Summary, lastErr map[string]error) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		s := fmt.Sprintf("%s (%.12s, %s)", name, c.ID, c.State)
		if c.Status != "" && !strings.EqualFold(c.Status, c.State) {
			s = fmt.Sprintf("%s (%.12s, %s: %s)", name, c.ID, c.State, c.Status)
		}
		if err := lastErr[c.ID]; err != nil {
			s += ": " + err.Error()
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// BuildPodrun builds podrun (the module at repo) as a static binary at out.
// A static binary makes an infra image of one file.
func BuildPodrun(repo, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", out, ".")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build podrun in %s: %w", repo, err)
	}
	return nil
}

// InfraImage imports, as `docker import`, the infra image podrun builds
// for itself when it has none: the pause program (pause.Program()) at
// /pause where podrun has one for this architecture, else the static
// podrun binary exe at /podrun with the entrypoint `/podrun pause`. It is
// tagged InfraRepo:<hash of exe and tag>, and returned with a function
// that removes it.
func InfraImage(ctx context.Context, cli *client.Client, exe, tag string) (string, func(), error) {
	data, err := os.ReadFile(exe)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(append(data, tag...))
	ref := InfraRepo + ":" + hex.EncodeToString(sum[:6])
	name, entrypoint := "podrun", `ENTRYPOINT ["/podrun","pause"]`
	if program := pause.Program(); program != nil {
		name, entrypoint, data = "pause", `ENTRYPOINT ["/pause"]`, program
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return "", nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return "", nil, err
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{entrypoint}})
	if err != nil {
		return "", nil, fmt.Errorf("import %s: %w", ref, err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return "", nil, fmt.Errorf("import %s: %w", ref, err)
	}
	return ref, func() {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	}, nil
}

// Pod is a manifest of a pod with one container running the test image.
type Pod struct {
	Name    string
	Command []string // default: sleep 3600
	// Grace is terminationGracePeriodSeconds (0 here: the benchmark's
	// containers are killed at once; sleep as PID 1 ignores SIGTERM).
	Grace int
	// RestartPolicy; "" is Always.
	RestartPolicy string
	// Image (default TestImage) and its pull policy (default
	// IfNotPresent).
	Image, PullPolicy string
	// HostPort, when set, publishes the container's port 8080 on
	// 127.0.0.1:HostPort.
	HostPort int
}

// YAML renders the manifest.
func (p Pod) YAML() string {
	cmd := p.Command
	if len(cmd) == 0 {
		cmd = []string{"sleep", "3600"}
	}
	quoted := make([]string, len(cmd))
	for i, c := range cmd {
		quoted[i] = strconv.Quote(c)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: %d\n", p.Name, p.Grace)
	if p.RestartPolicy != "" {
		fmt.Fprintf(&b, "  restartPolicy: %s\n", p.RestartPolicy)
	}
	img, policy := p.Image, p.PullPolicy
	if img == "" {
		img = TestImage
	}
	if policy == "" {
		policy = "IfNotPresent"
	}
	fmt.Fprintf(&b, "  containers:\n  - name: app\n    image: %s\n    imagePullPolicy: %s\n    command: [%s]\n",
		img, policy, strings.Join(quoted, ", "))
	if p.HostPort != 0 {
		fmt.Fprintf(&b, "    ports: [{containerPort: 8080, hostPort: %d, hostIP: 127.0.0.1}]\n", p.HostPort)
	}
	return b.String()
}

// WritePods writes n pods named <prefix>-<i> into dir, one file each.
func WritePods(dir, prefix string, n int) error {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		if err := WriteFile(filepath.Join(dir, name+".yaml"), Pod{Name: name}.YAML()); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes content to path through a temporary file and a rename,
// as editors and config tools do, so a reader never sees half a file.
func WriteFile(path, content string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Key names a container of a node as "pod/container" (POD for sandboxes),
// the pod name without the node suffix.
func Key(c container.Summary, node string) string {
	name := c.Labels["io.podrun.container.name"]
	if c.Labels["io.podrun.container.type"] == "sandbox" {
		name = "POD"
	}
	return strings.TrimSuffix(c.Labels["io.podrun.pod.name"], "-"+node) + "/" + name
}

// Running returns node's running containers by Key, and how many objects
// (running or not) share a key with another running one: a duplicate.
func Running(ctx context.Context, cli *client.Client, node string) (map[string]container.Summary, []string, error) {
	cs, err := List(ctx, cli, node)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]container.Summary{}
	var dups []string
	for _, c := range cs {
		if c.State != "running" {
			continue
		}
		k := Key(c, node)
		if prev, ok := out[k]; ok {
			dups = append(dups, fmt.Sprintf("%s runs twice (%.12s, %.12s)", k, prev.ID, c.ID))
		}
		out[k] = c
	}
	return out, dups, nil
}

// ProcStat is a reading of a process from /proc.
type ProcStat struct {
	RSS     int64         // VmRSS, bytes
	HWM     int64         // VmHWM (peak RSS), bytes
	CPU     time.Duration // user + system time so far
	Threads int
}

// ReadProc reads pid's memory and CPU time.
func ReadProc(pid int) (ProcStat, error) {
	var p ProcStat
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return p, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			p.RSS = n << 10
		case "VmHWM":
			p.HWM = n << 10
		case "Threads":
			p.Threads = int(n)
		}
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return p, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return p, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// USER_HZ is 100 on every Linux that podrun runs on.
	p.CPU = time.Duration(utime+stime) * (time.Second / 100)
	return p, nil
}

// Metrics fetches a Prometheus text page and returns each sample of the
// series named name by its label set as written ("" for none), e.g.
// {`method="ListContainers"`: 12}.
func Metrics(ctx context.Context, url, name string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := ""
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[labels] = v
	}
	return out, sc.Err()
}

// Sum adds up the samples.
func Sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// WaitFor polls cond every interval until it returns true or an error, or
// timeout passes.
func WaitFor(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) (time.Duration, error) {
	start := time.Now()
	for {
		ok, err := cond()
		if err != nil {
			return time.Since(start), err
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(interval):
		}
	}
}
