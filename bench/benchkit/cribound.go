package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// CRI connects to the CRI runtime at endpoint (unix:///...).
func CRI(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(2 * time.Minute).Build(ctx)
}

// BringUpCRIBound makes n pods with nothing but the CRI calls a pod needs —
// RunPodSandbox, then CreateContainer and StartContainer of one app
// container (img running `sleep 3600`) — each pod in its own goroutine, and
// returns how long that took: the lower bound of podrun's bring-up on a CRI
// runtime. What it makes is labelled with node; logDir holds its logs.
func BringUpCRIBound(ctx context.Context, rs internalapi.RuntimeService, node, img, logDir string, n int) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = criBoundPod(ctx, rs, node, img, logDir, i) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// criBoundPod runs pod i's sandbox, then creates and starts its container.
func criBoundPod(ctx context.Context, rs internalapi.RuntimeService, node, img, logDir string, i int) error {
	name := fmt.Sprintf("bound-%03d", i)
	labels := map[string]string{LabelNode: node, "io.podrun.pod.name": name + "-" + node}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name + "-" + node, Uid: node + "-" + name, Namespace: "default"},
		Hostname:     name,
		LogDirectory: fmt.Sprintf("%s/%s", logDir, name),
		Labels:       labels,
	}
	sb, err := rs.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		return fmt.Errorf("run sandbox %s: %w", name, err)
	}
	id, err := rs.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: img},
		Command:  []string{"sleep", "3600"},
		Labels:   labels,
		LogPath:  "app.log",
	}, sbCfg)
	if err != nil {
		return fmt.Errorf("create app %s: %w", name, err)
	}
	if err := rs.StartContainer(ctx, id); err != nil {
		return fmt.Errorf("start app %s: %w", name, err)
	}
	return nil
}

// RemoveCRINode removes every sandbox labelled with node (and with them
// their containers).
func RemoveCRINode(ctx context.Context, rs internalapi.RuntimeService, node string) error {
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelNode: node}})
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range sbs {
		if err := rs.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
		if err := rs.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RunningCRI counts the running containers and ready sandboxes labelled
// with node, and the sandboxes without an IP.
func RunningCRI(ctx context.Context, rs internalapi.RuntimeService, node string) (containers, sandboxes, noIP int, err error) {
	sel := map[string]string{LabelNode: node}
	cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return 0, 0, 0, err
	}
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			containers++
		}
	}
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return 0, 0, 0, err
	}
	for _, sb := range sbs {
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		sandboxes++
		st, err := rs.PodSandboxStatus(ctx, sb.Id, false)
		if err != nil {
			return 0, 0, 0, err
		}
		if st.GetStatus().GetNetwork().GetIp() == "" {
			noIP++
		}
	}
	return containers, sandboxes, noIP, nil
}
