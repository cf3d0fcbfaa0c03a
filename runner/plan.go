package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/security/apparmor"
	"k8s.io/utils/clock"

	"github.com/podrun/podrun/engine"
)

// What Plan says a sync would do to a pod (PodPlan.Action).
const (
	PlanCreate    = "create"    // nothing of the pod is in the runtime
	PlanRecreate  = "recreate"  // a new sandbox, and so every container anew
	PlanUpdate    = "update"    // the sandbox stays; Steps say what changes
	PlanRemove    = "remove"    // no manifest of its source defines it now
	PlanRefuse    = "refuse"    // its UID's objects, or its name, are another pod's (UIDConflict, NameConflict), or admission refuses it (NodePorts, OutOf<name>, SysctlForbidden, ...)
	PlanUnchanged = "unchanged" // nothing would change
)

// The steps of an update (PlanStep.Action).
const (
	StepStart           = "start"            // a container that does not run is started
	StepRestart         = "restart"          // a running container is stopped and made anew
	StepStop            = "stop"             // a running container is stopped for good
	StepUpdateResources = "update-resources" // resources changed in place, no restart
	StepStopSandbox     = "stop-sandbox"     // a sandbox that must not run is stopped
)

// reasonUndefined is why Plan removes a pod.
const reasonUndefined = "no manifest of its source defines it now"

// reasonUIDTaken is why Plan removes a pod whose UID another pod of its
// sources has now (a rename that kept metadata.uid).
const reasonUIDTaken = "no manifest of its source defines it now, and its uid is another pod's"

// PodPlan is what one sync of a pod would change, as Plan computes it.
type PodPlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Source is where the pod is defined (a file's absolute path, a URL),
	// or was, for one to remove.
	Source string `json:"source,omitempty"`
	// Action is PlanCreate, PlanRecreate, PlanUpdate, PlanRemove,
	// PlanRefuse or PlanUnchanged.
	Action string `json:"action"`
	// Reason says why a pod is recreated or removed.
	Reason string `json:"reason,omitempty"`
	// Diff is what changed in the sandbox's spec, when that is why the pod
	// is recreated.
	Diff
	// Steps say what an update does, container by container.
	Steps []PlanStep `json:"steps,omitempty"`
}

// PlanStep is one thing an update does.
type PlanStep struct {
	// Action is StepStart, StepRestart, StepStop, StepUpdateResources or
	// StepStopSandbox.
	Action string `json:"action"`
	// Container is the container acted on (none for StepStopSandbox).
	Container string `json:"container,omitempty"`
	Reason    string `json:"reason"`
	// Diff is what changed in the container's spec, when its spec or its
	// resources changed.
	Diff
}

// Diff is what changed between the spec an object was made from and the
// one it would be made from now.
type Diff struct {
	Changes []FieldChange `json:"changes,omitempty"`
	// Unrecorded means no record of the spec the object was made from is
	// kept (a podrun older than the records made it, or its record was
	// lost): that it changed is known, from its hash, but not what.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// FieldChange is one field that changed. Field is a path in the spec's
// JSON (`image`, `env[FOO].value`, `ports[0].hostPort`: items of lists
// whose items have names are named); Old and New are its JSON values,
// empty where the field is unset.
type FieldChange struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old,omitempty"`
	New   json.RawMessage `json:"new,omitempty"`
}

// PlanOptions are the node's settings the runner's decisions depend on,
// as its Config has them.
type PlanOptions struct {
	// ExtendedResources are the node's declared extended resources
	// (Config.ExtendedResources), which admission counts out.
	ExtendedResources map[v1.ResourceName]int64
	// Sysctls are the sysctls pods may set (Config.Sysctls); nil: the
	// kubelet's safe sysctls alone.
	Sysctls *SysctlAllowlist
	// AppArmor is the AppArmor admission (Config.AppArmor); nil: the
	// kubelet's own, which reads the host.
	AppArmor AppArmorValidator
}

