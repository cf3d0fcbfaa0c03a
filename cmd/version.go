package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print podrun's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(g.Out, versionString())
			return nil
		},
	}
}

// versionString is the module version and VCS revision the binary was built
// from, as the Go toolchain recorded them.
func versionString() string {
	v, rev, goVersion := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("podrun %s%s %s", v, rev, goVersion)
}

// kubeletVersion is podrun's version as a node's kubeletVersion reports
// it: a semantic version, which tools parse ("v0.0.0-devel" for a build
// without one).
func kubeletVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && strings.HasPrefix(bi.Main.Version, "v") {
		return bi.Main.Version
	}
	return "v0.0.0-devel"
}
