package cmd

import (
	"github.com/spf13/cobra"

	"github.com/podrun/podrun/pause"
)

// newPauseCmd is the process of podrun's own infra image: it holds a pod's
// namespaces, reaps zombies and exits on SIGTERM or SIGINT.
func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Hold a pod sandbox's namespaces (the built-in infra image's process)",
		Hidden: true,
		Args:   cobra.NoArgs,
		// Runs as PID 1 of a sandbox: no config file, no logging set-up.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return pause.Run(cmd.Context())
		},
	}
}
