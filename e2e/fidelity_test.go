package e2e

// Runtime fidelity: what a pod's spec asks of its containers' world
// (hostname, /etc/hosts, resolv.conf, sysctls, volume files, mounts, hooks,
// privilege), read back from inside the containers.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// logsOf is what `podrun logs` prints of a container of a pod.
func (e *env) logsOf(namespace, pod, ctr string) string {
	e.t.Helper()
	r := e.podrun(30*time.Second, "logs", "-n", namespace, pod, "-c", ctr)
	if r.code != 0 {
		e.t.Fatalf("logs -n %s %s -c %s: exit %d\n%s", namespace, pod, ctr, r.code, r.stderr)
	}
	return r.stdout
}

// section is the part of out between the line "== name" and the next
// "== " line: the pods below print several files to one log that way.
func section(out, name string) string {
	_, rest, ok := strings.Cut(out, "== "+name+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "== "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// hostsEntries maps each name of an /etc/hosts text to its addresses.
func hostsEntries(hosts string) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(hosts))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		for _, name := range f[min(1, len(f)):] {
			out[name] = append(out[name], f[0])
		}
	}
	return out
}

// resolvConf is a resolv.conf's nameservers, search list and options.
type resolvConf struct{ servers, searches, options []string }

func parseResolvConf(s string) resolvConf {
	var rc resolvConf
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			rc.servers = append(rc.servers, f[1:]...)
		case "search":
			rc.searches = append(rc.searches, f[1:]...)
		case "options":
			rc.options = append(rc.options, f[1:]...)
		}
	}
	return rc
}

// execOut runs cmd in the container id and returns its output (stdout and
// stderr) and exit code.
func execOut(t *testing.T, id string, cmd ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := docker.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	att, err := docker.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	ins, err := docker.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return out.String(), ins.ExitCode
}

