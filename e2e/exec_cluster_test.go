package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/podrun/podrun/clustertest"
)

// TestClusterKubectlExec: `kubectl exec` into a podrun pod goes through a
// real kube-apiserver to podrun's node API and into the Docker container:
// stdout, stderr and the exit code come back (kubectl exits with the
// command's code), stdin reaches the command (and its end ends it), and
// the conformance spec's WebSocket exec (channel.k8s.io, which the
// apiserver passes through to the node) gets the output on channel 1.
func TestClusterKubectlExec(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	e := newEnv(t)
	e.write("exec.yaml", securityPod("exec", "Always", "echo container is alive; sleep 3600", "", ""))
	kubeconfig, _ := c.NodeKubeconfig(t, e.node)
	_, stop := e.watchWithServer("--kubeconfig", kubeconfig, "--address", "127.0.0.1", "--port", strconv.Itoa(freePort(t)),
		"--node-ip", "127.0.0.1", "--client-ca-file", c.CAFile)
	defer stop(syscall.SIGTERM)

	name := "exec-" + e.node
	cs := c.Client(t)
	ctx := context.Background()
	waitFor(t, "the mirror pod running in the API", 2*time.Minute, func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})

	kubectl := clustertest.Binary(t, "kubectl")
	run := func(stdin string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.AdminKubeconfig, "-n", "default"}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("kubectl %q: %v", args, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}

	out, errOut, code := run("", "exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
		t.Errorf("kubectl exec -- sh -c 'echo out; echo err >&2; exit 3': exit %d, stdout %q, stderr %q; want 3, \"out\\n\", \"err\\n\"", code, out, errOut)
	}
	out, errOut, code = run("from stdin\n", "exec", "-i", name, "--", "cat")
	if code != 0 || out != "from stdin\n" {
		t.Errorf("kubectl exec -i -- cat: exit %d, stdout %q, stderr %q; want 0, \"from stdin\\n\"", code, out, errOut)
	}

	// As the conformance spec: a channel.k8s.io WebSocket to the apiserver.
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}, "command": {"echo", "remote execution test"}}
	u := strings.Replace(c.URL, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/" + name + "/exec?" + q.Encode()
	wsCfg, err := websocket.NewConfig(u, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	wsCfg.Protocol = []string{"channel.k8s.io"}
	if wsCfg.TlsConfig, err = rest.TLSConfigFor(c.Admin); err != nil {
		t.Fatal(err)
	}
	ws, err := websocket.DialConfig(wsCfg)
	if err != nil {
		t.Fatalf("websocket exec through the apiserver: %v", err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(time.Minute))
	var stdout bytes.Buffer
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("websocket exec: %v", err)
		}
		if len(msg) > 1 {
			if msg[0] != 1 {
				t.Errorf("websocket exec: a message on channel %d: %q", msg[0], msg[1:])
				continue
			}
			stdout.Write(msg[1:])
		}
	}
	if stdout.String() != "remote execution test\n" {
		t.Errorf("websocket exec: stdout %q, want \"remote execution test\\n\"", stdout.String())
	}
}
