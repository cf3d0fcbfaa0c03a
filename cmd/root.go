// Package cmd holds podrun's commands. Each is thin: it parses flags into an
// options struct and calls a function that does the work against io.Writers,
// so it can be tested without a terminal.
package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/gc"
	"github.com/podrun/podrun/node"
	"github.com/podrun/podrun/runner"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	NodeName   string
	RootDir    string
	DockerHost string
	// RuntimeEndpoint is the CRI runtime's socket
	// (--container-runtime-endpoint); "" is the Docker Engine.
	RuntimeEndpoint string
	// RuntimeRequestTimeout bounds each engine call that is a request and
	// its answer, and the runner's relists (--runtime-request-timeout).
	RuntimeRequestTimeout time.Duration
	// runtimeName is the connected engine's name, as pod status prefixes
	// container IDs with it ("docker", "containerd"); set by connect.
	runtimeName string
	InfraImage  string
	LogLevel    string
	ConfigFile  string
	// Strict makes manifest warnings errors (--strict).
	Strict bool
	// PodMaxPIDs is once's and watch's --pod-max-pids.
	PodMaxPIDs int64
	// AllowedUnsafeSysctls is once's and watch's --allowed-unsafe-sysctls.
	AllowedUnsafeSysctls []string
	// URL sources (watch --url, and URLs given to once, down, validate).
	URLHeaders []string
	URLCA      string
	// Images are the image pull and disk admission flags (cmd/pull.go).
	Images imageOptions
	// endPullProgress ends the pull progress display connect started.
	endPullProgress func()
	// imageUsage is the record of image use the runner writes and image
	// GC reads (set by watch; nil elsewhere).
	imageUsage *gc.ImageUsage

	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Log    *slog.Logger

	// Clock is the commands' time (the runner's too); Host is what pods
	// are told of the machine (node.LocalHost). newRootCmd sets the real
	// ones; tests set their own. Each command's engine is its own
	// Options' Engine.
	Clock clock.WithTicker
	Host  func() node.Host
	// NodeLockDir is where watch locks its node name for the machine
	// (runner.LockNodeName); newRootCmd sets runner.DefaultNodeLockDir.
	// "": no such lock (tests that do not look at it).
	NodeLockDir string
	// OOM probes, once per podrun, whether podrun may lower
	// oom_score_adj, lowering its own to the kubelet's -999 where it may
	// (node.ProbeOOMScoreAdj; see probeOOMOnce). nil: the kubelet's
	// scores as they are, no probe.
	OOM func() node.OOMProtection
}

const defaultConfigFile = "/etc/podrun/config.yaml"

// defaultInfraImage is --pod-infra-image's default. Absent, it is not
// pulled again on every start where podrun built its own before (an
// air-gapped box); an image the user names is (docker.Options.DefaultInfraRef).
const defaultInfraImage = "registry.k8s.io/pause:3.10.2"

// Execute runs podrun with os.Args and exits with its status.
func Execute() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs podrun with args and returns the exit status.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	g := &globalOptions{In: in, Out: out, ErrOut: errOut}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if g.endPullProgress != nil {
		g.endPullProgress()
	}
	if err != nil && !errors.Is(err, errSilent) {
		fmt.Fprintf(errOut, "podrun: %v\n", err)
	}
	return exitCode(err)
}

func newRootCmd(g *globalOptions) *cobra.Command {
	if g.Clock == nil {
		g.Clock = clock.RealClock{}
	}
	if g.Host == nil {
		g.Host = node.LocalHost
	}
	if g.NodeLockDir == "" {
		g.NodeLockDir = runner.DefaultNodeLockDir
	}
	if g.OOM == nil {
		g.OOM = probeOOMOnce(func() *slog.Logger { return g.Log }, func() node.OOMProtection {
			return node.ProbeOOMScoreAdj(node.SelfOOMScoreFile(), runner.OwnOOMScoreAdj, true)
		})
	}
	v := viper.New()
	root := &cobra.Command{
		Use:           "podrun",
		Short:         "Run Kubernetes Pod manifests on one machine, without a cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			ignored, err := loadConfig(v, cmd, g.ConfigFile)
			if err != nil {
				return badInput(err)
			}
			if err := g.Images.validate(); err != nil {
				return err
			}
			if g.RuntimeRequestTimeout <= 0 {
				return badInputf("--runtime-request-timeout %s: must be positive", g.RuntimeRequestTimeout)
			}
			if err := setupLogging(g); err != nil {
				return err
			}
			if len(ignored) > 0 {
				g.Log.Warn("KubeletConfiguration fields podrun does not implement are ignored",
					"file", g.ConfigFile, "fields", strings.Join(ignored, ", "))
			}
			return nil
		},
	}
	hostname, _ := os.Hostname()
	pf := root.PersistentFlags()
	addImageFlags(pf, &g.Images)
	pf.StringVar(&g.NodeName, "node-name", strings.ToLower(hostname), "name of this node; pods are named <name>-<node-name>")
	pf.StringVar(&g.RootDir, "root-dir", "/var/lib/podrun", "directory for pod directories and volumes, of this node name alone (the first once or watch records it in <root-dir>/node-name)")
	pf.StringVar(&g.DockerHost, "docker-host", "", "Docker Engine address (default: $DOCKER_HOST, else the local socket)")
	pf.StringVar(&g.RuntimeEndpoint, "container-runtime-endpoint", "",
		"CRI runtime socket (unix:///run/containerd/containerd.sock) to run pods on instead of the Docker Engine")
	pf.DurationVar(&g.RuntimeRequestTimeout, "runtime-request-timeout", engine.DefaultRequestTimeout,
		"fail an engine call (inspect, list, create, start, remove, exec, ...) and a relist that get no answer for this long, "+
			"rather than wait for good on an engine that hangs; a stop waits this plus its grace period; "+
			"not pulls (see --image-pull-progress-deadline) nor streams once open (logs, exec, events)")
	pf.StringVar(&g.InfraImage, "pod-infra-image", defaultInfraImage,
		"sandbox image; when absent and not pullable, podrun builds one from its own binary")
	pf.StringVarP(&g.LogLevel, "log-level", "v", "info", "log level: debug, info, warn or error")
	pf.StringArrayVar(&g.URLHeaders, "manifest-url-header", nil, "header sent with every manifest URL request, 'Key: Value' (repeatable)")
	pf.StringVar(&g.URLCA, "manifest-url-ca", "", "PEM file of a CA to trust for manifest URLs, besides the system's")
	pf.BoolVar(&g.Strict, "strict", false,
		"refuse manifests with warnings (unknown fields, ...), which podrun otherwise drops as the kubelet does; for CI pipelines")
	pf.StringVar(&g.ConfigFile, "config", defaultConfigFile, "config file (YAML); flags and PODRUN_* variables win over it")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })

	root.AddCommand(
		newOnceCmd(g, nil),
		newWatchCmd(g, nil),
		newDownCmd(g, nil),
		newPsCmd(g, nil),
		newLogsCmd(g, nil),
		newValidateCmd(g, nil),
		newPlanCmd(g, nil),
		newPauseCmd(),
		newVersionCmd(g, nil),
		newInfoCmd(g, nil),
	)
	// Wrong arguments are bad input, as wrong flags are
	// (SetFlagErrorFunc): exit status 2.
	for _, c := range root.Commands() {
		if check := c.Args; check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return badInput(err)
				}
				return nil
			}
		}
	}
	return root
}