// TestFidelityNamesHostsDNSSysctls: hostname and subdomain (spec.hostname,
// and the pod name cut to 63 characters as the kubelet cuts it), hostAliases in
// /etc/hosts (on the pod's network and on the host's), dnsPolicy None with
// dnsConfig, Default, ClusterFirst without cluster DNS (the host's, as the
// kubelet falls back), dnsConfig on top of Default, and namespaced sysctls,
// each read back inside the pod.
func TestFidelityNamesHostsDNSSysctls(t *testing.T) {
	e := newEnv(t)
	show := `for f in $FILES; do echo "== $f"; cat $f; done; echo "== hostname"; hostname; echo "== end"`
	pod := func(name, spec, files string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
%s
  containers:
  - name: c
    image: %s
    env: [{name: FILES, value: %q}]
    command: ["sh", "-c", %q]
---
`, name, spec, testImage, files, show)
	}
	// The pod's full name is long-<57 x>-<node>: its first 63 characters
	// end in '-', which the kubelet trims.
	long := "long-" + strings.Repeat("x", 57)
	e.write("pods.yaml",
		pod("named", `  hostname: h1
  subdomain: sub
  hostAliases:
  - ip: 10.1.2.3
    hostnames: [foo.example, bar.example]
  - ip: "fd00::7"
    hostnames: [six.example]
  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.53, 192.0.2.54]
    searches: [a.example, b.example]
    options: [{name: ndots, value: "2"}, {name: edns0}]
  securityContext:
    sysctls:
    - {name: net.ipv4.ip_unprivileged_port_start, value: "81"}
    - {name: kernel.shm_rmid_forced, value: "1"}`,
			"/etc/hosts /etc/resolv.conf /proc/sys/net/ipv4/ip_unprivileged_port_start /proc/sys/kernel/shm_rmid_forced")+
			pod(long, "", "/etc/hosts")+
			pod("dflt", "  dnsPolicy: Default", "/etc/resolv.conf")+
			pod("cf", "  dnsPolicy: ClusterFirst", "/etc/resolv.conf")+
			pod("dflt-plus", `  dnsPolicy: Default
  dnsConfig:
    nameservers: [192.0.2.99]
    searches: [extra.example]
    options: [{name: timeout, value: "3"}]`, "/etc/resolv.conf")+
			pod("hostnet", `  hostNetwork: true
  hostAliases:
  - ip: 10.9.9.9
    hostnames: [alias.example]`, "/etc/hosts"))

	r := e.podrun(3*time.Minute, "once", e.dir, "--wait", "complete", "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	named := e.logsOf("default", "named", "c")
	if got := strings.TrimSpace(section(named, "hostname")); got != "h1" {
		t.Errorf("spec.hostname h1: the container's hostname is %q", got)
	}
	hosts := hostsEntries(section(named, "/etc/hosts"))
	for name, want := range map[string]string{"foo.example": "10.1.2.3", "bar.example": "10.1.2.3", "six.example": "fd00::7"} {
		if !slices.Contains(hosts[name], want) {
			t.Errorf("hostAliases: /etc/hosts has %s at %v, want %s\n%s", name, hosts[name], want, section(named, "/etc/hosts"))
		}
	}
	// The pod's own entry, as the kubelet writes it: its IP, its name in
	// its subdomain (no cluster domain here), its hostname.
	if ip := hosts["h1"]; len(ip) != 1 || ip[0] == "127.0.0.1" || !slices.Equal(hosts["h1.sub.default.svc"], ip) {
		t.Errorf("/etc/hosts has h1 at %v and h1.sub.default.svc at %v, want both at the pod's IP\n%s",
			hosts["h1"], hosts["h1.sub.default.svc"], section(named, "/etc/hosts"))
	}
	rc := parseResolvConf(section(named, "/etc/resolv.conf"))
	if want := []string{"192.0.2.53", "192.0.2.54"}; !slices.Equal(rc.servers, want) {
		t.Errorf("dnsPolicy None: nameservers %v, want %v", rc.servers, want)
	}
	if want := []string{"a.example", "b.example"}; !slices.Equal(rc.searches, want) {
		t.Errorf("dnsPolicy None: search %v, want %v", rc.searches, want)
	}
	if want := []string{"ndots:2", "edns0"}; !slices.Equal(rc.options, want) {
		t.Errorf("dnsPolicy None: options %v, want %v", rc.options, want)
	}
	for file, want := range map[string]string{
		"/proc/sys/net/ipv4/ip_unprivileged_port_start": "81",
		"/proc/sys/kernel/shm_rmid_forced":              "1",
	} {
		if got := strings.TrimSpace(section(named, file)); got != want {
			t.Errorf("sysctl %s = %q, want %q", file, got, want)
		}
	}

	longOut := e.logsOf("default", long, "c")
	if got := strings.TrimSpace(section(longOut, "hostname")); got != long {
		t.Errorf("pod %s-%s: hostname %q, want the name cut to 63 characters without the trailing '-': %q",
			long, e.node, got, long)
	}

	// Default and ClusterFirst without cluster DNS: the host's resolver
	// configuration, the same for both.
	dflt := parseResolvConf(section(e.logsOf("default", "dflt", "c"), "/etc/resolv.conf"))
	cf := parseResolvConf(section(e.logsOf("default", "cf", "c"), "/etc/resolv.conf"))
	if len(dflt.servers) == 0 || fmt.Sprint(dflt) != fmt.Sprint(cf) {
		t.Errorf("dnsPolicy Default %+v, ClusterFirst without cluster DNS %+v: want the same, with the host's nameservers", dflt, cf)
	}
	if slices.Contains(cf.options, "ndots:5") {
		t.Errorf("ClusterFirst without cluster DNS has the cluster options: %+v", cf)
	}
	hostRC, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range parseResolvConf(string(hostRC)).servers {
		if !strings.HasPrefix(s, "127.") && s != "::1" && !slices.Contains(dflt.servers, s) {
			t.Errorf("dnsPolicy Default: nameservers %v lack the host's %s", dflt.servers, s)
		}
	}
	// dnsConfig on top of Default: the host's entries, then the pod's.
	plus := parseResolvConf(section(e.logsOf("default", "dflt-plus", "c"), "/etc/resolv.conf"))
	if want := append(slices.Clone(dflt.servers), "192.0.2.99"); !slices.Equal(plus.servers, want) {
		t.Errorf("Default with dnsConfig: nameservers %v, want the host's then the pod's: %v", plus.servers, want)
	}
	if want := append(slices.Clone(dflt.searches), "extra.example"); !slices.Equal(plus.searches, want) {
		t.Errorf("Default with dnsConfig: search %v, want %v", plus.searches, want)
	}
	if !slices.Contains(plus.options, "timeout:3") {
		t.Errorf("Default with dnsConfig: options %v lack timeout:3", plus.options)
	}

	// On the host's network: the host's name, and the aliases on top of
	// the host's /etc/hosts.
	hn := e.logsOf("default", "hostnet", "c")
	hostname, _ := os.Hostname()
	if got := strings.TrimSpace(section(hn, "hostname")); got != hostname {
		t.Errorf("hostNetwork: hostname %q, want the host's %q", got, hostname)
	}
	if got := hostsEntries(section(hn, "/etc/hosts"))["alias.example"]; !slices.Equal(got, []string{"10.9.9.9"}) {
		t.Errorf("hostNetwork hostAliases: alias.example at %v, want 10.9.9.9\n%s", got, section(hn, "/etc/hosts"))
	}
}

// TestFidelityDownwardProjectedSubPath: downwardAPI and projected volume
// files (labels, annotations, name, namespace, limits through
// resourceFieldRef with divisors, modes of items and defaults), and
// subPath and subPathExpr mounts (expanded from the container's env) of an
// emptyDir, read back inside the pod.
func TestFidelityDownwardProjectedSubPath(t *testing.T) {
	e := newEnv(t)
	e.write("vols.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: vols
  namespace: fid
  labels: {app: vols, tier: back.end}
  annotations: {note: "say \"hi\""}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: %[1]s
    resources:
      limits: {cpu: 500m, memory: 64Mi}
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - {name: KIND, value: logs}
    command:
    - sh
    - -c
    - |
      for f in /info/labels /info/annotations /info/name /info/namespace /info/cpu /info/mem /info/req-cpu \
               /proj/name /proj/cfg /proj/sub/mem; do echo "== $f"; cat $f; echo; done
      echo "== modes"
      for f in /info/labels /info/name /info/cpu /proj/name /proj/cfg /proj/sub/mem; do stat -L -c '%%a %%n' $f; done
      echo mine > /mine/file && echo fixed > /fixed/file
      echo "== tree"
      find /all -type f | sort
      echo "== end"
    volumeMounts:
    - {name: info, mountPath: /info, readOnly: true}
    - {name: proj, mountPath: /proj, readOnly: true}
    - {name: data, mountPath: /all}
    - {name: data, mountPath: /mine, subPathExpr: "$(POD_NAME)/$(KIND)"}
    - {name: data, mountPath: /fixed, subPath: fixed/dir}
  volumes:
  - name: info
    downwardAPI:
      defaultMode: 0440
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}
      - {path: name, fieldRef: {fieldPath: metadata.name}, mode: 0400}
      - {path: namespace, fieldRef: {fieldPath: metadata.namespace}}
      - {path: cpu, resourceFieldRef: {containerName: c, resource: limits.cpu, divisor: 1m}}
      - {path: mem, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}
      - {path: req-cpu, resourceFieldRef: {containerName: c, resource: requests.cpu, divisor: 1m}}
  - name: proj
    projected:
      defaultMode: 0444
      sources:
      - downwardAPI:
          items:
          - {path: name, fieldRef: {fieldPath: metadata.name}}
          - {path: sub/mem, resourceFieldRef: {containerName: c, resource: limits.memory}, mode: 0600}
      - configMap:
          name: cfg
          items: [{key: k, path: cfg, mode: 0640}]
  - name: data
    emptyDir: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: fid}
data: {k: from-the-configmap}
`, testImage))
	r := e.podrun(3*time.Minute, "once", e.dir, "--wait", "complete", "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	out := e.logsOf("fid", "vols", "c")
	name := "vols-" + e.node
	for file, want := range map[string]string{
		"/info/labels":    "app=\"vols\"\ntier=\"back.end\"",
		"/info/name":      name,
		"/info/namespace": "fid",
		"/info/cpu":       "500",
		"/info/mem":       "64",
		// Requests default to the limits, as the API defaults them.
		"/info/req-cpu": "500",
		"/proj/name":    name,
		"/proj/cfg":     "from-the-configmap",
		"/proj/sub/mem": "67108864",
	} {
		if got := strings.TrimSpace(section(out, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// The user's annotation beside those podrun sets, as the kubelet's
	// static pods have them.
	contains(t, "/info/annotations", section(out, "/info/annotations"), "note=\"say \\\"hi\\\"\"", "kubernetes.io/config.source=")
	modes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(section(out, "modes")), "\n") {
		if mode, file, ok := strings.Cut(line, " "); ok {
			modes[file] = mode
		}
	}
	for file, want := range map[string]string{
		"/info/labels": "440", "/info/name": "400", "/info/cpu": "440",
		"/proj/name": "444", "/proj/cfg": "640", "/proj/sub/mem": "600",
	} {
		if modes[file] != want {
			t.Errorf("mode of %s = %q, want %s", file, modes[file], want)
		}
	}
	tree := strings.Fields(section(out, "tree"))
	if want := []string{"/all/fixed/dir/file", "/all/" + name + "/logs/file"}; !slices.Equal(tree, want) {
		t.Errorf("files of the emptyDir: %v, want %v (subPath fixed/dir, subPathExpr $(POD_NAME)/$(KIND))", tree, want)
	}
}

// sharedMount makes a directory that is a shared mount point of its own,
// as mount propagation needs its source to be, and unmounts it, with all
// that propagated into it, when the test ends.
func sharedMount(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, args := range [][]string{{"--bind", d, d}, {"--make-rshared", d}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v\n%s", args, err, out)
		}
	}
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() { exec.Command("umount", "-R", "-l", d).Run() })
	return d
}

