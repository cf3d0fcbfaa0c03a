package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podrun/podrun/manifest"
	"github.com/podrun/podrun/runner"
	"github.com/podrun/podrun/source"
)

// maxManifestBytes bounds what podrun reads from standard input, as the file
// source bounds a file.
const maxManifestBytes = 10 << 20

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("more than %d bytes", maxManifestBytes)
	}
	return data, nil
}

// readArgs reads every argument of a one-shot command once ("-" is
// standard input, http(s):// a URL fetched once, anything else a file or
// a directory) into one source.Update per argument, in the order given:
// the arguments are the sources of `once`, in priority order, as the
// --path and --url flags are those of `watch`. Any invalid manifest is
// exit code 2, and nothing is started.
func readArgs(ctx context.Context, g *globalOptions, paths []string) ([]source.Update, error) {
	opts := manifest.Options{NodeName: g.NodeName, Logger: g.Log, Strict: g.Strict}
	var updates []source.Update
	var errs []error
	for _, p := range paths {
		var snap *manifest.Snapshot
		var err error
		if isURL(p) {
			client, header, cerr := urlClient(g)
			if cerr != nil {
				return nil, cerr
			}
			snap, err = source.FetchURL(ctx, client, p, header, opts)
		} else if p == "-" {
			data, rerr := readLimited(g.In)
			if rerr != nil {
				errs = append(errs, fmt.Errorf("read standard input: %w", rerr))
				continue
			}
			snap, err = manifest.Parse("-", data, opts)
			if err == nil {
				err = manifest.NoteEmpty(snap, opts)
			}
		} else {
			snap, err = manifest.ReadPath(p, opts)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		updates = append(updates, source.Update{Source: p, Snapshot: snap})
	}
	if len(errs) > 0 {
		return nil, badInput(errors.Join(errs...))
	}
	return updates, nil
}

// desired is what the arguments of a one-shot command define together,
// merged by source.Merger as `watch` merges its sources: the first
// argument wins a conflict, and the conflict is reported in the same words.
type desired struct {
	// Changes add the desired pods, in priority order.
	Changes        []source.PodChange
	ConfigMaps     []*v1.ConfigMap
	Secrets        []*v1.Secret
	RuntimeClasses []*nodev1.RuntimeClass
	// Conflicts are the definitions that lose to an earlier argument's.
	Conflicts []source.Conflict
	// Warnings are what the manifests had dropped (manifestWarnings).
	Warnings []string
	// Updates are the arguments' snapshots, which know where their
	// objects are written (crossCheck).
	Updates []source.Update
	// from is the argument each pod (by UID) came from.
	from map[types.UID]string
}

// manifestWarnings are the warnings of the arguments' manifests, in
// argument order: what podrun dropped from them (without --strict).
func manifestWarnings(updates []source.Update) []string {
	var warnings []string
	for _, u := range updates {
		warnings = append(warnings, u.Snapshot.Warnings...)
	}
	return warnings
}

// writeWarnings prints manifest warnings under a report.
func writeWarnings(w io.Writer, warnings []string) {
	for _, warning := range warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// mergeArgs merges the arguments' updates (readArgs).
func mergeArgs(updates []source.Update) *desired {
	names := make([]string, len(updates))
	for i, u := range updates {
		names[i] = u.Source
	}
	m := source.NewMerger(names)
	d := &desired{from: map[types.UID]string{}}
	for _, u := range updates {
		d.Changes = append(d.Changes, m.Update(u)...)
		for _, p := range u.Snapshot.Pods {
			if _, ok := d.from[p.UID]; !ok {
				d.from[p.UID] = u.Source
			}
		}
	}
	// Every update so far only added (a later source never displaces an
	// earlier one's pod): the changes are the desired pods.
	d.ConfigMaps, d.Secrets = m.Objects()
	d.RuntimeClasses = m.RuntimeClasses()
	d.Conflicts = m.Conflicts()
	d.Warnings = manifestWarnings(updates)
	d.Updates = updates
	return d
}

// readMerged reads the arguments (readArgs) and merges them (mergeArgs) as
// once does, and refuses their conflicts as once does (conflictError).
func readMerged(ctx context.Context, g *globalOptions, paths []string) (*desired, error) {
	updates, err := readArgs(ctx, g, paths)
	if err != nil {
		return nil, err
	}
	d := mergeArgs(updates)
	if err := conflictError(d.Conflicts); err != nil {
		return nil, err
	}
	return d, nil
}

// Pods are the desired pods, in priority order.
func (d *desired) Pods() []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(d.Changes))
	for _, c := range d.Changes {
		pods = append(pods, c.Pod)
	}
	return pods
}

