package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/engine/labels"
)

// RunSandbox runs the pod sandbox of (cfg.Pod.UID, cfg.Attempt), or adopts
// the one that exists. A stopped one cannot be started again under CRI: that
// is an error, and the caller makes a new attempt. cfg.Image must be present
// (it is what podrun names as the infra image), but the sandbox runs the
// runtime's own sandbox image, as CRI has it.
func (r *Runtime) RunSandbox(ctx context.Context, cfg *engine.SandboxConfig) (string, error) {
	if !safeName(cfg.Pod.UID) {
		return "", fmt.Errorf("run sandbox: pod UID %q is not a safe name", cfg.Pod.UID)
	}
	if err := r.checkInfraImage(ctx, cfg.Image); err != nil {
		return "", fmt.Errorf("run sandbox: infra image: %w", err)
	}
	unlock := r.locks.lock("sb/" + cfg.Pod.UID + "/" + strconv.Itoa(cfg.Attempt))
	defer unlock()
	config, err := r.sandboxConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("run sandbox: %w", err)
	}
	if err := os.MkdirAll(config.LogDirectory, 0o755); err != nil {
		return "", fmt.Errorf("run sandbox: log directory: %w", err)
	}
	// An existing sandbox of the identity is the answer. The runtime
	// reserves the identity's name before it does anything else, so the
	// run is tried first and the sandbox looked for only when the name is
	// taken: a new pod, the common case, makes no list first.
	for try := 0; ; try++ {
		id, err := r.rs.RunPodSandbox(ctx, config, cfg.Runtime)
		if err == nil {
			r.remember(id, true)
			r.log.Debug("ran sandbox", "pod", cfg.Pod.UID, "attempt", cfg.Attempt, "id", shortID(id))
			return id, nil
		}
		if !isReserved(err) || try == reservedTries {
			return "", fmt.Errorf("run sandbox of pod %s attempt %d: %w", cfg.Pod.UID, cfg.Attempt, wrap(err))
		}
		sb, ferr := r.findSandbox(ctx, cfg.Pod.UID, cfg.Attempt)
		if ferr != nil {
			return "", fmt.Errorf("run sandbox: %w", ferr)
		}
		if sb != nil {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return sb.Id, nil
			}
			return "", fmt.Errorf("run sandbox of pod %s attempt %d: sandbox %s is stopped, and a CRI sandbox cannot be started again: a new attempt is needed", cfg.Pod.UID, cfg.Attempt, shortID(sb.Id))
		}
		// Another node's sandbox holds the identity, or one still being
		// made: this node's list says which.
		if other, lerr := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{
			labels.PodUID: cfg.Pod.UID, labels.Attempt: strconv.Itoa(cfg.Attempt),
		}}); lerr == nil && len(other) > 0 && other[0].Labels[labels.Node] != r.node {
			return "", fmt.Errorf("run sandbox of pod %s attempt %d: held by node %q", cfg.Pod.UID, cfg.Attempt, other[0].Labels[labels.Node])
		}
		if err := waitRetry(ctx); err != nil {
			return "", fmt.Errorf("run sandbox: %w", err)
		}
	}
}

// checkInfraImage checks that ref (if any) is present; a present one is
// not asked again.
func (r *Runtime) checkInfraImage(ctx context.Context, ref string) error {
	if ref == "" {
		return nil
	}
	r.mu.Lock()
	ok := r.infraPresent[ref]
	r.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := r.ImageStatus(ctx, ref); err != nil {
		return err
	}
	r.mu.Lock()
	r.infraPresent[ref] = true
	r.mu.Unlock()
	return nil
}

// findSandbox returns this node's sandbox of (uid, attempt), or nil.
func (r *Runtime) findSandbox(ctx context.Context, uid string, attempt int) (*runtimeapi.PodSandbox, error) {
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{
		labels.Node: r.node, labels.PodUID: uid, labels.Attempt: strconv.Itoa(attempt),
	}})
	if err != nil {
		return nil, wrap(err)
	}
	if len(sbs) == 0 {
		return nil, nil
	}
	return sbs[0], nil
}

// sandboxLogDir is the directory of the CRI log files of the sandbox of
// (uid, attempt).
func (r *Runtime) sandboxLogDir(uid string, attempt int) string {
	return r.logDir + "/" + uid + "_" + strconv.Itoa(attempt)
}