// TestFidelityMountPropagation: HostToContainer shows a container what
// the host mounts after it started; a mount without propagation does not.
func TestFidelityMountPropagation(t *testing.T) {
	d := sharedMount(t)
	e := newEnv(t)
	e.write("prop.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: prop}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: slave
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: host, mountPath: /host, mountPropagation: HostToContainer}]
  - name: private
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: host, mountPath: /host}]
  volumes:
  - name: host
    hostPath: {path: %[2]s, type: Directory}
`, testImage, d))
	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	run := e.running()
	from := filepath.Join(d, "fromhost")
	if err := os.Mkdir(from, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", from).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(from, "hello"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Propagation is done when mount(2) returns: no waiting.
	for name, sees := range map[string]bool{"slave": true, "private": false} {
		out, code := execOut(t, run["prop/"+name], "cat", "/host/fromhost/hello")
		if got := code == 0 && out == "from the host"; got != sees {
			t.Errorf("%s: cat /host/fromhost/hello: exit %d %q; want it seen: %v", name, code, out, sees)
		}
	}
}

// canStartPrivileged says whether Docker can start a privileged container
// here: runc gives one every capability the kernel has, and fails when
// this machine's bounding set lacks one (CAP_SYS_RESOURCE in some
// sandboxes).
func canStartPrivileged(t *testing.T) bool {
	t.Helper()
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var n uint
	var bnd uint64
	fmt.Sscan(string(last), &n)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%x", &bnd)
		}
	}
	all := uint64(1)<<(n+1) - 1
	return bnd&all == all
}

// TestFidelityAllowPrivileged: a privileged container is refused without
// --allow-privileged (bad input, nothing started); with it, podrun makes
// it privileged with its Bidirectional mount rshared, and (where this
// machine can start privileged containers) a mount it makes shows on the
// host.
func TestFidelityAllowPrivileged(t *testing.T) {
	d := sharedMount(t)
	e := newEnv(t)
	p := e.write("priv.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: plain
    image: %[1]s
    command: ["sleep", "3600"]
  - name: bidi
    image: %[1]s
    command: ["sleep", "3600"]
    securityContext: {privileged: true}
    volumeMounts: [{name: host, mountPath: /host, mountPropagation: Bidirectional}]
  volumes:
  - name: host
    hostPath: {path: %[2]s, type: Directory}
`, testImage, d))

	r := e.podrun(time.Minute, "once", e.dir)
	if r.code != 2 {
		t.Fatalf("once without --allow-privileged: exit %d, want 2\n%s", r.code, r.stderr)
	}
	contains(t, "stderr", r.stderr, p, "spec.containers[1].securityContext.privileged", "--allow-privileged")
	if n := len(e.containers()); n != 0 {
		t.Fatalf("a refused pod started %d containers", n)
	}

	stop := e.watch("--allow-privileged")
	defer stop(syscall.SIGTERM)
	var bidi container.InspectResponse
	waitFor(t, "the privileged container to be made", 2*time.Minute, func() bool {
		for _, c := range e.containers() {
			if c.Labels["io.podrun.container.name"] == "bidi" {
				var err error
				bidi, err = docker.ContainerInspect(context.Background(), c.ID)
				return err == nil
			}
		}
		return false
	})
	if !bidi.HostConfig.Privileged {
		t.Errorf("bidi is not privileged")
	}
	var prop string
	for _, m := range bidi.Mounts {
		if m.Destination == "/host" {
			prop = string(m.Propagation)
		}
	}
	if prop != "rshared" {
		t.Errorf("bidi's /host propagation %q, want rshared", prop)
	}
	if !canStartPrivileged(t) {
		t.Logf("this machine's capability bounding set lacks some of the kernel's: Docker cannot start privileged containers; checked what podrun made")
		return
	}
	waitFor(t, "the pod to run", 2*time.Minute, func() bool { return e.running()["priv/bidi"] != "" })
	out, code := execOut(t, e.running()["priv/bidi"], "sh", "-c",
		"mkdir -p /host/fromctr && mount -t tmpfs tmpfs /host/fromctr && echo -n from the container > /host/fromctr/f")
	if code != 0 {
		t.Fatalf("mount in the Bidirectional container: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(d, "fromctr", "f")); err != nil || string(b) != "from the container" {
		t.Errorf("the host reads %q, %v from the container's mount", b, err)
	}
}

