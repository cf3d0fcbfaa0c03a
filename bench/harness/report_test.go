package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Bring-up on containerd is reported beside Docker's, each against its own
// engine's bound, with issue 16's verdict.
func TestRenderBringUpOnContainerd(t *testing.T) {
	r := &Results{Config: map[string]string{"runs": "3"}, BringUp: []BringUp{
		{Subject: "podrun", Engine: engineDocker, Pods: 1, Seconds: []float64{0.5}},
		{Subject: boundDocker, Engine: engineDocker, Pods: 1, Seconds: []float64{0.4}},
		{Subject: "podrun", Engine: engineContainerd, Pods: 1, Seconds: []float64{0.33}},
		{Subject: boundCRI, Engine: engineContainerd, Pods: 1, Seconds: []float64{0.30}},
		{Subject: "podrun", Engine: engineContainerd, Pods: 10, Seconds: []float64{2.6}},
		{Subject: boundCRI, Engine: engineContainerd, Pods: 10, Seconds: []float64{2.5}},
	}}
	doc := render(r, config{command: "make bench"})
	for _, want := range []string{
		"| 1 | Docker | podrun | 0.50 | 0.50 | **1.25x** |",
		"| 1 | containerd | podrun | 0.33 | 0.33 | **1.10x** |",
		"| 10 | containerd | podrun | 2.60 | 2.60 | **1.04x** |",
		"1.10x at 1 pods, 1.04x at 10 pods in this run: within 1.2x of the CRI bound.",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "skipped") {
		t.Errorf("doc says containerd was skipped, though it was measured:\n%s", doc)
	}

	r.BringUp[4].Seconds = []float64{3.1}
	if doc := render(r, config{}); !strings.Contains(doc, "**not** within 1.2x of the CRI bound") {
		t.Errorf("10 pods at 1.24x the CRI bound: doc lacks the failed verdict:\n%s", doc)
	}
}

func TestRenderSaysContainerdWasSkipped(t *testing.T) {
	r := &Results{Config: map[string]string{}, CRISkipped: "no CRI runtime answers at unix:///x", BringUp: []BringUp{
		{Subject: "podrun", Engine: engineDocker, Pods: 1, Seconds: []float64{0.5}},
		{Subject: boundDocker, Engine: engineDocker, Pods: 1, Seconds: []float64{0.4}},
	}}
	doc := render(r, config{})
	if !strings.Contains(doc, "**Bring-up on containerd skipped:** no CRI runtime answers at unix:///x.") {
		t.Errorf("doc does not say containerd was skipped:\n%s", doc)
	}
	if strings.Contains(doc, "Verdict on containerd") {
		t.Errorf("a verdict on containerd without its figures:\n%s", doc)
	}
}

// A CRI endpoint that nothing answers is a reason to skip, not an error.
func TestConnectCRIUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, why := connectCRI(ctx, "unix://"+t.TempDir()+"/none.sock")
	if rs != nil {
		t.Fatal("connected to a socket that does not exist")
	}
	if !strings.Contains(why, "no CRI runtime answers") || !strings.Contains(why, "hack/containerd.sh") {
		t.Errorf("reason = %q, want what is missing and how to set it up", why)
	}
	if _, why := connectCRI(ctx, ""); !strings.Contains(why, "no CRI endpoint given") {
		t.Errorf("reason with no endpoint = %q", why)
	}
}

// Update reaction and idle cost on containerd have their own section, with
// the reaction's margin over containerd's own stop + create + start and
// the CPU podrun makes containerd spend.
func TestRenderContainerdUpdateAndIdle(t *testing.T) {
	r := &Results{Config: map[string]string{"update pods": "50", "steady": "1m0s"},
		CRIUpdate: []Update{{Subject: "podrun", Pods: 50, Reaction: []float64{0.40, 0.30, 0.35},
			Seen: []float64{0.42, 0.32, 0.37}, CreateStart: []float64{0.10, 0.12, 0.11}, Kill: []float64{0.05, 0.05, 0.06}}},
		CRIIdle: []CRIIdle{{Subject: "podrun", Pods: 10, CPUPercent: 0.10, RSS: 30 << 20, RuntimePerMin: 12,
			Containerd: DaemonCPU{WithPodrun: 0.50, Alone: 0.30}}},
	}
	doc := render(r, config{})
	for _, want := range []string{
		"## On containerd: update reaction and idle cost",
		"| podrun | 0.350 | 0.370 | 0.110 | 0.050 | +0.190 | 0.40 0.30 0.35 |",
		"| 10 | podrun | 0.10 | 0.50 | 0.30 | 0.30 | 30.0 | 12.0 |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
	if doc := render(&Results{Config: map[string]string{}}, config{}); strings.Contains(doc, "On containerd") {
		t.Errorf("a containerd section without its figures:\n%s", doc)
	}
}
