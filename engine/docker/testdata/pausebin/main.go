// Command pausebin stands in for the podrun binary in engine/docker's tests
// of the infra image: `pausebin pause` runs pause.Run, as `podrun pause` does.
// Importing net makes a cgo build link libc dynamically (CGO_ENABLED=0 gives
// a static binary).
package main

import (
	"context"
	"fmt"
	_ "net"
	"os"

	"github.com/podrun/podrun/pause"
)

// variant is set with -ldflags -X to give each test build a hash of its own.
var variant = "dev"

func main() {
	if len(os.Args) != 2 || os.Args[1] != "pause" {
		fmt.Fprintf(os.Stderr, "usage: %s pause (variant %s)\n", os.Args[0], variant)
		os.Exit(2)
	}
	if err := pause.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
