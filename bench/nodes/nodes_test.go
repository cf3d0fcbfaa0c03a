package nodes

import (
	"strings"
	"testing"
	"time"
)

const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1?timeout=10s","verb":"update","user":{"username":"system:node:n1","groups":["system:nodes","system:authenticated"]},"objectRef":{"resource":"leases","namespace":"kube-node-lease","name":"n1","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:10.000000Z","stageTimestamp":"2026-01-01T00:00:10.004000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/api/v1/pods?fieldSelector=spec.nodeName%3Dn1\u0026watch=true","verb":"watch","user":{"username":"system:node:n1"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:20.000000Z","stageTimestamp":"2026-01-01T00:00:20.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"s1","stage":"ResponseComplete","requestURI":"/api/v1/nodes/n2/status","verb":"update","user":{"username":"system:node:n2"},"objectRef":{"resource":"nodes","name":"n2","subresource":"status","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":409},"requestReceivedTimestamp":"2026-01-01T00:00:30.000000Z","stageTimestamp":"2026-01-01T00:00:30.002000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"h1","stage":"ResponseComplete","requestURI":"/readyz","verb":"get","user":{"username":"kubernetes-admin"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:31.000000Z","stageTimestamp":"2026-01-01T00:00:31.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","requestURI":"/api/v1/pods?fieldSelector=spec.nodeName%3Dn1\u0026watch=true","verb":"watch","user":{"username":"system:node:n1"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:20.000000Z","stageTimestamp":"2026-01-01T00:09:20.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","lev`

func TestReadAuditOneRequestPerID(t *testing.T) {
	reqs, err := ReadAudit(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 {
		t.Fatalf("got %d requests, want 4 (the watch once, the cut last line ignored): %+v", len(reqs), reqs)
	}
	want := []Request{
		{User: "system:node:n1", Verb: "update", Resource: "leases", Code: 200},
		{User: "system:node:n1", Verb: "watch", Resource: "pods", Code: 200},
		{User: "system:node:n2", Verb: "update", Resource: "nodes/status", Code: 409},
		{User: "kubernetes-admin", Verb: "get", Resource: "/readyz", Code: 200},
	}
	for i, w := range want {
		g := reqs[i]
		if g.User != w.User || g.Verb != w.Verb || g.Resource != w.Resource || g.Code != w.Code {
			t.Errorf("request %d = %+v, want %+v", i, g, w)
		}
	}
	if at := reqs[1].At; !at.Equal(time.Date(2026, 1, 1, 0, 0, 20, 0, time.UTC)) {
		t.Errorf("the watch is timed at %s, want when it was received", at)
	}
}

func TestReadAuditBadLineInTheMiddle(t *testing.T) {
	_, err := ReadAudit(strings.NewReader("{\"auditID\":\"x\"}\nnot json\n{\"auditID\":\"y\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
}

func TestCountNodes(t *testing.T) {
	reqs, err := ReadAudit(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC)
	to := from.Add(time.Minute)
	tl := CountNodes(reqs, []string{"n1", "n2", "n3"}, from, to)
	if tl.Total != 2 || tl.Errors != 1 {
		t.Fatalf("total %d errors %d, want 2 and 1 (the lease update is before the window, the admin is no node)", tl.Total, tl.Errors)
	}
	if tl.PerNode["n1"] != 1 || tl.PerNode["n2"] != 1 || tl.PerNode["n3"] != 0 {
		t.Errorf("per node %v", tl.PerNode)
	}
	if tl.ErrorCodes["update nodes/status 409"] != 1 {
		t.Errorf("error codes %v", tl.ErrorCodes)
	}
	keys := []string{tl.Counts[0].Key(), tl.Counts[1].Key()}
	if keys[0] != "update nodes/status" || keys[1] != "watch pods" {
		t.Errorf("counts %v, want ties sorted by key", keys)
	}
}

func TestGaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	from, to := at(100), at(160)
	over, late := 12*time.Second, 40*time.Second

	// Every 10 s, the one before the window starting the first gap, a
	// duplicate (a relist's update) ignored.
	g := Gaps("n", []time.Time{at(95), at(105), at(115), at(115), at(125), at(135), at(145), at(155)}, from, to, over, late)
	if g.Renewals != 6 || len(g.Gaps) != 6 || g.Max != 10*time.Second || g.Over != 0 || g.Late != 0 {
		t.Errorf("regular: %+v", g)
	}

	// A 15 s gap is over the interval, a 45 s one is late.
	g = Gaps("n", []time.Time{at(98), at(113), at(158)}, from, to, over, late)
	if g.Max != 45*time.Second || g.Over != 2 || g.Late != 1 {
		t.Errorf("gaps: %+v", g)
	}

	// An agent that stopped renewing: the open gap to the window's end.
	g = Gaps("n", []time.Time{at(90), at(101)}, from, to, over, late)
	if g.Max != 59*time.Second || g.Late != 1 {
		t.Errorf("stopped: %+v", g)
	}

	// Renewals after the window are not looked at.
	g = Gaps("n", []time.Time{at(150), at(170)}, from, to, over, late)
	if g.Renewals != 1 || g.Max != 50*time.Second {
		t.Errorf("after: %+v", g)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if p := Percentile(ds, 50); p != 3 {
		t.Errorf("p50 = %d", p)
	}
	if p := Percentile(ds, 99); p != 5 {
		t.Errorf("p99 = %d", p)
	}
	if p := Percentile(nil, 50); p != 0 {
		t.Errorf("empty = %d", p)
	}
}
