package node

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseResolvConfAsTheKubelet(t *testing.T) {
	got, err := parseResolvConf(strings.NewReader(`# generated
nameserver 10.0.0.1
search old.example
nameserver 10.0.0.2 ignored
; a comment
search corp.example example
options ndots:2 edns0
options ndots:3
nameserver
`))
	if err != nil {
		t.Fatal(err)
	}
	want := ResolvConf{Servers: []string{"10.0.0.1", "10.0.0.2"}, Searches: []string{"corp.example", "example"},
		Options: []string{"edns0", "ndots:3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestHostResolvConfBehindSystemdResolved: where /etc/resolv.conf names
// only systemd-resolved's stub, the upstream servers are the host's, as
// Docker and kubeadm take them.
func TestHostResolvConfBehindSystemdResolved(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stub := write("stub", "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n")
	plain := write("plain", "nameserver 10.0.0.1\n")
	upstream := write("upstream", "nameserver 10.0.0.53\nsearch lan\n")
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		main, resolved string
		want           []string
	}{
		{stub, upstream, []string{"10.0.0.53"}},
		{stub, missing, []string{"127.0.0.53"}},
		{plain, upstream, []string{"10.0.0.1"}},
	} {
		rc, err := readHostResolvConf(c.main, c.resolved)
		if err != nil || !reflect.DeepEqual(rc.Servers, c.want) {
			t.Errorf("%s, %s: servers %v (%v), want %v", filepath.Base(c.main), filepath.Base(c.resolved), rc.Servers, err, c.want)
		}
	}
}