// sandboxConfig is the CRI sandbox config for cfg.
func (r *Runtime) sandboxConfig(cfg *engine.SandboxConfig) (*runtimeapi.PodSandboxConfig, error) {
	lbl := r.identityLabels(cfg.Pod, cfg.Attempt)
	lbl[labels.ContainerType] = labels.TypeSandbox
	labels.AddSandbox(lbl, cfg)
	config := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: cfg.Pod.Name, Uid: cfg.Pod.UID, Namespace: cfg.Pod.Namespace, Attempt: uint32(cfg.Attempt),
		},
		LogDirectory: r.sandboxLogDir(cfg.Pod.UID, cfg.Attempt),
		Labels:       lbl,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cfg.CgroupParent,
			Sysctls:         cfg.Sysctls,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(cfg), Privileged: cfg.Privileged},
		},
	}
	if !cfg.HostNetwork {
		config.Hostname = cfg.Hostname
		for _, p := range cfg.Ports {
			proto, ok := runtimeapi.Protocol_value[strings.ToUpper(p.Protocol)]
			if p.Protocol == "" {
				proto, ok = int32(runtimeapi.Protocol_TCP), true
			}
			if !ok {
				return nil, fmt.Errorf("port %d: protocol %q", p.ContainerPort, p.Protocol)
			}
			if p.HostPort == 0 {
				continue
			}
			config.PortMappings = append(config.PortMappings, &runtimeapi.PortMapping{
				Protocol: runtimeapi.Protocol(proto), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	if cfg.DNS != nil {
		config.DnsConfig = &runtimeapi.DNSConfig{Servers: cfg.DNS.Servers, Searches: cfg.DNS.Searches, Options: cfg.DNS.Options}
	}
	return config, nil
}

// namespaceOptions are the namespaces of the pod sb's sandbox and
// containers: the pod's network and IPC, and a PID namespace of each
// container's own, unless the pod shares one or the host's.
func namespaceOptions(sb *engine.SandboxConfig) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if sb.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if sb.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if sb.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if sb.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// ownSandbox checks that id is this node's sandbox: ErrNotFound otherwise.
func (r *Runtime) ownSandbox(ctx context.Context, id string) error {
	if r.known(id, true) {
		return nil
	}
	_, err := r.sandboxStatus(ctx, id)
	return err
}

// sandboxStatus is the status of this node's sandbox id: ErrNotFound if it
// is not one.
func (r *Runtime) sandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	resp, err := r.rs.PodSandboxStatus(ctx, id, false)
	return owned(r, "sandbox", id, true, resp.GetStatus(), err)
}

// StopSandbox stops the sandbox (CRI kills what still runs in it; the
// runner has stopped the pod's containers, each with its grace, before).
func (r *Runtime) StopSandbox(ctx context.Context, id string, grace time.Duration) error {
	if err := r.ownSandbox(ctx, id); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", shortID(id), err)
	}
	if err := r.rs.StopPodSandbox(ctx, id); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", shortID(id), wrap(err))
	}
	r.mu.Lock()
	delete(r.sandboxIPs, id)
	r.mu.Unlock()
	return nil
}

// RemoveSandbox removes the sandbox, its containers (CRI removes them with
// it) and its log directory.
func (r *Runtime) RemoveSandbox(ctx context.Context, id string) error {
	st, err := r.rs.PodSandboxStatus(ctx, id, false)
	if isNotFound(err) {
		r.forget(id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove sandbox %s: %w", shortID(id), wrap(err))
	}
	lbl := st.GetStatus().GetLabels()
	if lbl[labels.Node] != r.node {
		return nil // another node's is not there for this one
	}
	if err := r.rs.RemovePodSandbox(ctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove sandbox %s: %w", shortID(id), wrap(err))
	}
	r.forget(id)
	if uid := lbl[labels.PodUID]; safeName(uid) {
		if err := r.removeLogDir(uid + "_" + strconv.Itoa(labels.AttemptOf(lbl))); err != nil {
			r.log.Warn("remove sandbox log directory", "sandbox", shortID(id), "err", err)
		}
	}
	return nil
}

// removeLogDir removes name (one safe element) under the log directory.
func (r *Runtime) removeLogDir(name string) error {
	return r.removeUnderLogDir(filepath.Join(r.logDir, name))
}

// removeUnderLogDir removes path (with what it holds) when it is under the
// log directory, through an os.Root of it: never anything outside.
func (r *Runtime) removeUnderLogDir(path string) error {
	rel, ok := r.underLogDir(path)
	if !ok {
		return nil // not one of podrun's log files
	}
	root, err := os.OpenRoot(r.logDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(rel)
}

// underLogDir returns path relative to the log directory when it is under
// it (not the directory itself): the only paths podrun removes or rotates.
func (r *Runtime) underLogDir(path string) (string, bool) {
	rel, err := filepath.Rel(r.logDir, path)
	if path == "" || err != nil || rel == "." || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// ListSandboxes returns this node's sandboxes.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]*engine.Sandbox, error) {
	sbs, err := r.listSandboxes(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return sbs, nil
}

func (r *Runtime) listSandboxes(ctx context.Context, uid string) ([]*engine.Sandbox, error) {
	sel := r.selector(uid)
	list, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]*engine.Sandbox, 0, len(list))
	for _, sb := range list {
		r.remember(sb.Id, true)
		s := &engine.Sandbox{
			ID:          sb.Id,
			Pod:         labels.Pod(sb.Labels),
			Attempt:     labels.AttemptOf(sb.Labels),
			Hash:        sb.Labels[labels.SandboxHash],
			State:       engine.StateExited,
			CreatedAt:   time.Unix(0, sb.CreatedAt),
			Source:      sb.Labels[labels.PodSource],
			QOSClass:    sb.Labels[labels.QOSClass],
			GracePeriod: labels.GracePeriodOf(sb.Labels),
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			s.State = engine.StateRunning
			ip, err := r.SandboxIP(ctx, sb.Id)
			if isNotFound(err) {
				continue // removed since the list
			}
			if err != nil {
				return nil, err
			}
			s.IP = ip
		}
		out = append(out, s)
	}
	return out, nil
}

// SandboxIP is a running sandbox's IP ("" on the host's network), asked
// once per sandbox (PodSandboxStatus): the runner reads a new sandbox's
// address with it rather than by a list of its pod.
func (r *Runtime) SandboxIP(ctx context.Context, id string) (string, error) {
	r.mu.Lock()
	ip, ok := r.sandboxIPs[id]
	r.mu.Unlock()
	if ok {
		return ip, nil
	}
	st, err := r.rs.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return "", wrap(err)
	}
	ip = st.GetStatus().GetNetwork().GetIp()
	if st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		r.mu.Lock()
		r.sandboxIPs[id] = ip
		r.mu.Unlock()
	}
	return ip, nil
}
