package cmd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/podrun/podrun/engine"
	"github.com/podrun/podrun/manifest"
)

// asks reports whether ref is the pod `logs` is asked for: its name
// (web-node1) or its manifest name (web), in the namespace given.
func (o *logsOptions) asks(ref engine.PodRef) bool {
	return ref.Namespace == o.Namespace && (ref.Name == o.Pod || ref.Name == o.Pod+"-"+o.NodeName)
}

// onePod fails when the containers all asked for are of more than one
// pod (UID): pods of one name from two manifest paths, which an older
// podrun let run together. Their logs are not mixed: the error names each
// pod's UID and source, and how to remove one.
func onePod(ctx context.Context, rt logEngine, all []*engine.Container, opts *logsOptions) error {
	uids := map[string]string{} // UID -> the pod's name
	for _, c := range all {
		if opts.asks(c.Pod) {
			uids[c.Pod.UID] = c.Pod.Namespace + "/" + c.Pod.Name
		}
	}
	if len(uids) < 2 {
		return nil
	}
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	sources := map[string]string{}
	for _, sb := range sbs {
		if _, ok := uids[sb.Pod.UID]; ok && sb.Source != "" {
			sources[sb.Pod.UID] = manifest.RedactedSource(sb.Source)
		}
	}
	var pods, names []string
	for uid, name := range uids {
		src := sources[uid]
		if src == "" {
			src = "its source is not recorded"
		}
		pods = append(pods, fmt.Sprintf("%s uid %s (%s)", name, uid, src))
		names = append(names, name)
	}
	sort.Strings(pods)
	sort.Strings(names)
	return badInputf("%s is %d pods on this node, whose logs are not mixed: %s; a node runs one pod of a name: "+
		"remove the one not wanted (podrun down its manifest)", names[0], len(uids), strings.Join(pods, ", "))
}
