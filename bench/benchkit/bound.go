package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// BringUpBound makes n pods with nothing but the Docker Engine API calls
// podrun's pod model needs — create and start an infra container, then
// create and start one app container (img running `sleep 3600`) joined to
// its network and IPC namespaces — each pod in its own goroutine, and
// returns how long that took: the lower bound of podrun's bring-up. What it
// makes is labelled with node.
func BringUpBound(ctx context.Context, cli *client.Client, node, infra, img string, n int) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = boundPod(ctx, cli, node, infra, img, i)
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// boundPod makes and starts pod i: its sandbox, then its app container.
func boundPod(ctx context.Context, cli *client.Client, node, infra, img string, i int) error {
	name := fmt.Sprintf("bound-%03d", i)
	labels := func(c string) map[string]string {
		return map[string]string{LabelNode: node, "io.podrun.pod.name": name + "-" + node, "io.podrun.container.name": c}
	}
	sb, err := cli.ContainerCreate(ctx,
		&container.Config{Image: infra, Hostname: name, Labels: labels("POD")},
		&container.HostConfig{NetworkMode: network.NetworkBridge, IpcMode: container.IPCModeShareable},
		nil, nil, "bound_POD_"+name+"_"+node)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", name, err)
	}
	if err := cli.ContainerStart(ctx, sb.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start sandbox %s: %w", name, err)
	}
	ns := "container:" + sb.ID
	app, err := cli.ContainerCreate(ctx,
		&container.Config{Image: img, Entrypoint: []string{"sleep"}, Cmd: []string{"3600"}, Labels: labels("app")},
		&container.HostConfig{NetworkMode: container.NetworkMode(ns), IpcMode: container.IpcMode(ns)},
		nil, nil, "bound_app_"+name+"_"+node)
	if err != nil {
		return fmt.Errorf("create app %s: %w", name, err)
	}
	if err := cli.ContainerStart(ctx, app.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start app %s: %w", name, err)
	}
	return nil
}
