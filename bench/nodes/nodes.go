// Package nodes is the benchmark of podrun as a cluster's node agent at
// scale: many `podrun watch --kubeconfig` processes (distinct node names,
// no pods) against one real kube-apiserver and etcd (clustertest), for a
// fixed window. It measures what the agents cost the control plane and
// whether they keep their nodes alive:
//
//   - Lease renewals: an admin watch of the Leases in kube-node-lease
//     records every renewTime; per node, the largest gap between successive
//     renewals, and how many gaps exceed the renew interval (a quarter of
//     the lease's duration) plus the lease controller's jitter and a slack.
//     A gap longer than the lease's duration is a lease that expired: the
//     node controller would have marked the node NotReady.
//   - Apiserver requests: the apiserver's audit log (every request at level
//     Metadata), grouped by user system:node:<name>, verb and resource
//     (with subresource), per node per minute of the window, and per node
//     for the warm-up before it (start, registration).
//   - The agents' own CPU and RSS, from /proc.
//
// BenchmarkNodeAgents (bench_test.go) runs it; this file holds what it
// computes, tested on its own.
package nodes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// AuditPolicy logs every request at level Metadata (who, verb, object,
// response code; no bodies), without the RequestReceived stage.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// NodeUserPrefix is the user name prefix of node credentials.
const NodeUserPrefix = "system:node:"

// Request is one apiserver request from the audit log.
type Request struct {
	User     string
	Verb     string
	Resource string // resource[/subresource], or the path of a non-resource request
	Code     int    // response code; 0 when the log has none (a watch still open)
	At       time.Time
}

type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ReadAudit parses a JSON-lines audit log into requests, one per audit ID
// (a watch logs ResponseStarted, then ResponseComplete when it ends), in
// the order they were first logged. A line that does not parse is an
// error, but a last line cut short (the apiserver still writing) is not.
func ReadAudit(r io.Reader) ([]Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var out []Request
	index := map[string]int{}
	var pending error
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if pending != nil {
			return nil, pending
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			pending = fmt.Errorf("audit log line %d: %w", n, err)
			continue
		}
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		if i, ok := index[e.AuditID]; ok && e.AuditID != "" {
			if code != 0 {
				out[i].Code = code
			}
			continue
		}
		res := e.RequestURI
		if i := strings.IndexByte(res, '?'); i >= 0 {
			res = res[:i]
		}
		if e.ObjectRef != nil && e.ObjectRef.Resource != "" {
			res = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
		}
		index[e.AuditID] = len(out)
		out = append(out, Request{User: e.User.Username, Verb: e.Verb, Resource: res, Code: code, At: e.RequestReceivedTimestamp})
	}
	return out, sc.Err()
}

// ReadAuditFile is ReadAudit of a file.
func ReadAuditFile(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAudit(f)
}

// Count is the requests of one verb and resource.
type Count struct {
	Verb, Resource string
	N              int // requests
	Errors         int // of them, answered with a code >= 400
}

// Key is "verb resource".
func (c Count) Key() string { return c.Verb + " " + c.Resource }

// Tally is the requests of a set of nodes in a time window.
type Tally struct {
	Counts  []Count        // by verb and resource, most first
	PerNode map[string]int // node name -> requests
	Total   int
	Errors  int
	// ErrorCodes counts the error responses by "verb resource code".
	ErrorCodes map[string]int
}

// CountNodes tallies the requests made by the users system:node:<n> for n
// in nodes, received in [from, to).
func CountNodes(reqs []Request, nodes []string, from, to time.Time) Tally {
	want := map[string]string{}
	for _, n := range nodes {
		want[NodeUserPrefix+n] = n
	}
	t := Tally{PerNode: map[string]int{}, ErrorCodes: map[string]int{}}
	for _, n := range nodes {
		t.PerNode[n] = 0
	}
	by := map[string]*Count{}
	for _, r := range reqs {
		node, ok := want[r.User]
		if !ok || r.At.Before(from) || !r.At.Before(to) {
			continue
		}
		k := r.Verb + " " + r.Resource
		c := by[k]
		if c == nil {
			c = &Count{Verb: r.Verb, Resource: r.Resource}
			by[k] = c
		}
		c.N++
		t.Total++
		t.PerNode[node]++
		if r.Code >= 400 {
			c.Errors++
			t.Errors++
			t.ErrorCodes[fmt.Sprintf("%s %d", k, r.Code)]++
		}
	}
	for _, c := range by {
		t.Counts = append(t.Counts, *c)
	}
	sort.Slice(t.Counts, func(i, j int) bool {
		if t.Counts[i].N != t.Counts[j].N {
			return t.Counts[i].N > t.Counts[j].N
		}
		return t.Counts[i].Key() < t.Counts[j].Key()
	})
	return t
}

// Users counts every request received in [from, to) by user, for a look
// at who else loaded the apiserver.
func Users(reqs []Request, from, to time.Time) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if !r.At.Before(from) && r.At.Before(to) {
			out[r.User]++
		}
	}
	return out
}

// LeaseGaps is one node's Lease renewals in a window.
type LeaseGaps struct {
	Node     string
	Renewals int           // renewals in the window
	Max      time.Duration // largest gap, the open one at the window's end included
	Over     int           // gaps over the threshold
	Late     int           // gaps over the lease's duration: an expired lease
	Gaps     []time.Duration
}

// Gaps computes one node's gaps between successive distinct renewTimes
// inside [from, to]: the last renewal before from (if any) starts the
// first gap (without one, the window's start does), and the time from the
// last renewal to `to` counts as a gap too (an agent that stopped renewing
// shows there). A node with no renewal at all before `to` has one gap, the
// whole window.
func Gaps(node string, renewals []time.Time, from, to time.Time, over, late time.Duration) LeaseGaps {
	rs := slices.Clone(renewals)
	slices.SortFunc(rs, func(a, b time.Time) int { return a.Compare(b) })
	rs = slices.CompactFunc(rs, func(a, b time.Time) bool { return a.Equal(b) })
	g := LeaseGaps{Node: node}
	prev := time.Time{}
	for _, r := range rs {
		if r.After(to) {
			break
		}
		if r.Before(from) {
			prev = r
			continue
		}
		g.Renewals++
		if prev.IsZero() {
			prev = from
		}
		g.Gaps = append(g.Gaps, r.Sub(prev))
		prev = r
	}
	if prev.IsZero() {
		prev = from
	}
	open := to.Sub(prev)
	for _, d := range append(slices.Clone(g.Gaps), open) {
		g.Max = max(g.Max, d)
		if d > over {
			g.Over++
		}
		if d > late {
			g.Late++
		}
	}
	return g
}

// Percentile returns the p-th percentile (0-100, nearest rank) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Summary of a set of values: mean and max.
type Summary struct {
	Mean, Max float64
}

// Summarize returns the mean and max of vs.
func Summarize(vs []float64) Summary {
	var s Summary
	if len(vs) == 0 {
		return s
	}
	for _, v := range vs {
		s.Mean += v
		s.Max = max(s.Max, v)
	}
	s.Mean /= float64(len(vs))
	return s
}
