package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/go-units"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/podrun/podrun/engine"
)

// newPullProgress returns the engines' PullProgress callback that
// shows image pulls on out, and a function to call once no more pulls will
// be made (it ends the display). On a terminal each pulling image gets a
// progress bar (bytes downloaded of the layers known so far, and layers
// done); elsewhere (a log file, a pipe) a plain line when a pull starts and
// one when it is done, with its size, layer count and duration. quiet shows
// nothing: the callback is nil.
func newPullProgress(out io.Writer, quiet bool) (func(ref string, p engine.PullProgress), func()) {
	if quiet || out == nil {
		return nil, func() {}
	}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return newBarProgress(out).callbacks()
	}
	return newLineProgress(out).callbacks()
}

// pullState is what is known of one image's pull.
type pullState struct {
	start  time.Time
	layers map[string]*layerState
	order  []string
	done   bool
}

type layerState struct {
	current, total int64
	done           bool
}

// update applies one progress message and reports whether it ends the pull
// (Docker's last message: "Status: Downloaded newer image for ..." or
// "Status: Image is up to date for ...").
func (s *pullState) update(p engine.PullProgress) bool {
	if p.ID == "" {
		return strings.HasPrefix(p.Status, "Status:")
	}
	if strings.HasPrefix(p.Status, "Pulling from") {
		return false // the repository, not a layer
	}
	l := s.layers[p.ID]
	if l == nil {
		l = &layerState{}
		s.layers[p.ID] = l
		s.order = append(s.order, p.ID)
	}
	// Docker gives sizes only while downloading; the CRI engine gives
	// them in its summary too ("Pull complete" of each layer).
	l.total = max(l.total, p.Total)
	switch p.Status {
	case "Downloading":
		l.current = p.Current
	case "Download complete", "Verifying Checksum":
		l.current = l.total
	case "Pull complete", "Already exists":
		l.current = l.total
		l.done = true
	}
	return false
}

// bytes are the bytes downloaded and to download of the layers known.
func (s *pullState) bytes() (current, total int64) {
	for _, l := range s.layers {
		current += min(l.current, l.total)
		total += l.total
	}
	return current, total
}

func (s *pullState) layerCounts() (done, all int) {
	for _, l := range s.layers {
		if l.done {
			done++
		}
	}
	return done, len(s.layers)
}

// lineProgress writes a line when a pull starts and when it ends.
type lineProgress struct {
	mu    sync.Mutex
	out   io.Writer
	pulls map[string]*pullState
	now   func() time.Time
}

func newLineProgress(out io.Writer) *lineProgress {
	return &lineProgress{out: out, pulls: map[string]*pullState{}, now: time.Now}
}

func (l *lineProgress) callbacks() (func(string, engine.PullProgress), func()) {
	return l.update, l.close
}

func (l *lineProgress) update(ref string, p engine.PullProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.pulls[ref]
	if s == nil || s.done {
		s = &pullState{start: l.now(), layers: map[string]*layerState{}}
		l.pulls[ref] = s
		fmt.Fprintf(l.out, "pulling image %s\n", ref)
	}
	if !s.update(p) {
		return
	}
	s.done = true
	_, total := s.bytes()
	_, layers := s.layerCounts()
	status := "pulled"
	if strings.Contains(p.Status, "up to date") {
		status = "image is up to date:"
	}
	fmt.Fprintf(l.out, "%s %s: %s in %d layers, %s\n", status, ref, units.HumanSize(float64(total)), layers,
		l.now().Sub(s.start).Round(time.Millisecond))
}

// close reports the pulls that never finished.
func (l *lineProgress) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ref, s := range l.pulls {
		if !s.done {
			fmt.Fprintf(l.out, "pull of %s did not finish\n", ref)
			s.done = true
		}
	}
}

// barProgress draws a bar per pulling image.
type barProgress struct {
	mu    sync.Mutex
	p     *mpb.Progress
	pulls map[string]*pullState
	bars  map[string]*mpb.Bar
	// counts are each bar's "done/all layers", for its decorator.
	counts map[string]*atomic.Value
}

func newBarProgress(out io.Writer, opts ...mpb.ContainerOption) *barProgress {
	return &barProgress{
		p:      mpb.New(append([]mpb.ContainerOption{mpb.WithOutput(out)}, opts...)...),
		pulls:  map[string]*pullState{},
		bars:   map[string]*mpb.Bar{},
		counts: map[string]*atomic.Value{},
	}
}

func (b *barProgress) callbacks() (func(string, engine.PullProgress), func()) {
	return b.update, b.close
}

func (b *barProgress) update(ref string, p engine.PullProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.pulls[ref]
	if s == nil || s.done {
		s = &pullState{start: time.Now(), layers: map[string]*layerState{}}
		b.pulls[ref] = s
		counts := &atomic.Value{}
		counts.Store(" 0/0 layers")
		b.counts[ref] = counts
		b.bars[ref] = b.p.AddBar(0,
			mpb.PrependDecorators(decor.Name(ref, decor.WC{C: decor.DindentRight | decor.DextraSpace})),
			mpb.AppendDecorators(
				decor.CountersKibiByte("% .1f / % .1f"),
				// Read without b.mu: the bar draws while update holds it.
				decor.Any(func(decor.Statistics) string { return counts.Load().(string) }),
			),
		)
	}
	bar := b.bars[ref]
	finished := s.update(p)
	done, all := s.layerCounts()
	b.counts[ref].Store(fmt.Sprintf(" %d/%d layers", done, all))
	current, total := s.bytes()
	if finished {
		s.done = true
		bar.SetTotal(max(total, current), true)
		return
	}
	// The total grows as layers are learnt of; it stays open until the
	// pull says it is done.
	bar.SetTotal(max(total, current+1), false)
	bar.SetCurrent(current)
}

func (b *barProgress) close() {
	b.mu.Lock()
	for ref, bar := range b.bars {
		if !b.pulls[ref].done {
			bar.Abort(false)
		}
	}
	b.mu.Unlock()
	b.p.Wait()
}
