package cmd

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/docker"
	"github.com/podrun/podrun/gc"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/runner"
)

// imageOptions are the flags of image pulls and disk admission, for every
// command that starts pods (once, watch).
type imageOptions struct {
	// CredentialsFile is the Docker config file with the node's registry
	// credentials; "" is the Docker CLI's (~/.docker/config.json).
	CredentialsFile string
	SerializePulls  bool
	// Quiet shows no pull progress.
	Quiet bool
	// LowDiskSpaceThresholdMB: below this many MiB available on the root
	// dir's or Docker's filesystem, no new pod starts. 0 never refuses.
	LowDiskSpaceThresholdMB int64
	// PullProgressDeadline cancels a Docker pull that reports no progress
	// for this long (docker.Options.PullProgressDeadline).
	PullProgressDeadline time.Duration
}

// addImageFlags adds the image flags to fs.
func addImageFlags(fs *pflag.FlagSet, o *imageOptions) {
	fs.StringVar(&o.CredentialsFile, "image-credentials", "",
		"Docker config file with registry credentials for image pulls (auths, credHelpers, credsStore) (default $DOCKER_CONFIG/config.json or ~/.docker/config.json)")
	fs.BoolVar(&o.SerializePulls, "serialize-image-pulls", true, "pull one image at a time")
	fs.BoolVarP(&o.Quiet, "quiet", "q", false, "show no image pull progress")
	fs.Int64Var(&o.LowDiskSpaceThresholdMB, "low-disk-space-threshold-mb", 256,
		"start no new pod while the root dir's or Docker's filesystem has less than this many MiB available (0: no limit)")
	fs.DurationVar(&o.PullProgressDeadline, "image-pull-progress-deadline", docker.DefaultPullProgressDeadline,
		"cancel a Docker image pull that reports no progress for this long; the pod's pull fails and is retried under the back-off (a CRI runtime applies its own)")
}

func (o *imageOptions) validate() error {
	if o.LowDiskSpaceThresholdMB < 0 {
		return badInputf("--low-disk-space-threshold-mb %d: must not be negative", o.LowDiskSpaceThresholdMB)
	}
	if o.PullProgressDeadline <= 0 {
		return badInputf("--image-pull-progress-deadline %s: must be positive", o.PullProgressDeadline)
	}
	return nil
}

// pullProgress is the engines' PullProgress callback for these options, writing to
// out (standard error), and the function that ends the display.
func (o *imageOptions) pullProgress(out io.Writer) (func(string, engine.PullProgress), func()) {
	return newPullProgress(out, o.Quiet)
}

// credentials are the node's registry credentials: the Docker config file
// given, or the Docker CLI's.
func (o *imageOptions) credentials(log *slog.Logger) *docker.ConfigFileCredentials {
	path := o.CredentialsFile
	if path == "" {
		path = docker.DefaultConfigFile()
	}
	return &docker.ConfigFileCredentials{Path: path, Log: log}
}

// runnerImages is runner.Config.Images for these options: the node's
// credentials, serialized pulls, and the record of image use that image GC
// reads (usage may be nil).
func (o *imageOptions) runnerImages(log *slog.Logger, usage *gc.ImageUsage) *runner.ImageOptions {
	opts := &runner.ImageOptions{Credentials: o.credentials(log), SerializePulls: o.SerializePulls}
	if usage != nil {
		opts.Used = usage.Used
	}
	return opts
}

// admitter is runner.Config.Admit for these options: it refuses new pods
// while the root dir's or Docker's filesystem is short of space. nil when
// there is no threshold.
func (o *imageOptions) admitter(ctx context.Context, rootDir string, rt interface {
	DataRoot(context.Context) (string, error)
}, log *slog.Logger) func(*v1.Pod) error {
	if o.LowDiskSpaceThresholdMB == 0 {
		return nil
	}
	paths := []string{rootDir}
	if root, err := rt.DataRoot(ctx); err == nil {
		paths = append(paths, root)
	} else {
		log.Warn("cannot find Docker's data root; only the root dir's disk space is checked", "err", err)
	}
	d := &node.DiskAdmitter{Paths: paths, MinFreeBytes: uint64(o.LowDiskSpaceThresholdMB) << 20}
	return d.Admit
}