// Plan says what a sync of each of pods would change now, from the
// runtime's state, by the runner's own decision (computePodActions), as a
// new podrun would make it: with no crash-loop back-off held and no probe
// verdict (what `podrun once` does). The fields that changed come from
// the spec records under rootDir (records.go), which Plan only reads. The
// pods come back in the order given, followed by the pods of the runtime
// that no pod given defines and whose source owned reports as one of its
// own (see PlanRemove), sorted by namespace and name; owned nil reports
// none.
//
// Removing leftovers that run nothing (dead containers of an older
// sandbox, a never started container the spec no longer needs) is not a
// change: each sync does it by the way.
//
// opts are the node's settings (zero: the defaults). A pod that the
// runner's admission refuses is PlanRefuse: a host port another pod holds
// (NodePorts), an extended resource the node has too few of
// (admitports.go, as a new runner given pods in this order decides it),
// or, when it does not run yet, its OS, a sysctl the node does not allow,
// an AppArmor profile the host cannot enforce (nodeRejection).
func Plan(ctx context.Context, rt engine.Runtime, rootDir string, pods []*v1.Pod, owned func(source string) bool,
	opts PlanOptions) ([]PodPlan, error) {

	states, err := listPods(ctx, rt)
	if err != nil {
		return nil, err
	}
	admission, err := planAdmission(ctx, rt, pods, states, opts.ExtendedResources)
	if err != nil {
		return nil, err
	}
	if opts.AppArmor == nil {
		opts.AppArmor = apparmor.NewValidator()
	}
	if opts.Sysctls == nil {
		opts.Sysctls, _ = NewSysctlAllowlist(nil)
	}
	recs := openRecords(rootDir)
	defer recs.Close()
	backoff := newBackoff(clock.RealClock{})
	out := make([]PodPlan, 0, len(pods))
	desired := make(map[string]bool, len(pods))
	var removes []PodPlan
	for _, pod := range pods {
		uid := string(pod.UID)
		desired[uid] = true
		own, others, why := uidConflict(pod, states[uid])
		own = own.clone()
		if why != nil && ownsAll(others, owned) {
			// As watch: they are of a pod no manifest of these sources
			// defines, removed, and this one starts afresh.
			ref := podRefOf(others)
			removes = append(removes, PodPlan{Namespace: ref.Namespace, Name: ref.Name, UID: uid,
				Source: others.latestSandbox().Source, Action: PlanRemove, Reason: reasonUIDTaken})
			own, why = &podState{}, nil
		}
		if why == nil {
			why = planName(pod, own, states, owned)
		}
		if why == nil {
			why = admission[uid]
		}
		if why == nil {
			why = nodeRejection(pod, own, opts.Sysctls, opts.AppArmor)
		}
		if why != nil {
			out = append(out, PodPlan{Namespace: pod.Namespace, Name: pod.Name, UID: uid,
				Source: pod.Annotations[annotationSource], Action: PlanRefuse, Reason: why.message})
			continue
		}
		out = append(out, planPod(pod, own, backoff, recs.of(uid)))
	}
	for uid, st := range states {
		sb := st.latestSandbox()
		if desired[uid] || sb == nil || owned == nil || !owned(sb.Source) {
			continue
		}
		removes = append(removes, PodPlan{Namespace: sb.Pod.Namespace, Name: sb.Pod.Name, UID: uid,
			Source: sb.Source, Action: PlanRemove, Reason: reasonUndefined})
	}
	sort.Slice(removes, func(i, j int) bool {
		a, b := removes[i], removes[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return append(out, removes...), nil
}

// planAdmission is why the runner's admission refuses each pod it
// refuses, by UID, as a new runner given pods in this order decides it
// (Runner.apply records every claim before any worker asks, and the
// first to ask decides them all): a pod whose latest sandbox runs with
// its spec's sandbox hash holds its ports first, and no pod has finished
// yet.
func planAdmission(ctx context.Context, rt engine.Runtime, pods []*v1.Pod, states map[string]*podState,
	declared map[v1.ResourceName]int64) (map[string]*rejection, error) {
	adm := newPortAdmission()
	for _, pod := range pods {
		adm.set(pod)
	}
	undecided := adm.undecidedLocked()
	if len(undecided) == 0 {
		return nil, nil
	}
	f := admissionFacts{running: make(map[*portClaim]bool, len(undecided))}
	gpus := false
	for _, u := range undecided {
		gpus = gpus || u.resources[ResourceNvidiaGPU] > 0
		f.running[u] = runsAsSpecified(u.pod, states[string(u.pod.UID)])
	}
	var err error
	if f.capacity, err = extendedCapacity(ctx, rt, declared, gpus); err != nil {
		return nil, err
	}
	out := map[string]*rejection{}
	for _, u := range adm.decide(undecided, f) {
		out[string(u.pod.UID)] = u.rejection()
	}
	return out, nil
}

// planName is why a sync refuses pod its name (nameconflict.go), or
// nil: a pod without a sandbox (own are its objects) whose namespace/name a pod of another UID
// has, that no watch of the sources owned covers (it would remove it
// first, and Plan lists it as removed) and that is not of pod's own
// source (replaced, as an edit replaces a pod).
func planName(pod *v1.Pod, own *podState, states map[string]*podState, owned func(source string) bool) *rejection {
	uid := string(pod.UID)
	if own != nil && len(own.Sandboxes) > 0 {
		return nil
	}
	for _, id := range sortedKeys(namesakes(states, uid, pod.Namespace, pod.Name)) {
		st := states[id]
		if !ownsAll(st, owned) && !sameSource(pod, st) {
			return nameConflict(pod, id, st)
		}
	}
	return nil
}

// ownsAll reports whether every sandbox of st is of a source owned
// says the plan covers (so that a watch of them would remove what they no
// longer define).
func ownsAll(st *podState, owned func(source string) bool) bool {
	if owned == nil || len(st.Sandboxes) == 0 {
		return false
	}
	for _, sb := range st.Sandboxes {
		if !owned(sb.Source) {
			return false
		}
	}
	return true
}

// planPod is what a sync of pod would change, from its state st; recs
// are its objects' spec records.
func planPod(pod *v1.Pod, st *podState, backoff *flowcontrol.Backoff, recs records) PodPlan {
	p := PodPlan{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		Source: pod.Annotations[annotationSource], Action: PlanUnchanged}
	if len(st.Sandboxes) == 0 && len(st.Containers) == 0 {
		p.Action = PlanCreate
		return p
	}
	if now := backoff.Clock.Now(); deadlinePassed(pod, st, now) {
		// Past its activeDeadlineSeconds: a sync stops what runs of it,
		// and starts nothing.
		a := &podActions{Kill: runningKills(st, reasonDeadlineKill)}
		if sb := st.latestSandbox(); sb != nil && sb.State == engine.StateRunning {
			a.StopSandbox = true
		}
		p.Steps = planSteps(pod, st, a, recs)
		if len(p.Steps) > 0 {
			p.Action = PlanUpdate
		}
		return p
	}
	a := computePodActions(pod, st, backoff, nil)
	if a.CreateSandbox {
		p.Action, p.Reason = PlanRecreate, a.SandboxReason
		if sb := st.latestSandbox(); sb != nil && a.SandboxReason == reasonSandboxChanged {
			p.Diff = diffRecords(recs.sandbox(sb), sandboxRecord(pod))
		}
		return p
	}
	p.Steps = planSteps(pod, st, a, recs)
	if len(p.Steps) > 0 {
		p.Action = PlanUpdate
	}
	return p
}

// planSteps turns an update's actions into steps, in the order of the
// pod's containers (init containers first), then the containers no longer
// in the spec, then sandboxes.
func planSteps(pod *v1.Pod, st *podState, a *podActions, recs records) []PlanStep {
	byName := map[string]*PlanStep{}
	var names []string
	add := func(name string, s PlanStep) *PlanStep {
		if _, ok := byName[name]; !ok {
			names = append(names, name)
		}
		byName[name] = &s
		return byName[name]
	}
	// changed is what changed in the container named name since its
	// latest run was made.
	changed := func(c *v1.Container) Diff {
		if last := st.latest(c.Name, ""); last != nil {
			return diffRecords(recs.container(last), containerRecord(c))
		}
		return Diff{}
	}
	start := func(c *v1.Container) {
		s := add(c.Name, PlanStep{Action: StepStart, Container: c.Name, Reason: a.Reasons[c.Name]})
		if s.Reason == reasonSpecChanged {
			s.Diff = changed(c)
		}
	}
	for _, c := range a.initStarts() {
		start(c)
	}
	for _, c := range a.StartApps {
		start(c)
	}
	for _, c := range a.StartCreated {
		add(c.Name, PlanStep{Action: StepStart, Container: c.Name, Reason: a.Reasons[c.Name]})
	}
	for _, k := range a.Kill {
		name := k.Container.Name
		switch s := byName[name]; {
		case s == nil:
			add(name, PlanStep{Action: StepStop, Container: name, Reason: k.Reason})
		case s.Action == StepStart:
			s.Action = StepRestart
		}
	}
	for _, c := range a.UpdateResources {
		if byName[c.Name] == nil {
			add(c.Name, PlanStep{Action: StepUpdateResources, Container: c.Name, Reason: a.Reasons[c.Name], Diff: changed(c)})
		}
	}

	rank := map[string]int{}
	for i, c := range allContainers(pod) {
		rank[c.Name] = i + 1
	}
	sort.SliceStable(names, func(i, j int) bool {
		ri, rj := rank[names[i]], rank[names[j]]
		switch {
		case ri != 0 && rj != 0:
			return ri < rj
		case ri != 0 || rj != 0:
			return ri != 0
		}
		return names[i] < names[j]
	})
	steps := make([]PlanStep, 0, len(names)+len(a.StopSandboxes)+1)
	for _, n := range names {
		steps = append(steps, *byName[n])
	}
	for range a.StopSandboxes {
		steps = append(steps, PlanStep{Action: StepStopSandbox, Reason: reasonNotLatest})
	}
	if a.StopSandbox {
		steps = append(steps, PlanStep{Action: StepStopSandbox, Reason: reasonPodFinished})
	}
	return steps
}

// diffRecords compares the record an object was made with (old, nil when
// none is kept) with the one it would be made with now.
func diffRecords(old, now []byte) Diff {
	var a, b any
	if old == nil || json.Unmarshal(old, &a) != nil || json.Unmarshal(now, &b) != nil {
		return Diff{Unrecorded: true}
	}
	var d Diff
	diffValues("", a, b, &d.Changes)
	return d
}

// diffValues appends the changes from a to b below path: objects field by
// field, lists of named items name by name, other lists of objects of the
// same length item by item, and anything else (scalars, lists of scalars
// such as a command) whole.
func diffValues(path string, a, b any, out *[]FieldChange) {
	if reflect.DeepEqual(a, b) {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(av)+len(bv))
			for k := range av {
				keys = append(keys, k)
			}
			for k := range bv {
				if _, ok := av[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if path != "" {
					p = path + "." + k
				}
				diffValues(p, av[k], bv[k], out)
			}
			return
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		an, aok := byItemName(av)
		bn, bok := byItemName(bv)
		if aok && bok {
			n := len(*out)
			seen := map[string]bool{}
			for _, items := range [][]any{av, bv} {
				for _, it := range items {
					name := it.(map[string]any)["name"].(string)
					if !seen[name] {
						seen[name] = true
						diffValues(path+"["+name+"]", an[name], bn[name], out)
					}
				}
			}
			if len(*out) == n {
				// The same items in another order (volumes
				// reordered, which changes the sandbox's hash): the
				// list, whole.
				*out = append(*out, FieldChange{Field: path, Old: rawJSON(a), New: rawJSON(b)})
			}
			return
		}
		if len(av) == len(bv) && allObjects(av) && allObjects(bv) {
			for i := range av {
				diffValues(path+"["+strconv.Itoa(i)+"]", av[i], bv[i], out)
			}
			return
		}
	}
	*out = append(*out, FieldChange{Field: path, Old: rawJSON(a), New: rawJSON(b)})
}

// byItemName indexes a list whose items are all objects with a distinct
// name.
func byItemName(items []any) (map[string]any, bool) {
	out := make(map[string]any, len(items))
	for _, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		name, ok := obj["name"].(string)
		if _, dup := out[name]; !ok || dup {
			return nil, false
		}
		out[name] = obj
	}
	return out, true
}

func allObjects(items []any) bool {
	for _, it := range items {
		if _, ok := it.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// rawJSON is v as compact JSON, nil for an unset field.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSpace(b.Bytes())
}
