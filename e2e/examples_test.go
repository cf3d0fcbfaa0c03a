package e2e

// The README's first steps, on the bundled examples as hack/run-example.sh
// runs them: once, the page, logs, ps and down.

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestBundledExamples: examples/web.yaml and examples/job.yaml, on a free
// host port instead of 8080, do what the README says a new user sees:
// once brings them up, the page is served, `logs web` needs no -c (one
// app container beside the init one), ps read from Docker reports the
// finished job Succeeded, and the web container stops on SIGTERM (httpd as
// PID 1 would ignore it and wait out the 30 s grace period).
func TestBundledExamples(t *testing.T) {
	e := newEnv(t)
	port := strconv.Itoa(freePort(t))
	for _, name := range []string{"web.yaml", "job.yaml"} {
		b, err := os.ReadFile("../examples/" + name)
		if err != nil {
			t.Fatal(err)
		}
		e.write(name, strings.ReplaceAll(string(b), "8080", port))
	}
	if r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "the page", httpGet(t, "http://127.0.0.1:"+port+"/"), "Hello from web-"+e.node)

	// httpd -v logs the request on its stderr, which podrun logs prints
	// on standard output as kubectl does; Docker may write it a moment
	// later.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.podrun(time.Minute, "logs", "web")
		if r.code != 0 {
			t.Fatalf("logs web: exit %d\n%s", r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "response:200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs web: no request logged:\n%s%s", r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The wait for running may end before the job's sandbox is stopped;
	// waiting for it to complete settles that.
	if r := e.podrun(3*time.Minute, "once", e.dir+"/job.yaml", "--wait", "complete", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("once --wait complete: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := e.podrun(time.Minute, "ps", "-o", "json", "--daemon=false")
	var list v1.PodList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("ps -o json: exit %d, %v\n%s", r.code, err, r.stderr)
	}
	for _, p := range list.Items {
		if p.Name == "job-"+e.node && p.Status.Phase != v1.PodSucceeded {
			t.Errorf("ps -o json: the job is %s, want Succeeded", p.Status.Phase)
		}
	}

	// The web container stops on SIGTERM alone (httpd as PID 1 would
	// ignore it, and every stop would wait out the 30 s grace period):
	// sent by hand, it exits 0 from the shell's trap, not 137 from a
	// SIGKILL that never came.
	web := e.running()["web/httpd"]
	if web == "" {
		t.Fatalf("no running web/httpd container: %v", e.running())
	}
	if err := docker.ContainerKill(context.Background(), web, "TERM"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the web container to exit on SIGTERM", 2*time.Minute, func() bool {
		info, err := docker.ContainerInspect(context.Background(), web)
		return err == nil && !info.State.Running && exitedZero(t, info.State.ExitCode)
	})

	if r := e.podrun(3*time.Minute, "down", e.dir); r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	if n := len(e.containers()); n != 0 {
		t.Errorf("%d containers left after down", n)
	}
}

// exitedZero fails the test on a non-zero exit code.
func exitedZero(t *testing.T, code int) bool {
	t.Helper()
	if code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	return true
}