// From is the argument pod came from, as given, a URL as
// manifest.RedactedSource shows it: for messages.
func (d *desired) From(pod *v1.Pod) string { return manifest.RedactedSource(d.from[pod.UID]) }

// conflictError is the conflicts as a one-shot command refuses them: bad
// input, one line per definition left out, each as `watch` logs it
// (conflictLog).
func conflictError(conflicts []source.Conflict) error {
	if len(conflicts) == 0 {
		return nil
	}
	return badInput(conflictList(conflicts))
}

// conflictList is the conflicts' problems, one per definition left out.
func conflictList(conflicts []source.Conflict) manifest.ErrorList {
	list := make(manifest.ErrorList, len(conflicts))
	for i, c := range conflicts {
		list[i] = c.Problem
	}
	return list
}

// conflictLog logs the conflicts between `watch`'s sources as they come
// and go: each once when it appears, and when it is resolved.
type conflictLog struct {
	reported map[string]bool // by text
}

func (l *conflictLog) update(log *slog.Logger, conflicts []source.Conflict) {
	now := map[string]bool{}
	for _, c := range conflicts {
		msg := c.Problem.Error()
		now[msg] = true
		if !l.reported[msg] {
			log.Warn("manifest conflict", "source", manifest.RedactedSource(c.Source), "error", msg)
		}
	}
	for msg := range l.reported {
		if !now[msg] {
			log.Info("manifest conflict resolved", "error", msg)
		}
	}
	l.reported = now
}

// admitPod applies the privileged-container policy (runner.CheckPrivileged)
// to every container of the pod before it is handed to the runner, which
// applies it again to each container it makes: asking here lets `once`
// refuse the pod as bad input before anything starts, and `watch` keep the
// pod's last accepted spec.
func admitPod(pod *v1.Pod, allowPrivileged bool) error {
	if allowPrivileged {
		return nil
	}
	where := fmt.Sprintf("pod %s/%s", pod.Namespace, pod.Name)
	if src := pod.Annotations[manifest.AnnotationSource]; src != "" {
		where = manifest.RedactedSource(src) + ": " + where
	}
	var errs []error
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if err := runner.CheckPrivileged(&c, allowPrivileged); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

// podUpdates turns the merged sources' changes into runner updates, for
// `once` and `watch` alike. A pod admitPod refuses is left out (its last
// accepted spec, if any, stays), as is a change of an unknown kind; refused
// says why, one error each. Consecutive changes of one kind are one
// update, in order: the runner's host-port admission then sees pods that
// come together (the sources' first snapshots, once's arguments) together,
// and decides among them by their order alone.
func podUpdates(changes []source.PodChange, allowPrivileged bool) (updates []runner.PodUpdate, refused []error) {
	for _, c := range changes {
		var op runner.Op
		switch c.Op {
		case source.OpAdd:
			op = runner.OpAdd
		case source.OpUpdate:
			op = runner.OpUpdate
		case source.OpRemove:
			op = runner.OpRemove
		default:
			refused = append(refused, fmt.Errorf("pod %s/%s: change ignored: unknown operation %v", c.Pod.Namespace, c.Pod.Name, c.Op))
			continue
		}
		if op != runner.OpRemove {
			if err := admitPod(c.Pod, allowPrivileged); err != nil {
				refused = append(refused, err)
				continue
			}
		}
		if n := len(updates); n > 0 && updates[n-1].Op == op {
			updates[n-1].Pods = append(updates[n-1].Pods, c.Pod)
			continue
		}
		updates = append(updates, runner.PodUpdate{Op: op, Pods: []*v1.Pod{c.Pod}})
	}
	return updates, refused
}
