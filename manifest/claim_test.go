package manifest

import (
	"strings"
	"testing"
)

// TestClaim is the test of podrun's one conflict rule: the merger, a
// directory's files and the CLI's arguments all go through Claim.
func TestClaim(t *testing.T) {
	withUID := func(name string) string {
		return strings.Replace(podNamed(name), "metadata:\n", "metadata:\n  uid: 0b8d3c2e-0000-4000-8000-000000000001\n", 1)
	}
	cm := func(name, value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  k: " + value + "\n"
	}
	secret := func(name string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\nstringData:\n  p: w\n"
	}
	a := mustParse(t, "/a.yaml", podNamed("web")+"---\n"+cm("conf", "from-a")+"---\n"+withUID("one"))
	b := mustParse(t, "/b.yaml", podNamed("db")+"---\n"+podNamed("web")+"---\n"+cm("conf", "from-b")+"---\n"+secret("s")+"---\n"+withUID("two"))
	c := mustParse(t, "/c.yaml", secret("s")+"---\n"+cm("other", "c"))

	got := Claim([]*Snapshot{a, nil, b, c})

	var pods []string
	for _, p := range got.Pods {
		pods = append(pods, p.Name)
	}
	if strings.Join(pods, ",") != "web-node1,one-node1,db-node1" {
		t.Errorf("pods = %v, want a's web and one, then b's db", pods)
	}
	if got.Pods[0] != a.Pods[0] {
		t.Error("Claim must return the snapshots' own objects")
	}
	if len(got.ConfigMaps) != 2 || got.ConfigMaps[0].Data["k"] != "from-a" || got.ConfigMaps[1].Name != "other" {
		t.Errorf("ConfigMaps = %v", got.ConfigMaps)
	}
	if len(got.Secrets) != 1 || got.Secrets[0] != b.Secrets[0] {
		t.Errorf("Secrets = %v, want b's", got.Secrets)
	}

	type conflict struct {
		loser, winner int
		kind, what    string
		uid           bool
		line          int
		field         string
		winnerAt      string
	}
	var conflicts []conflict
	for _, c := range got.Conflicts {
		if c.At.Source == "" || c.At.Message != "" {
			t.Errorf("conflict %q: At = %+v, want a location without a message", c.What, c.At)
		}
		conflicts = append(conflicts, conflict{c.Loser, c.Winner, c.Kind, c.What, c.UID, c.At.Line, c.At.Field, c.WinnerAt})
	}
	want := []conflict{
		{2, 0, "pod", "pod default/web", false, 13, "metadata.name", "/a.yaml:4"},
		{2, 0, "pod", "pod UID 0b8d3c2e-0000-4000-8000-000000000001", true, 37, "metadata.name", "/a.yaml:21"},
		{2, 0, "ConfigMap", "ConfigMap default/conf", false, 22, "metadata.name", "/a.yaml:13"},
		{3, 2, "Secret", "Secret default/s", false, 4, "metadata.name", "/b.yaml:29"},
	}
	if len(conflicts) != len(want) {
		t.Fatalf("conflicts = %+v\nwant %+v", conflicts, want)
	}
	for i := range want {
		if conflicts[i] != want[i] {
			t.Errorf("conflict %d = %+v\nwant %+v", i, conflicts[i], want[i])
		}
	}
	if p := got.Conflicts[0].Problem("lost"); p.Source != "/b.yaml" || p.Message != "lost" || p.Line != 13 {
		t.Errorf("Problem = %+v", p)
	}

	// The same snapshots give the same outcome, whatever came before.
	again := Claim([]*Snapshot{a, nil, b, c})
	if len(again.Pods) != len(got.Pods) || len(again.Conflicts) != len(got.Conflicts) {
		t.Error("Claim is not deterministic")
	}
	// Order is priority: b first, and b's web wins.
	if swapped := Claim([]*Snapshot{b, a}); swapped.Pods[1] != b.Pods[1] || swapped.Conflicts[0].Loser != 1 {
		t.Errorf("b first: pods %v, conflicts %+v", swapped.Pods, swapped.Conflicts)
	}
}

// TestConflictsInOneFile: within one file a kind, namespace and name is
// defined once; the same name in another kind or namespace is no conflict.
func TestConflictsInOneFile(t *testing.T) {
	cm := func(ns, name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  k: v\n"
	}
	secret := func(ns, name string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nstringData:\n  p: w\n"
	}
	docs := []string{
		cm("default", "x"), secret("default", "x"), cm("other", "x"), secret("other", "x"), podNamed("x"),
		cm("default", "x"), secret("other", "x"), // names at lines 45 and 53
	}
	snap, err := Parse("f.yaml", []byte(strings.Join(docs, "---\n")), testOptions())
	list, _ := err.(ErrorList)
	var got []string
	for _, e := range list {
		got = append(got, e.Error())
	}
	want := []string{
		"f.yaml:45: metadata.name: ConfigMap default/x conflicts with the ConfigMap defined at f.yaml:4; the first one is kept",
		"f.yaml:53: metadata.name: Secret other/x conflicts with the Secret defined at f.yaml:28; the first one is kept",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(snap.ConfigMaps) != 2 || len(snap.Secrets) != 2 || len(snap.Pods) != 1 {
		t.Errorf("kept %d ConfigMaps, %d Secrets, %d pods; want 2, 2, 1", len(snap.ConfigMaps), len(snap.Secrets), len(snap.Pods))
	}
}
