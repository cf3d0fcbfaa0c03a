package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vbauerster/mpb/v8"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/docker"
	"github.com/podrun/podrun/node"
)

// pullMessages is a pull of two layers as Docker reports it.
func pullMessages(ref string) []engine.PullProgress {
	return []engine.PullProgress{
		{Status: "Pulling from " + ref, ID: "test"},
		{ID: "l1", Status: "Pulling fs layer"},
		{ID: "l2", Status: "Pulling fs layer"},
		{ID: "l1", Status: "Downloading", Current: 1000, Total: 3000},
		{ID: "l2", Status: "Downloading", Current: 500, Total: 1000},
		{ID: "l1", Status: "Downloading", Current: 3000, Total: 3000},
		{ID: "l1", Status: "Download complete"},
		{ID: "l2", Status: "Download complete"},
		{ID: "l1", Status: "Extracting", Current: 3000, Total: 3000},
		{ID: "l1", Status: "Pull complete"},
		{ID: "l2", Status: "Pull complete"},
		{Status: "Digest: sha256:abc"},
		{Status: "Status: Downloaded newer image for " + ref},
	}
}

func TestPullProgressLines(t *testing.T) {
	var out bytes.Buffer
	lp := newLineProgress(&out)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lp.now = func() time.Time { now = now.Add(500 * time.Millisecond); return now }
	update, done := lp.callbacks()
	for _, m := range pullMessages("reg:5000/app:1") {
		update("reg:5000/app:1", m)
	}
	// As the CRI engine reports a pull too fast to see downloading: the
	// sizes come with each layer's "Pull complete".
	for _, m := range []engine.PullProgress{
		{Status: "Pulling cri:1"},
		{ID: "c1", Status: "Pull complete", Current: 2000, Total: 2000},
		{ID: "c2", Status: "Pull complete", Current: 3000, Total: 3000},
		{Status: "Status: Downloaded newer image for cri:1"},
	} {
		update("cri:1", m)
	}
	update("broken:1", engine.PullProgress{ID: "l9", Status: "Pulling fs layer"})
	done()
	got := out.String()
	want := "pulling image reg:5000/app:1\n" +
		"pulled reg:5000/app:1: 4kB in 2 layers, 500ms\n" +
		"pulling image cri:1\n" +
		"pulled cri:1: 5kB in 2 layers, 500ms\n" +
		"pulling image broken:1\n" +
		"pull of broken:1 did not finish\n"
	if got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
	// Not a terminal: lines; quiet: nothing at all.
	if f, _ := newPullProgress(&out, true); f != nil {
		t.Error("quiet: a callback")
	}
	out.Reset()
	f, closeF := newPullProgress(&out, false)
	f("x:1", engine.PullProgress{Status: "Status: Image is up to date for x:1"})
	closeF()
	if !strings.Contains(out.String(), "pulling image x:1") || !strings.Contains(out.String(), "up to date") {
		t.Errorf("off a terminal: %q", out.String())
	}
}

func TestPullProgressBars(t *testing.T) {
	// A buffer as the "terminal": mpb draws to any writer when told to.
	var out bytes.Buffer
	bp := newBarProgress(&out, mpb.WithWidth(120), mpb.ForceAutoRefresh(), mpb.WithRefreshRate(time.Millisecond))
	update, done := bp.callbacks()
	for _, m := range pullMessages("reg:5000/app:1") {
		update("reg:5000/app:1", m)
		time.Sleep(2 * time.Millisecond)
	}
	update("other:2", engine.PullProgress{ID: "z", Status: "Downloading", Current: 10, Total: 100})
	done()
	got := out.String()
	for _, want := range []string{"reg:5000/app:1", "2/2 layers", "3.9 KiB / 3.9 KiB", "other:2", "0/1 layers"} {
		if !strings.Contains(got, want) {
			t.Errorf("bars do not show %q:\n%s", want, got)
		}
	}
}

func TestImageAndGCFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var io imageOptions
	var g gcOptions
	addImageFlags(fs, &io)
	addGCFlags(fs, &g)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if io.CredentialsFile != "" || !io.SerializePulls || io.Quiet || io.LowDiskSpaceThresholdMB != 256 ||
		io.PullProgressDeadline != time.Minute {
		t.Errorf("image defaults: %+v", io)
	}
	if g.MinContainerTTL != 0 || g.MaxDeadPerContainer != 1 || g.MaxDeadContainers != -1 || g.ImageGCHighThreshold != 85 ||
		g.ImageGCLowThreshold != 80 || g.ImageMinimumGCAge != 2*time.Minute || g.ContainerGCPeriod != time.Minute ||
		g.ImageGCPeriod != 5*time.Minute {
		t.Errorf("gc defaults: %+v", g)
	}
	if err := g.validate(); err != nil {
		t.Error(err)
	}
	if err := fs.Parse([]string{"--image-credentials", "/c.json", "--serialize-image-pulls=false", "-q",
		"--low-disk-space-threshold-mb", "1024", "--image-pull-progress-deadline", "90s", "--maximum-dead-containers-per-container", "2", "--maximum-dead-containers", "10",
		"--image-gc-high-threshold", "90", "--image-gc-low-threshold", "70", "--image-minimum-gc-age", "1m",
		"--minimum-container-ttl-duration", "30s", "--container-gc-period", "2s", "--image-gc-period", "3s"}); err != nil {
		t.Fatal(err)
	}
	if io.CredentialsFile != "/c.json" || io.SerializePulls || !io.Quiet || io.LowDiskSpaceThresholdMB != 1024 ||
		io.PullProgressDeadline != 90*time.Second {
		t.Errorf("image flags: %+v", io)
	}
	p, ip := g.containerPolicy(), g.imagePolicy()
	if p.MaxPerContainer != 2 || p.MaxContainers != 10 || p.MinAge != 30*time.Second ||
		ip.HighThresholdPercent != 90 || ip.LowThresholdPercent != 70 || ip.MinAge != time.Minute ||
		g.ContainerGCPeriod != 2*time.Second || g.ImageGCPeriod != 3*time.Second {
		t.Errorf("gc flags: %+v", g)
	}
	for _, bad := range []gcOptions{
		{ImageGCHighThreshold: 80, ImageGCLowThreshold: 85, ContainerGCPeriod: 1, ImageGCPeriod: 1},
		{ImageGCHighThreshold: 101, ContainerGCPeriod: 1, ImageGCPeriod: 1},
		{ImageGCHighThreshold: 85, ContainerGCPeriod: 0, ImageGCPeriod: 1},
		{ImageGCHighThreshold: 85, MinContainerTTL: -1, ContainerGCPeriod: 1, ImageGCPeriod: 1},
	} {
		if err := bad.validate(); exitCode(err) != exitBadInput {
			t.Errorf("%+v: %v, want bad input", bad, err)
		}
	}
	if err := (&imageOptions{LowDiskSpaceThresholdMB: -1, PullProgressDeadline: time.Minute}).validate(); exitCode(err) != exitBadInput {
		t.Errorf("negative threshold: %v", err)
	}
	if err := (&imageOptions{}).validate(); exitCode(err) != exitBadInput {
		t.Errorf("no pull progress deadline: %v", err)
	}
	// The node's credentials default to the Docker CLI's file.
	t.Setenv("DOCKER_CONFIG", "/etc/dc")
	if c := (&imageOptions{}).credentials(nil); c.Path != "/etc/dc/config.json" {
		t.Errorf("default credentials file: %s", c.Path)
	}
	ro := (&imageOptions{CredentialsFile: "/x.json", SerializePulls: true}).runnerImages(nil, nil)
	if !ro.SerializePulls || ro.Credentials.(*docker.ConfigFileCredentials).Path != "/x.json" || ro.Used != nil {
		t.Errorf("runner image options: %+v", ro)
	}
}

