package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/runner/docker"
	"github.com/podrun/podrun/source"
)

// connect opens the Docker runtime for this node and checks it answers.
// Failing to reach it is exit code 3.
func connect(ctx context.Context, g *globalOptions) (*docker.Runtime, error) {
	if err := checkNodeName(g.NodeName); err != nil {
		return nil, err
	}
	progress, endProgress := g.Images.pullProgress(g.ErrOut)
	g.endPullProgress = endProgress
	rt, err := docker.New(docker.Options{Host: g.DockerHost, NodeName: g.NodeName, Logger: g.Log, PullProgress: progress})
	if err != nil {
		return nil, unreachable(fmt.Errorf("docker: %w", err))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Ping(pingCtx); err != nil {
		rt.Close()
		return nil, unreachable(fmt.Errorf("cannot reach the Docker Engine (is dockerd running? see --docker-host): %w", err))
	}
	return rt, nil
}

func checkNodeName(name string) error {
	if name == "" {
		return badInputf("--node-name is empty and the hostname is unknown: set --node-name")
	}
	if name != strings.ToLower(name) {
		return badInputf("--node-name %q: must be lower case", name)
	}
	return nil
}

// newRunner builds the sync core on rt, making sure the infra image exists
// (building podrun's own when it cannot be pulled).
func newRunner(ctx context.Context, g *globalOptions, rt *docker.Runtime, allowPrivileged bool, tune ...func(*runner.Config)) (*runner.Runner, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find podrun's executable: %w", err)
	}
	infra, err := rt.EnsureInfraImage(ctx, g.InfraImage, exe)
	if err != nil {
		if errors.Is(err, runner.ErrUnavailable) {
			return nil, unreachable(err)
		}
		return nil, fmt.Errorf("infra image: %w", err)
	}
	var si unix.Sysinfo_t
	var memory int64
	if unix.Sysinfo(&si) == nil {
		memory = int64(si.Totalram) * int64(si.Unit)
	}
	cfg := runner.Config{
		Runtime:         rt,
		RuntimeName:     "docker",
		NodeName:        g.NodeName,
		RootDir:         g.RootDir,
		InfraImage:      infra,
		HostIP:          hostIP(),
		AllowPrivileged: allowPrivileged,
		Log:             g.Log,
		NodeMilliCPU:    int64(runtime.NumCPU()) * 1000,
		NodeMemory:      memory,
		Images:          g.Images.runnerImages(g.Log, g.imageUsage),
		Admit:           g.Images.admitter(ctx, g.RootDir, rt, g.Log),
	}
	for _, t := range tune {
		t(&cfg)
	}
	return runner.New(cfg), nil
}

// hostIP is the node's address for status.hostIP: the first global unicast
// IPv4 address of an interface that is up and not a container bridge, else
// 127.0.0.1.
func hostIP() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 ||
			strings.HasPrefix(ifc.Name, "docker") || strings.HasPrefix(ifc.Name, "veth") || strings.HasPrefix(ifc.Name, "br-") {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// loadManifests reads every path ("-" is standard input, http(s):// a URL
// fetched once) into one snapshot per argument. Any invalid manifest is exit
// code 2, and nothing is started.
func loadManifests(ctx context.Context, g *globalOptions, paths []string) ([]*manifest.Snapshot, error) {
	opts := manifest.Options{NodeName: g.NodeName, Logger: g.Log}
	var snaps []*manifest.Snapshot
	var errs []error
	for _, p := range paths {
		var snap *manifest.Snapshot
		var err error
		if isURL(p) {
			client, header, cerr := urlClient(g)
			if cerr != nil {
				return nil, cerr
			}
			snap, err = source.FetchURL(ctx, client, p, header, opts)
		} else if p == "-" {
			data, rerr := readLimited(g.In)
			if rerr != nil {
				errs = append(errs, fmt.Errorf("read standard input: %w", rerr))
				continue
			}
			snap, err = manifest.Parse("-", data, opts)
		} else {
			snap, err = manifest.ReadPath(p, opts)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range snap.Warnings {
			g.Log.Warn(w)
		}
		snaps = append(snaps, snap)
	}
	if len(errs) > 0 {
		return nil, badInput(errors.Join(errs...))
	}
	return snaps, nil
}

// loadPods reads the manifests at paths and returns them with their pods.
func loadPods(ctx context.Context, g *globalOptions, paths []string) ([]*manifest.Snapshot, []*podSource, error) {
	snaps, err := loadManifests(ctx, g, paths)
	if err != nil {
		return nil, nil, err
	}
	pods, err := allPods(snaps)
	return snaps, pods, err
}

// allPods flattens snapshots into their pods, first source first; a pod
// that two sources define (the same namespace/name, or the same UID) is
// kept from the first only, and the conflict is bad input (manifest.Claim).
func allPods(snaps []*manifest.Snapshot) ([]*podSource, error) {
	claimed := manifest.Claim(snaps)
	var errs []error
	for _, c := range claimed.Conflicts {
		pod, ok := c.Obj.(*v1.Pod)
		if !ok {
			continue // ConfigMaps and Secrets: the first one is used
		}
		loser, winner := snaps[c.Loser].Source, snaps[c.Winner].Source
		if c.UID {
			errs = append(errs, fmt.Errorf("%s: pod %s/%s has UID %s, as a pod defined in %s", loser, pod.Namespace, pod.Name, pod.UID, winner))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: pod %s/%s is also defined in %s", loser, pod.Namespace, pod.Name, winner))
	}
	if len(errs) > 0 {
		return nil, badInput(errors.Join(errs...))
	}
	// Which snapshot each winning pod came from.
	from := map[*v1.Pod]string{}
	for _, s := range snaps {
		for _, p := range s.Pods {
			from[p] = s.Source
		}
	}
	out := make([]*podSource, len(claimed.Pods))
	for i, p := range claimed.Pods {
		out[i] = &podSource{Pod: p, Source: from[p]}
	}
	return out, nil
}

// newTeardownRunner is a runner for removing pods: it starts nothing, so it
// needs no infra image.
func newTeardownRunner(g *globalOptions, rt *docker.Runtime) *runner.Runner {
	return runner.New(runner.Config{
		Runtime: rt, RuntimeName: "docker", NodeName: g.NodeName, RootDir: g.RootDir, Log: g.Log, HostIP: hostIP(),
	})
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}
