package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
)

// containerLogMonitorInterval is how often `watch` looks at the containers'
// logs: the kubelet's default containerLogMonitorInterval.
const containerLogMonitorInterval = 10 * time.Second

// logRotationOptions are watch's container log flags, the kubelet's. They
// act on a CRI runtime, whose logs podrun rotates as the kubelet does; on
// Docker, dockerd rotates its own by its log-opts.
type logRotationOptions struct {
	// MaxSize is the size at which a container's log is rotated.
	MaxSize int64
	// MaxFiles is the most log files a container keeps, the current one
	// included.
	MaxFiles   int
	maxSizeRaw string
}

func addLogRotationFlags(fs *pflag.FlagSet, o *logRotationOptions) {
	fs.StringVar(&o.maxSizeRaw, "container-log-max-size", "10Mi",
		"on a CRI runtime, the size (a quantity, as 10Mi) at which a container's log file is rotated")
	fs.IntVar(&o.MaxFiles, "container-log-max-files", 5,
		"on a CRI runtime, the most log files a container keeps, the current one included (at least 2)")
}

// parse reads the size flag and checks both as the kubelet does; a bad one
// is exit code 2.
func (o *logRotationOptions) parse() error {
	q, err := resource.ParseQuantity(o.maxSizeRaw)
	if err != nil {
		return badInput(fmt.Errorf("--container-log-max-size: %w", err))
	}
	if q.Sign() <= 0 {
		return badInputf("--container-log-max-size must be positive")
	}
	if o.MaxFiles < 2 {
		return badInputf("--container-log-max-files must be at least 2 (the current log and a rotated one)")
	}
	o.MaxSize = q.Value()
	return nil
}

// logRotator is an engine that rotates its containers' logs itself
// (cri.Runtime).
type logRotator interface {
	RotateLogs(ctx context.Context, maxSize int64, maxFiles int) error
}

// rotateLogs has rt rotate its containers' logs now and every
// containerLogMonitorInterval until ctx ends. A failure is logged, a line
// for each container, and the next pass tries again.
func rotateLogs(ctx context.Context, rt logRotator, o logRotationOptions, clk clock.WithTicker, log *slog.Logger) {
	tick := clk.NewTicker(containerLogMonitorInterval)
	defer tick.Stop()
	for {
		if err := rt.RotateLogs(ctx, o.MaxSize, o.MaxFiles); err != nil && ctx.Err() == nil {
			errs := []error{err}
			if joined, ok := err.(interface{ Unwrap() []error }); ok {
				errs = joined.Unwrap()
			}
			for _, err := range errs {
				log.Warn("container log rotation", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}