// maxConfigFileSize bounds a config file: a KubeletConfiguration is a few
// KiB.
const maxConfigFileSize = 1 << 20

// readConfigFile reads the config file at path: a regular file of at most
// maxConfigFileSize. It is opened non-blocking, so a FIFO does not hang
// the start, and judged by what was opened.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFileSize {
		return nil, fmt.Errorf("over %d MiB: is it really a config file?", maxConfigFileSize>>20)
	}
	return data, nil
}

// loadConfig fills every flag not set on the command line from PODRUN_<FLAG>
// or the config file, in that order. The file is podrun's own (flag names
// as keys; a key that is no flag of any command is an error) or a
// KubeletConfiguration (the file kubeadm writes for the kubelet), whose
// fields podrun does not implement are returned.
func loadConfig(v *viper.Viper, cmd *cobra.Command, file string) ([]string, error) {
	v.SetEnvPrefix("PODRUN")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	var kubelet map[string][]string
	var ignored []string
	if file != "" {
		data, err := readConfigFile(file)
		switch {
		// The default file is optional; a file that was named must exist.
		case errors.Is(err, fs.ErrNotExist) && file == defaultConfigFile:
		case err != nil:
			return nil, fmt.Errorf("config file %s: %w", file, err)
		case isKubeletConfig(data):
			if kubelet, ignored, err = kubeletConfigFlags(data); err != nil {
				return nil, fmt.Errorf("config file %s: %w", file, err)
			}
		default:
			v.SetConfigType("yaml")
			if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
				return nil, fmt.Errorf("config file %s: %w", file, err)
			}
			if err := unknownConfigKeys(file, data, configKeys(cmd.Root())); err != nil {
				return nil, err
			}
		}
	}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" {
			return
		}
		if vals, ok := kubelet[f.Name]; ok && !v.IsSet(f.Name) {
			for _, val := range vals {
				if err := f.Value.Set(val); err != nil {
					errs = append(errs, fmt.Errorf("%s (from the KubeletConfiguration): %w", f.Name, err))
				}
			}
			return
		}
		if !v.IsSet(f.Name) {
			return
		}
		var val string
		switch raw := v.Get(f.Name).(type) {
		case []any:
			parts := make([]string, len(raw))
			for i, p := range raw {
				parts[i] = fmt.Sprint(p)
			}
			val = strings.Join(parts, ",")
		case map[string]any:
			// A map (evictionHard's shape in a KubeletConfiguration) read
			// as a string would be "": say so rather than drop it.
			errs = append(errs, fmt.Errorf("%s: a map where a value is wanted (--%s takes %s)", f.Name, f.Name, f.Value.Type()))
			return
		default:
			val = v.GetString(f.Name)
		}
		if err := f.Value.Set(val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
	})
	return ignored, errors.Join(errs...)
}

func setupLogging(g *globalOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.LogLevel)); err != nil {
		return badInputf("--log-level %q: want debug, info, warn or error", g.LogLevel)
	}
	g.Log = slog.New(slog.NewTextHandler(g.ErrOut, &slog.HandlerOptions{Level: level}))
	if g.RuntimeEndpoint != "" {
		// cri-client logs each failed call, the NotFound answers the
		// engine expects included, through klog: podrun reports the
		// errors it acts on itself, so the client's lines are debug ones.
		// Set now, before anything runs concurrently: klog's logger is
		// a process global that is not safe to change while in use.
		klog.SetSlogLogger(slog.New(debugOnly{g.Log.Handler()}).With("component", "cri-client"))
	}
	return nil
}