func testFacts() *node.Facts {
	return &node.Facts{
		Hostname: "box", MachineID: "m-1", BootID: "b-1", KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12",
		Architecture: "amd64", CPUs: 4, MemoryBytes: 8 << 30,
		Filesystems: []node.Filesystem{{Use: "root-dir", Path: "/var/lib/podrun", Device: "/dev/vda", CapacityBytes: 100 << 30, AvailableBytes: 25 << 30}},
	}
}

func TestInfo(t *testing.T) {
	var got *infoOptions
	build := func(g *globalOptions) *cobra.Command {
		return newInfoCmd(g, func(_ context.Context, o *infoOptions) error { got = o; return nil })
	}
	if err := parse(t, build, "info", "-o", "json"); err != nil || got.Output != "json" || got.Facts == nil {
		t.Fatalf("parse: %v, %+v", err, got)
	}
	if err := parse(t, build, "info", "-o", "xml"); exitCode(err) != exitBadInput {
		t.Errorf("-o xml: %v", err)
	}

	run := func(format string, facts *node.Facts, ferr error) (string, string, error) {
		var out, errOut bytes.Buffer
		err := infoRun(context.Background(), &infoOptions{
			globalOptions: &globalOptions{Out: &out, ErrOut: &errOut}, Output: format,
			Facts: func(context.Context) (*node.Facts, error) { return facts, ferr },
		})
		return out.String(), errOut.String(), err
	}
	out, _, err := run("table", testFacts(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "OOM SCORES    <none>") {
		t.Errorf("table without an OOM probe:\n%s", out)
	}
	for _, want := range []string{"HOSTNAME      box", "MACHINE ID    m-1", "BOOT ID       b-1", "CPUS          4",
		"MEMORY        8GiB", "SYSTEM UUID   <none>", "root-dir    /var/lib/podrun  /dev/vda  100GiB  25GiB      75%"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = run("json", testFacts(), nil)
	var back node.Facts
	if err := json.Unmarshal([]byte(out), &back); err != nil || back.MachineID != "m-1" || back.Filesystems[0].AvailableBytes != 25<<30 {
		t.Errorf("json: %v\n%s", err, out)
	}
	out, _, _ = run("yaml", testFacts(), nil)
	if !strings.Contains(out, "machineID: m-1") || !strings.Contains(out, "use: root-dir") {
		t.Errorf("yaml:\n%s", out)
	}
	// Some facts missing: shown, with a warning.
	_, errOut, err := run("table", testFacts(), errors.New("machine info: no /proc/cpuinfo"))
	if err != nil || !strings.Contains(errOut, "some facts are missing") {
		t.Errorf("partial facts: %v, %q", err, errOut)
	}
	if _, _, err := run("table", nil, errors.New("nothing")); err == nil {
		t.Error("no facts: nil error")
	}
}

// TestInfoOOM: info says whether podrun may give the kubelet's negative
// oom_score_adj, and what it gives instead.
func TestInfoOOM(t *testing.T) {
	for _, tc := range []struct {
		p    node.OOMProtection
		want []string
	}{
		{node.OOMProtection{CanLower: true, Own: 0}, []string{"OOM SCORES    the kubelet's (Guaranteed and node-critical -997", `"canLower": true`}},
		{node.OOMProtection{Own: 0, Reason: "cannot lower oom_score_adj below its own 0 (no CAP_SYS_RESOURCE)"},
			[]string{"OOM SCORES    not below 0, podrun's own", "no CAP_SYS_RESOURCE", `"canLower": false`, `"own": 0`}},
	} {
		var all string
		for _, format := range []string{"table", "json"} {
			var out, errOut bytes.Buffer
			err := infoRun(context.Background(), &infoOptions{
				globalOptions: &globalOptions{Out: &out, ErrOut: &errOut}, Output: format,
				Facts: func(context.Context) (*node.Facts, error) { return testFacts(), nil },
				OOM:   func() node.OOMProtection { return tc.p },
			})
			if err != nil {
				t.Fatal(err)
			}
			all += out.String()
		}
		for _, want := range tc.want {
			if !strings.Contains(all, want) {
				t.Errorf("%+v: output lacks %q:\n%s", tc.p, want, all)
			}
		}
	}
}
