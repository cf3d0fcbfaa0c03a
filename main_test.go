package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildTags are the tags podrun is built with (Makefile's GO_TAGS).
const buildTags = "grpcnotrace"

// TestLinkerPrunesUnusedMethods guards podrun's memory: when any reachable
// function may call a method found by name at run time (reflect's
// Value.Method or MethodByName with a computed name, as text/template
// does), the linker keeps every exported method of every type linked.
// With k8s.io/api and client-go linked that is 30 MB of binary and about
// 9 MiB of RSS in `podrun watch` and in every built-in pause container
// (docs/memory.md). The linker marks such functions <ReflectMethod> in its
// -dumpdep output; there must be none.
func TestLinkerPrunesUnusedMethods(t *testing.T) {
	out := filepath.Join(t.TempDir(), "podrun")
	cmd := exec.Command("go", "build", "-tags", buildTags, "-ldflags=-dumpdep", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var deps, stdout bytes.Buffer
	cmd.Stderr, cmd.Stdout = &deps, &stdout
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%s%s", err, stdout.String(), tail(deps.String(), 2000))
	}
	if chain := reflectMethodChain(deps.Bytes()); chain != nil {
		t.Errorf("the linker keeps every exported method: %s calls a method by a computed name; reached by\n  %s",
			chain[0], strings.Join(chain[1:], "\n  "))
	}
}

// TestClientsetNotLinked guards podrun's memory: client-go's clientset,
// and every typed client it is made of, links
// k8s.io/client-go/kubernetes/scheme, whose init registers all ~60 API
// groups in every podrun process (about 7 MiB of RSS, docs/memory.md).
// Cluster mode talks to the apiserver through package kubeclient instead.
func TestClientsetNotLinked(t *testing.T) {
	cmd := exec.Command("go", "list", "-tags", buildTags, "-deps", "-f", "{{.ImportPath}}", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "k8s.io/client-go/kubernetes" || strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/") {
			t.Errorf("podrun links %s; use package kubeclient (see docs/memory.md)", pkg)
		}
	}
}

// reflectMethodChain reads the linker's -dumpdep output ("from -> to" per
// line, a function that looks methods up by name marked <ReflectMethod>)
// and returns the first such function followed by the functions that reach
// it, nearest first; nil when there is none.
func reflectMethodChain(dump []byte) []string {
	const mark = " <ReflectMethod>"
	callers := map[string]string{} // to -> one from
	var marked string
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		if marked == "" && strings.HasSuffix(from, mark) {
			marked = strings.TrimSuffix(from, mark)
		}
		from, to = strings.TrimSuffix(from, mark), strings.TrimSuffix(to, mark)
		if _, seen := callers[to]; !seen {
			callers[to] = from
		}
	}
	if marked == "" {
		return nil
	}
	chain := []string{marked}
	for f, ok := callers[marked]; ok && len(chain) < 30 && !slices.Contains(chain, f); f, ok = callers[f] {
		chain = append(chain, f)
	}
	return chain
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func TestReflectMethodChain(t *testing.T) {
	dump := strings.Join([]string{
		"go:main.inittasks -> x/trace..inittask",
		"x/trace..inittask -> x/trace.init.0",
		"x/trace.init.0 -> text/template.(*Template).execute",
		"text/template.(*Template).execute -> text/template.(*state).evalField <ReflectMethod>",
		"text/template.(*state).evalField <ReflectMethod> -> reflect.Value.MethodByName",
		"other.f -> text/template.(*Template).execute",
	}, "\n")
	got := reflectMethodChain([]byte(dump))
	want := []string{"text/template.(*state).evalField", "text/template.(*Template).execute",
		"x/trace.init.0", "x/trace..inittask", "go:main.inittasks"}
	if !slices.Equal(got, want) {
		t.Errorf("chain = %q, want %q", got, want)
	}
	if got := reflectMethodChain([]byte("a -> b\nb -> c\n")); got != nil {
		t.Errorf("chain without a mark = %q, want none", got)
	}
}
