package cmd

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

type versionOptions struct {
	*globalOptions
	Output string
	// BuildInfo is what the Go toolchain recorded in the binary
	// (debug.ReadBuildInfo, the default); tests give their own.
	BuildInfo func() (*debug.BuildInfo, bool)
}

func newVersionCmd(g *globalOptions, runF func(context.Context, *versionOptions) error) *cobra.Command {
	opts := &versionOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print podrun's version, the commit it was built from, and its Go version",
		Long: `Print podrun's version and what the Go toolchain recorded when it built the
binary: the VCS revision and its commit time, whether the work tree had
uncommitted changes (modified), and the Go version and platform. Go records
no build date; the commit time is the date of the source. A binary built
without VCS information (go build -buildvcs=false, or outside a checkout)
shows <none> for those.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if opts.BuildInfo == nil {
				opts.BuildInfo = debug.ReadBuildInfo
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return versionRun(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// versionInfo is what `podrun version` prints.
type versionInfo struct {
	// Version is the module version, "(devel)" for a build from a checkout.
	Version string `json:"version"`
	// Revision is the full VCS revision (vcs.revision).
	Revision string `json:"revision,omitempty"`
	// CommitTime is the revision's commit time, RFC 3339 (vcs.time).
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is whether the work tree had uncommitted changes
	// (vcs.modified); nil when the build recorded no VCS information.
	Modified  *bool  `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion reads versionInfo out of the binary's build info (bi nil:
// none recorded).
func buildVersion(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			if m, err := strconv.ParseBool(s.Value); err == nil {
				v.Modified = &m
			}
		}
	}
	return v
}

func versionRun(opts *versionOptions) error {
	bi, ok := opts.BuildInfo()
	if !ok {
		bi = nil
	}
	v := buildVersion(bi)
	if opts.Output != "table" {
		return writeStructured(opts.Out, opts.Output, v)
	}
	return writeVersionTable(opts.Out, v)
}

func writeVersionTable(w io.Writer, v versionInfo) error {
	modified := ""
	if v.Modified != nil {
		modified = strconv.FormatBool(*v.Modified)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"VERSION", v.Version},
		{"REVISION", v.Revision},
		{"MODIFIED", modified},
		{"COMMIT TIME", v.CommitTime},
		{"GO", v.GoVersion + " " + v.Platform},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], orNone(row[1]))
	}
	return tw.Flush()
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