// TestFidelityHooksHTTPGetAndSleep: a postStart httpGet reaches a server on
// 127.0.0.1 (the pod is on the host's network) with its path and headers
// before the next container starts; a preStop httpGet reaches it when the
// pod stops; a preStop sleep holds back the container's SIGTERM for its
// seconds at least.
func TestFidelityHooksHTTPGetAndSleep(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI()+" "+r.Header.Get("X-Hook"))
		mu.Unlock()
	}))
	defer srv.Close()
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	out := t.TempDir()
	e.write("hooks.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hooks}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 30
  containers:
  - name: web
    image: %[1]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    lifecycle:
      postStart:
        httpGet: {host: 127.0.0.1, port: %[2]d, path: "/started?c=web", httpHeaders: [{name: X-Hook, value: post}]}
      preStop:
        httpGet: {host: 127.0.0.1, port: %[2]d, path: /stopping}
  - name: slow
    image: %[1]s
    command: ["sh", "-c", "trap 'date +%%s > /out/term; exit 0' TERM; while true; do sleep 0.1; done"]
    lifecycle:
      preStop:
        sleep: {seconds: 3}
    volumeMounts: [{name: out, mountPath: /out}]
  volumes:
  - name: out
    hostPath: {path: %[3]s, type: Directory}
`, testImage, port, out))
	r := e.podrun(3*time.Minute, "once", e.dir, "--timeout", "2m")
	if r.code != 0 {
		t.Fatalf("once: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// slow started after web's postStart returned, and once waited for it.
	if want := []string{"/started?c=web post"}; !slices.Equal(requests(), want) {
		t.Fatalf("requests after start: %q, want %q", requests(), want)
	}

	before := time.Now().Unix()
	r = e.podrun(2*time.Minute, "down", e.dir)
	if r.code != 0 {
		t.Fatalf("down: exit %d\n%s", r.code, r.stderr)
	}
	if want := []string{"/started?c=web post", "/stopping "}; !slices.Equal(requests(), want) {
		t.Errorf("requests after down: %q, want %q", requests(), want)
	}
	b, err := os.ReadFile(filepath.Join(out, "term"))
	if err != nil {
		t.Fatalf("slow got no SIGTERM: %v", err)
	}
	var term int64
	fmt.Sscan(string(b), &term)
	// A lower bound only: the sleep holds SIGTERM back 3 s at least.
	if term-before < 3 {
		t.Errorf("SIGTERM came %d s after down began; the preStop sleep is 3 s", term-before)
	}
}

// TestFidelityClusterDNS: with --cluster-dns and --cluster-domain (watch
// takes them without a cluster, as the kubelet's configuration), a
// ClusterFirst pod gets the cluster's resolver, search path and ndots:5,
// and its subdomain's full name in /etc/hosts; on the host's network
// ClusterFirst is the host's and ClusterFirstWithHostNet the cluster's.
func TestFidelityClusterDNS(t *testing.T) {
	e := newEnv(t)
	pod := func(name, spec string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: team}
spec:
  terminationGracePeriodSeconds: 1
%s
  containers:
  - {name: c, image: %s, command: ["sleep", "3600"]}
---
`, name, spec, testImage)
	}
	e.write("pods.yaml", pod("cf", "  hostname: db-0\n  subdomain: db\n  dnsPolicy: ClusterFirst")+
		pod("hostnet-cf", "  hostNetwork: true\n  dnsPolicy: ClusterFirst")+
		pod("hostnet-cfhn", "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet"))
	stop := e.watch("--cluster-dns", "192.0.2.10", "--cluster-domain", "cluster.test")
	defer stop(syscall.SIGTERM)
	waitFor(t, "the pods", 2*time.Minute, func() bool { return len(e.running()) == 6 })
	run := e.running()
	read := func(pod, file string) string {
		out, code := execOut(t, run[pod+"/c"], "cat", file)
		if code != 0 {
			t.Fatalf("%s: cat %s: exit %d: %s", pod, file, code, out)
		}
		return out
	}
	hostRC, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	host := parseResolvConf(string(hostRC))

	cf := parseResolvConf(read("cf", "/etc/resolv.conf"))
	wantSearch := append([]string{"team.svc.cluster.test", "svc.cluster.test", "cluster.test"}, host.searches...)
	if !slices.Equal(cf.servers, []string{"192.0.2.10"}) || !slices.Equal(cf.searches, wantSearch) ||
		!slices.Equal(cf.options, []string{"ndots:5"}) {
		t.Errorf("ClusterFirst: %+v, want nameserver 192.0.2.10, search %v, options ndots:5", cf, wantSearch)
	}
	hosts := hostsEntries(read("cf", "/etc/hosts"))
	if ip := hosts["db-0"]; len(ip) != 1 || !slices.Equal(hosts["db-0.db.team.svc.cluster.test"], ip) {
		t.Errorf("/etc/hosts: db-0 at %v, db-0.db.team.svc.cluster.test at %v: want both at the pod's IP",
			hosts["db-0"], hosts["db-0.db.team.svc.cluster.test"])
	}
	if got := parseResolvConf(read("hostnet-cf", "/etc/resolv.conf")); fmt.Sprint(got) != fmt.Sprint(host) {
		t.Errorf("ClusterFirst on the host's network: %+v, want the host's %+v", got, host)
	}
	if got := parseResolvConf(read("hostnet-cfhn", "/etc/resolv.conf")); !slices.Equal(got.servers, []string{"192.0.2.10"}) {
		t.Errorf("ClusterFirstWithHostNet: %+v, want the cluster's nameserver", got)
	}
}

