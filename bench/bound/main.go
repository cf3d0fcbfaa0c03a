// Command bound is the lower bound podrun's bring-up is measured against:
// for each of n pods it makes the Docker Engine API calls podrun's pod
// model needs and nothing else — create and start an infra (sandbox)
// container, then create and start one app container joined to its network
// and IPC namespaces (NetworkMode/IpcMode container:<id>) — each pod in its
// own goroutine, with no manifest, no state, no relist and no status
// (benchkit.BringUpBound).
//
// With -cri-endpoint it is the bound on a CRI runtime (containerd) instead:
// RunPodSandbox, CreateContainer, StartContainer per pod, one goroutine per
// pod (benchkit.BringUpCRIBound); -remove then removes what a run made for
// -node, and -check verifies it (every container running, every sandbox
// with an IP).
//
// It labels what it makes with --node so that the benchmark can remove it,
// prints the seconds the calls took on stdout, and exits non-zero on any
// error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/podrun/podrun/bench/benchkit"
)

func main() {
	n := flag.Int("n", 1, "pods to bring up")
	node := flag.String("node", "", "node label for everything made (required)")
	infra := flag.String("infra", "", "infra image (required for Docker)")
	img := flag.String("image", benchkit.TestImage, "app container image")
	endpoint := flag.String("cri-endpoint", "", "CRI runtime socket (unix:///...): the CRI bound instead of Docker's")
	remove := flag.Bool("remove", false, "with -cri-endpoint: remove what -node has, and nothing else")
	check := flag.Bool("check", false, "with -cri-endpoint: check that -node has n running pods, each sandbox with an IP")
	flag.Parse()
	if *node == "" || (*infra == "" && *endpoint == "") {
		fmt.Fprintln(os.Stderr, "bound: --node, and --infra or --cri-endpoint, are required")
		os.Exit(2)
	}
	if *endpoint != "" {
		os.Exit(criBound(*endpoint, *node, *img, *n, *remove, *check))
	}
	cli, err := benchkit.Docker()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bound:", err)
		os.Exit(3)
	}
	defer cli.Close()
	took, err := benchkit.BringUpBound(context.Background(), cli, *node, *infra, *img, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bound:", err)
		os.Exit(1)
	}
	fmt.Println(took.Seconds())
}

// criBound runs the CRI bound (or its removal, or its check) and returns
// the exit code. Logs go under the temporary directory, by node.
func criBound(endpoint, node, img string, n int, remove, check bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rs, err := benchkit.CRI(ctx, endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bound:", err)
		return 3
	}
	defer rs.Close(ctx)
	logDir := filepath.Join(os.TempDir(), "podrun-cri-bound-"+node)
	switch {
	case remove:
		err := benchkit.RemoveCRINode(ctx, rs, node)
		os.RemoveAll(logDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bound:", err)
			return 1
		}
		return 0
	case check:
		cs, sbs, noIP, err := benchkit.RunningCRI(ctx, rs, node)
		if err != nil || cs != n || sbs != n || noIP != 0 {
			fmt.Fprintf(os.Stderr, "bound: %d running containers, %d ready sandboxes (%d without an IP), want %d: %v\n", cs, sbs, noIP, n, err)
			return 1
		}
		return 0
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bound:", err)
		return 1
	}
	took, err := benchkit.BringUpCRIBound(ctx, rs, node, img, logDir, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bound:", err)
		return 1
	}
	fmt.Println(took.Seconds())
	return 0
}
