package node

import (
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
