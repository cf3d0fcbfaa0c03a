// Command bound is the lower bound podrun's bring-up is measured against:
// for each of n pods it makes the Docker Engine API calls podrun's pod
// model needs and nothing else — create and start an infra (sandbox)
// container, then create and start one app container joined to its network
// and IPC namespaces (NetworkMode/IpcMode container:<id>) — each pod in its
// own goroutine, with no manifest, no state, no relist and no status
// (benchkit.BringUpBound).
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

	"github.com/podrun/podrun/bench/benchkit"
)

func main() {
	n := flag.Int("n", 1, "pods to bring up")
	node := flag.String("node", "", "node label for everything made (required)")
	infra := flag.String("infra", "", "infra image (required)")
	img := flag.String("image", benchkit.TestImage, "app container image")
	flag.Parse()
	if *node == "" || *infra == "" {
		fmt.Fprintln(os.Stderr, "bound: --node and --infra are required")
		os.Exit(2)
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