// TestFidelityVolumeFilesFollowEdits: in a running pod, a label edit shows
// in its downwardAPI file and a ConfigMap edit in its configMap file,
// without a restart; a subPath mount of the same file keeps what it bound
// at start, as the kubelet's does.
func TestFidelityVolumeFilesFollowEdits(t *testing.T) {
	e := newEnv(t)
	manifest := func(label, value string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: live
  labels: {version: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: info, mountPath: /info}
    - {name: cfg, mountPath: /cfg}
    - {name: cfg, mountPath: /pinned, subPath: k}
  volumes:
  - name: info
    downwardAPI:
      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]
  - name: cfg
    configMap: {name: cfg}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {k: %s}
`, label, testImage, value)
	}
	p := e.write("live.yaml", manifest("one", "first"))
	stop := e.watch()
	defer stop(syscall.SIGTERM)
	waitFor(t, "the pod", 2*time.Minute, func() bool { return len(e.running()) == 2 })
	id := e.running()["live/c"]
	read := func(file string) string {
		out, _ := execOut(t, id, "cat", file)
		return out
	}
	if got := read("/info/labels"); got != `version="one"` {
		t.Fatalf("/info/labels %q", got)
	}
	if err := os.WriteFile(p, []byte(manifest("two", "second")), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new label in /info/labels", 2*time.Minute, func() bool { return read("/info/labels") == `version="two"` })
	waitFor(t, "the new value in /cfg/k", 2*time.Minute, func() bool { return read("/cfg/k") == "second" })
	if got := read("/pinned"); got != "first" {
		t.Errorf("the subPath mount reads %q, want what it bound at start", got)
	}
	if now := e.running()["live/c"]; now != id {
		t.Errorf("the container was replaced (%s, then %s): metadata and ConfigMap edits need no restart", id, now)
	}
}
