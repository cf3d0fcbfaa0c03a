package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Labels podrun's Docker engine puts on the containers of a pod
// (engine/docker), by which the cluster test finds them.
const (
	labelNode          = "io.podrun.node"
	labelPodUID        = "io.podrun.pod.uid"
	labelPodName       = "io.podrun.pod.name"
	labelPodNamespace  = "io.podrun.pod.namespace"
	labelContainerName = "io.podrun.container.name"
	labelContainerType = "io.podrun.container.type"
)

// cluster is the kubeadm test's cluster as its later steps use it.
type cluster struct {
	e         *env
	cs        kubernetes.Interface
	rc        *rest.Config
	admin     string // admin.conf
	kubectl   string // binary
	podrunLog string
	// privileged says whether this machine's Docker can start privileged
	// containers (privilegedContainersWork).
	privileged bool
}

// waitUntil polls f every second for at most d and fails the test with
// what and f's last state if it never says ok.
func waitUntil(t *testing.T, d time.Duration, what string, f func() (ok bool, state string)) {
	t.Helper()
	var last string
	if !poll(d, func() bool {
		var ok bool
		ok, last = f()
		return ok
	}) {
		t.Fatalf("%s: not after %s: %s", what, d, last)
	}
}

// containersOf lists the node's containers (sandboxes included) that carry
// every label (key=value) given.
func (c *cluster) containersOf(t *testing.T, labels ...string) []container.Summary {
	t.Helper()
	args := filters.NewArgs(filters.Arg("label", labelNode+"="+c.e.node))
	for _, l := range labels {
		args.Add("label", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Fatalf("list the node's containers: %v", err)
	}
	return list
}

// podContainers are the containers of the pod with this UID (the API's
// UID for an API pod).
func (c *cluster) podContainers(t *testing.T, uid string) []container.Summary {
	t.Helper()
	return c.containersOf(t, labelPodUID+"="+uid)
}

// runningApp returns the running app container of the given name among
// list, or nil.
func runningApp(list []container.Summary, name string) *container.Summary {
	for i := range list {
		c := &list[i]
		if c.Labels[labelContainerType] != "sandbox" && c.Labels[labelContainerName] == name && c.State == container.StateRunning {
			return c
		}
	}
	return nil
}

// describeContainers names each container (pod/container type state id)
// for failure messages.
func describeContainers(list []container.Summary) string {
	if len(list) == 0 {
		return "no containers"
	}
	var out []string
	for _, c := range list {
		out = append(out, fmt.Sprintf("%s/%s %s %s %s", c.Labels[labelPodName], c.Labels[labelContainerName],
			c.Labels[labelContainerType], c.State, shortID(c.ID)))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "docker://")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// podState sums up a pod's API status for failure messages.
func podState(p *v1.Pod) string {
	s := fmt.Sprintf("%s uid %s phase %q podIP %q", p.Name, p.UID, p.Status.Phase, p.Status.PodIP)
	if p.DeletionTimestamp != nil {
		s += " (being deleted)"
	}
	for _, c := range p.Status.ContainerStatuses {
		s += fmt.Sprintf("; %s restarts %d id %s", c.Name, c.RestartCount, shortID(c.ContainerID))
		switch {
		case c.State.Running != nil:
			s += " running"
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" waiting %s: %s", c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" terminated %s (%d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		}
	}
	if len(p.Status.ContainerStatuses) == 0 {
		for _, cond := range p.Status.Conditions {
			if cond.Status != v1.ConditionTrue && cond.Message != "" {
				s += fmt.Sprintf("; %s: %s", cond.Type, cond.Message)
			}
		}
	}
	return s
}

// containerStatus returns the pod's status of container name, or nil.
func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// waitServiceAccount waits for the service account the controller manager
// makes in each namespace: the apiserver refuses a pod whose service
// account does not exist yet.
func (c *cluster) waitServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	waitUntil(t, time.Minute, "service account "+ns+"/"+name, func() (bool, string) {
		_, err := c.cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// createRunningPod creates pod in the API and waits, for at most d, until
// it is Running there with every container running, and its containers
// run in Docker; it returns the API's pod.
func (c *cluster) createRunningPod(t *testing.T, pod *v1.Pod, d time.Duration) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	created, err := c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	var p *v1.Pod
	waitUntil(t, d, "pod "+pod.Namespace+"/"+pod.Name+" Running in the API and in Docker", func() (bool, string) {
		p, err = c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		list := c.podContainers(t, string(created.UID))
		for _, ctr := range pod.Spec.Containers {
			s := containerStatus(p, ctr.Name)
			if p.Status.Phase != v1.PodRunning || s == nil || s.State.Running == nil || runningApp(list, ctr.Name) == nil {
				return false, podState(p) + "; docker: " + describeContainers(list)
			}
		}
		return true, ""
	})
	return p
}

// nodeAPIGet GETs path of the node API on the node's address, with tlsCfg
// (nil: no client certificate, no server verification) and, unless empty,
// a bearer token. It returns the status code and the body.
func nodeAPIGet(path string, tlsCfg *tls.Config, token string) (int, string, error) {
	if tlsCfg == nil {
		tlsCfg = &tls.Config{InsecureSkipVerify: true}
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(clusterNodeIP, "10250")+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// adminTLS is admin.conf's client certificate, without verification of
// the node API's (self-signed) serving certificate.
func (c *cluster) adminTLS(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := rest.TLSConfigFor(c.rc)
	if err != nil || cfg == nil {
		t.Fatalf("admin.conf's TLS config: %v", err)
	}
	cfg = cfg.Clone()
	cfg.RootCAs, cfg.InsecureSkipVerify = nil, true
	return cfg
}

// runKubectl runs kubectl as admin, bounded in time.
func (c *cluster) runKubectl(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.admin, "--request-timeout=20s"}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// podrunLogLines are the lines of podrun's log that hold every one of
// subs, the last n of them.
func (c *cluster) podrunLogLines(n int, subs ...string) string {
	b, _ := os.ReadFile(c.podrunLog)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all && l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// refused reports whether nothing listens on addr.
func refused(addr string) (bool, string) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		conn.Close()
		return false, addr + " accepts connections"
	}
	return errors.Is(err, syscall.ECONNREFUSED), err.Error()
}

// healthzOK reports whether podrun's /healthz answers 200.
func healthzOK() (bool, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:10248/healthz")
	if err != nil {
		return false, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status + ": " + strings.TrimSpace(string(body))
}

// apiserverReady reports whether the apiserver's /readyz says ok.
func (c *cluster) apiserverReady() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return false, err.Error()
	}
	return strings.TrimSpace(string(b)) == "ok", string(b)
}

// moveFile renames src to dst, or copies and removes it across file
// systems (the test's temp dir may be on another one than /etc).
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	if err := os.WriteFile(tmp, b, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(src)
}

// privilegedContainersWork reports whether this machine's Docker starts a
// privileged container (kubeadm's kube-proxy is one). It cannot where
// podrun itself runs with a capability bounding set smaller than what
// Docker grants a privileged container: runc fails with "unable to apply
// caps", for the kubelet as for podrun. The probe container is the test's
// own, removed at once.
func privilegedContainersWork(t *testing.T) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := docker.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"true"}},
		&container.HostConfig{Privileged: true, NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create a privileged probe container: %v", err)
	}
	defer docker.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	if err := docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// kubeProxyRuns checks an API pod of kube-proxy's DaemonSet: Running with
// the node's IP (hostNetwork), its sandbox running in Docker, and, where
// privileged containers can run, its container running in the API and in
// Docker.
func (c *cluster) kubeProxyRuns(t *testing.T, p *v1.Pod, privileged bool) (bool, string) {
	t.Helper()
	l := c.podContainers(t, string(p.UID))
	state := podState(p) + "; docker: " + describeContainers(l)
	if p.Status.Phase != v1.PodRunning || p.Status.PodIP != clusterNodeIP || p.DeletionTimestamp != nil {
		return false, state
	}
	sandbox := false
	for _, ct := range l {
		sandbox = sandbox || ct.Labels[labelContainerType] == "sandbox" && ct.State == container.StateRunning
	}
	if !sandbox {
		return false, state
	}
	if privileged {
		s := containerStatus(p, "kube-proxy")
		if s == nil || s.State.Running == nil || runningApp(l, "kube-proxy") == nil {
			return false, state
		}
	}
	return true, state
}

// deleteAndWaitGone deletes pod in the API with the client's default grace
// (the pod's terminationGracePeriodSeconds) and waits until its containers
// are removed, within that grace period and some slack (for the watch,
// podrun's sync and Docker), then until the API object and the pod's
// directory are gone.
func (c *cluster) deleteAndWaitGone(t *testing.T, pod *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods(pod.Namespace)
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	start := time.Now()
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	uid := string(pod.UID)
	waitUntil(t, grace+15*time.Second, fmt.Sprintf("containers of the deleted %s removed within its grace period %s", pod.Name, grace), func() (bool, string) {
		l := c.podContainers(t, uid)
		return len(l) == 0, describeContainers(l)
	})
	t.Logf("containers of %s removed %s after the delete (grace %s)", pod.Name, time.Since(start).Round(100*time.Millisecond), grace)
	podDir := filepath.Join(c.e.root, "pods", uid)
	waitUntil(t, 30*time.Second, "the deleted "+pod.Name+" gone from the API and its pod directory removed", func() (bool, string) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case err == nil && p.UID == pod.UID:
			return false, "in the API: " + podState(p)
		case err != nil && !apierrors.IsNotFound(err):
			return false, err.Error()
		case fileExists(podDir):
			return false, podDir + " is still there"
		}
		return true, ""
	})
	t.Logf("%s gone from the API %s after the delete", pod.Name, time.Since(start).Round(100*time.Millisecond))
}
