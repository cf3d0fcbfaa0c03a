package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/client"
)

// live is what a benchmark or chaos run has going now: what an interrupt
// must stop and remove, so that a run killed midway (SIGTERM, ^C) leaves
// nothing behind.
var live struct {
	mu       sync.Mutex
	nodes    map[string]bool
	procs    map[*Proc]bool
	cleanups map[*func()]bool
}

// TrackNode records that node's containers are to be removed on an
// interrupt; the returned function forgets it (once it is cleaned up).
func TrackNode(node string) func() {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.nodes == nil {
		live.nodes = map[string]bool{}
	}
	live.nodes[node] = true
	return func() {
		live.mu.Lock()
		delete(live.nodes, node)
		live.mu.Unlock()
	}
}

// OnInterrupt records f to run on an interrupt (after the processes are
// stopped and the nodes cleaned); the returned function forgets it.
func OnInterrupt(f func()) func() {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.cleanups == nil {
		live.cleanups = map[*func()]bool{}
	}
	live.cleanups[&f] = true
	return func() {
		live.mu.Lock()
		delete(live.cleanups, &f)
		live.mu.Unlock()
	}
}

func trackProc(p *Proc) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.procs == nil {
		live.procs = map[*Proc]bool{}
	}
	live.procs[p] = true
	go func() {
		<-p.Done()
		live.mu.Lock()
		delete(live.procs, p)
		live.mu.Unlock()
	}()
}

// CleanUpOnInterrupt makes SIGINT and SIGTERM stop the podruns started
// (Podrun.Start), remove the tracked nodes' containers, run the OnInterrupt
// functions, and exit with status 130.
func CleanUpOnInterrupt(cli *client.Client) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "\n%s: stopping podrun and removing what this run made\n", sig)
		live.mu.Lock()
		var procs []*Proc
		for p := range live.procs {
			procs = append(procs, p)
		}
		var nodes []string
		for n := range live.nodes {
			nodes = append(nodes, n)
		}
		var fs []func()
		for f := range live.cleanups {
			fs = append(fs, *f)
		}
		live.mu.Unlock()
		for _, p := range procs {
			p.Kill()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, n := range nodes {
			if err := Cleanup(ctx, cli, n); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		for _, f := range fs {
			f()
		}
		os.Exit(130)
	}()
}
