// Command podrun runs Kubernetes Pod manifests on one machine, without a
// cluster.
package main

import "github.com/podrun/podrun/cmd"

func main() {
	cmd.Execute()
}
