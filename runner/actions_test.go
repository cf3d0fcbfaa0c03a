package runner

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/flowcontrol"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/engine"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	pod.Name = "p-node"
	pod.Namespace = "default"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "img:1"})
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "img:1"})
	}
	return pod
}

// stateBuilder makes runtime states for a pod.
type stateBuilder struct {
	pod *v1.Pod
	st  *podState
}

func newState(pod *v1.Pod) *stateBuilder { return &stateBuilder{pod: pod, st: &podState{}} }

func (b *stateBuilder) sandbox(id string, attempt int, state engine.State) *stateBuilder {
	b.st.Sandboxes = append(b.st.Sandboxes, &engine.Sandbox{ID: id, Attempt: attempt, State: state,
		Hash: SandboxHash(b.pod), CreatedAt: t0.Add(time.Duration(attempt) * time.Second)})
	return b
}

func (b *stateBuilder) container(sandboxID, name string, attempt int, state engine.State, exit int) *stateBuilder {
	spec := findContainer(b.pod, name)
	typ := engine.ContainerTypeApp
	for i := range b.pod.Spec.InitContainers {
		if b.pod.Spec.InitContainers[i].Name == name {
			typ = engine.ContainerTypeInit
		}
	}
	c := &engine.Container{ID: name + "-" + string(rune('0'+attempt)), SandboxID: sandboxID, Name: name, Type: typ,
		Attempt: attempt, State: state, ExitCode: exit, CreatedAt: t0.Add(time.Duration(attempt) * time.Minute)}
	if spec != nil {
		c.Hash, c.ResourcesHash = ContainerHash(spec), ResourcesHash(spec)
	}
	if state == engine.StateExited {
		c.FinishedAt = c.CreatedAt.Add(time.Second)
	}
	b.st.Containers = append(b.st.Containers, c)
	return b
}

// failedStart makes the last container added one whose start failed.
func (b *stateBuilder) failedStart() *stateBuilder {
	c := b.st.Containers[len(b.st.Containers)-1]
	c.State, c.ExitCode, c.Message = engine.StateExited, 128, "cannot join network of a non running container"
	c.StartedAt, c.FinishedAt = c.CreatedAt, c.CreatedAt
	return b
}

func (b *stateBuilder) build() *podState { b.st.sort(); return b.st }

func names(cs []*v1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func killNames(ks []killTarget) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Container.ID)
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sidecarsPod has sidecars s1 and s2 around init container i, and app
// containers a and b.
func sidecarsPod(policy v1.RestartPolicy) *v1.Pod {
	pod := testPod(policy, []string{"s1", "i", "s2"}, "a", "b")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers[0].RestartPolicy = &always
	pod.Spec.InitContainers[2].RestartPolicy = &always
	return pod
}

// computeWant is what TestComputePodActions checks of a sync's actions.
type computeWant struct {
	killPod, createSandbox, stopSandbox, podFailed bool
	sandboxAttempt                                 int
	init                                           string
	apps, kill, created                            []string
	update                                         []string
}

// computeCase is a case of the decision's table, which
// TestPlanPodFollowsComputePodActions runs through Plan too.
type computeCase struct {
	name  string
	pod   *v1.Pod
	state func(*v1.Pod) *podState
	want  computeWant
}

func computeCases() []computeCase {
	always, never, onFailure := v1.RestartPolicyAlways, v1.RestartPolicyNever, v1.RestartPolicyOnFailure
	type want = computeWant
	return []computeCase{
		{
			name:  "new pod starts sandbox and every app container",
			pod:   testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState { return newState(p).build() },
			want:  want{createSandbox: true, apps: []string{"a", "b"}},
		},
		{
			// As the kubelet: every sidecar and every app container of an
			// initialised pod is decided in one sync (and so Plan names
			// them all).
			name: "initialised pod: edited sidecars and an edited app are all replaced in one sync",
			pod:  sidecarsPod(always),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "s1", 0, engine.StateRunning, 0).
					container("s", "i", 0, engine.StateExited, 0).container("s", "s2", 0, engine.StateRunning, 0).
					container("s", "a", 0, engine.StateRunning, 0).container("s", "b", 0, engine.StateRunning, 0).build()
				for _, c := range st.Containers {
					if c.Name != "i" && c.Name != "b" {
						c.Hash = "before-the-edit"
					}
				}
				return st
			},
			want: want{init: "s1,s2", apps: []string{"a"}, kill: []string{"s1-0", "s2-0", "a-0"}},
		},
		{
			name: "initialised pod: every exited sidecar starts again, and a crashed app",
			pod:  sidecarsPod(always),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "s1", 0, engine.StateExited, 1).
					container("s", "i", 0, engine.StateExited, 0).container("s", "s2", 0, engine.StateExited, 137).
					container("s", "a", 0, engine.StateExited, 2).container("s", "b", 0, engine.StateRunning, 0).build()
			},
			want: want{init: "s1,s2", apps: []string{"a"}},
		},
		{
			// The kubelet kills a pod whose apps are done for good and
			// starts none of its init containers (computePodActions:
			// "InitContainersToStart = nil // To prevent the restartable
			// init containers to keep pod alive").
			name: "finished Never pod does not start its exited sidecars again",
			pod:  sidecarsPod(never),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "s1", 0, engine.StateExited, 1).
					container("s", "i", 0, engine.StateExited, 0).container("s", "s2", 0, engine.StateRunning, 0).
					container("s", "a", 0, engine.StateExited, 1).container("s", "b", 0, engine.StateExited, 0).build()
			},
			want: want{stopSandbox: true, kill: []string{"s2-0"}},
		},
		{
			name: "finished OnFailure pod does not start its exited sidecars again",
			pod:  sidecarsPod(onFailure),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "s1", 0, engine.StateExited, 0).
					container("s", "i", 0, engine.StateExited, 0).container("s", "s2", 0, engine.StateExited, 137).
					container("s", "a", 0, engine.StateExited, 0).container("s", "b", 0, engine.StateExited, 0).build()
			},
			want: want{stopSandbox: true},
		},
		{
			name:  "new pod with init containers starts the first init only",
			pod:   testPod(always, []string{"i1", "i2"}, "a"),
			state: func(p *v1.Pod) *podState { return newState(p).build() },
			want:  want{createSandbox: true, init: "i1"},
		},
		{
			name: "next init container after the first succeeded",
			pod:  testPod(always, []string{"i1", "i2"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateExited, 0).build()
			},
			want: want{init: "i2"},
		},
		{
			name: "running init container: wait",
			pod:  testPod(always, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateRunning, 0).build()
			},
			want: want{},
		},
		{
			name: "apps start once every init container succeeded",
			pod:  testPod(always, []string{"i1", "i2"}, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "i1", 0, engine.StateExited, 0).container("s", "i2", 0, engine.StateExited, 0).build()
			},
			want: want{apps: []string{"a", "b"}},
		},
		{
			name: "failed init under Never fails the pod",
			pod:  testPod(never, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateExited, 2).build()
			},
			want: want{podFailed: true, stopSandbox: true},
		},
		{
			name: "failed pod's stopped sandbox is not made again",
			pod:  testPod(never, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "i1", 0, engine.StateExited, 2).build()
			},
			want: want{podFailed: true},
		},
		{
			// Exit 0 but OOM-killed (Docker's State.OOMKilled, status
			// reason OOMKilled) is a failure to the kubelet's
			// isInitContainerFailed: the pod fails under Never ...
			name: "OOM-killed init that exited 0 under Never fails the pod",
			pod:  testPod(never, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateExited, 0).build()
				st.Containers[0].OOMKilled = true
				return st
			},
			want: want{podFailed: true, stopSandbox: true},
		},
		{
			// ... and the init container runs again under Always.
			name: "OOM-killed init that exited 0 under Always is restarted",
			pod:  testPod(always, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateExited, 0).build()
				st.Containers[0].OOMKilled = true
				return st
			},
			want: want{init: "i1"},
		},
		{
			name: "failed init under OnFailure is restarted",
			pod:  testPod(onFailure, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "i1", 0, engine.StateExited, 2).build()
			},
			want: want{init: "i1"},
		},
		{
			name: "Always restarts an app that exited 0",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateExited, 0).build()
			},
			want: want{apps: []string{"a"}},
		},
		{
			name: "OnFailure restarts an app that failed",
			pod:  testPod(onFailure, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "a", 0, engine.StateExited, 1).container("s", "b", 0, engine.StateRunning, 0).build()
			},
			want: want{apps: []string{"a"}},
		},
		{
			name: "OnFailure pod whose apps all succeeded is finished",
			pod:  testPod(onFailure, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateExited, 0).build()
			},
			want: want{stopSandbox: true},
		},
		{
			name: "OnFailure: an app that succeeded in an older sandbox is not run again in the new one",
			pod:  testPod(onFailure, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).container("s0", "a", 0, engine.StateExited, 0).
					container("s0", "b", 0, engine.StateExited, 137).
					sandbox("s1", 1, engine.StateRunning).container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			want: want{},
		},
		{
			name: "OnFailure: the pod is finished when the app that succeeded did so in an older sandbox",
			pod:  testPod(onFailure, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).container("s0", "a", 0, engine.StateExited, 0).
					container("s0", "b", 0, engine.StateExited, 137).
					sandbox("s1", 1, engine.StateRunning).container("s1", "b", 1, engine.StateExited, 0).build()
			},
			want: want{stopSandbox: true},
		},
		{
			name: "Never does not restart a failed app",
			pod:  testPod(never, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "a", 0, engine.StateExited, 3).container("s", "b", 0, engine.StateExited, 0).build()
			},
			want: want{stopSandbox: true},
		},
		{
			name: "finished Never pod with stopped sandbox stays finished",
			pod:  testPod(never, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateExited, 0).build()
			},
			want: want{},
		},
		{
			// Under restartPolicy Never the kubelet makes no new sandbox
			// for a pod that has run containers (computePodActions:
			// !shouldRestartOnFailure(pod) && attempt != 0 &&
			// len(podStatus.ContainerStatuses) != 0): what still runs is
			// stopped, nothing runs again.
			name: "Never: app still running after the sandbox died is stopped, not run again",
			pod:  testPod(never, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateRunning, 0).build()
			},
			want: want{kill: []string{"a-0"}},
		},
		{
			name: "Never: one app done, one running when the sandbox died",
			pod:  testPod(never, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).
					container("s", "a", 0, engine.StateExited, 0).container("s", "b", 0, engine.StateRunning, 0).build()
			},
			want: want{kill: []string{"b-0"}},
		},
		{
			name: "Never: init container running when the sandbox died",
			pod:  testPod(never, []string{"i"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "i", 0, engine.StateRunning, 0).build()
			},
			want: want{kill: []string{"i-0"}},
		},
		{
			// A container that may run again (its own restartPolicy or
			// rules) keeps the pod going: the pod is made again.
			name: "Never pod with a container of restartPolicy Always: made again after the sandbox died",
			pod: func() *v1.Pod {
				p := testPod(never, nil, "a")
				alwaysC := v1.ContainerRestartPolicyAlways
				p.Spec.Containers[0].RestartPolicy = &alwaysC
				return p
			}(),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateRunning, 0).build()
			},
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a"}},
		},
		{
			// Nothing ran yet: the sandbox is made again, as the
			// kubelet's (no container statuses).
			name: "Never: sandbox died before any container was made is made again",
			pod:  testPod(never, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).build()
			},
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a"}},
		},
		{
			name: "changed spec replaces only that container",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "a", 0, engine.StateRunning, 0).container("s", "b", 0, engine.StateRunning, 0).build()
				p.Spec.Containers[0].Command = []string{"new"}
				return st
			},
			want: want{apps: []string{"a"}, kill: []string{"a-0"}},
		},
		{
			name: "changed resources are updated in place",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).build()
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: mustQty("64Mi")}
				return st
			},
			want: want{update: []string{"a"}},
		},
		{
			name: "created but never started container is started, not replaced",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateCreated, 0).build()
			},
			want: want{created: []string{"a-0"}},
		},
		{
			name: "dead sandbox means a fresh pod with the next attempt",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "a", 0, engine.StateExited, 137).build()
			},
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a"}},
		},
		{
			name: "sandbox-level change recreates the pod",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				st := newState(p).sandbox("s", 2, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).build()
				p.Spec.HostNetwork = true
				return st
			},
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 3, apps: []string{"a"}},
		},
		{
			name: "container removed from the spec is stopped",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				b := newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0)
				b.st.Containers = append(b.st.Containers, &engine.Container{ID: "gone-0", SandboxID: "s", Name: "gone", State: engine.StateRunning})
				return b.build()
			},
			want: want{kill: []string{"gone-0"}},
		},
		{
			name: "steady pod needs nothing",
			pod:  testPod(always, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "i1", 0, engine.StateExited, 0).container("s", "a", 0, engine.StateRunning, 0).build()
			},
			want: want{},
		},
		{
			name: "init record collected after apps started: still initialised",
			pod:  testPod(always, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).container("s", "a", 0, engine.StateRunning, 0).build()
			},
			want: want{},
		},
	}
}

func TestComputePodActions(t *testing.T) {
	for _, tc := range computeCases() {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state(tc.pod)
			a := computePodActions(tc.pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			init := strings.Join(names(a.initStarts()), ",")
			var created []string
			for _, c := range a.StartCreated {
				created = append(created, c.ID)
			}
			got := computeWant{
				killPod: a.KillPod, createSandbox: a.CreateSandbox, stopSandbox: a.StopSandbox, podFailed: a.PodFailed,
				sandboxAttempt: a.SandboxAttempt, init: init, apps: names(a.StartApps), kill: killNames(a.Kill),
				created: created, update: names(a.UpdateResources),
			}
			w := tc.want
			if got.killPod != w.killPod || got.createSandbox != w.createSandbox || got.stopSandbox != w.stopSandbox ||
				got.podFailed != w.podFailed || got.sandboxAttempt != w.sandboxAttempt || got.init != w.init ||
				!eq(got.apps, w.apps) || !eq(got.kill, w.kill) || !eq(got.created, w.created) || !eq(got.update, w.update) {
				t.Errorf("actions:\n got %+v\nwant %+v", got, w)
			}
		})
	}
}

// TestCrashLoopBackoff follows one container through repeated crashes on a
// fake clock: 10 s, 20 s, 40 s ... capped at 5 min, and forgotten after the
// container has run for 10 minutes.
func TestCrashLoopBackoff(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	bo := newBackoff(clk)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &pod.Spec.Containers[0]
	key := backoffKey(pod, c)

	crash := func(attempt int, ranFor time.Duration) *podState {
		st := newState(pod).sandbox("s", 0, engine.StateRunning).build()
		start := clk.Now().Add(-ranFor)
		st.Containers = []*engine.Container{{ID: "a", SandboxID: "s", Name: "a", Attempt: attempt, State: engine.StateExited,
			ExitCode: 1, Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c), CreatedAt: start, StartedAt: start,
			FinishedAt: clk.Now()}}
		return st
	}
	// restartAfter reports how long after the crash the container restarts.
	restartAfter := func(st *podState) time.Duration {
		crashed := clk.Now()
		for i := 0; i < 400; i++ {
			a := computePodActions(pod, st, bo, nil)
			if len(a.StartApps) == 1 {
				bo.Next(key, st.Containers[0].FinishedAt)
				return clk.Since(crashed)
			}
			if w, ok := a.Waiting["a"]; !ok || w.Reason != "CrashLoopBackOff" || w.Retry <= 0 {
				t.Fatalf("held without CrashLoopBackOff: %+v", a.Waiting)
			}
			clk.Step(time.Second)
		}
		t.Fatal("never restarted")
		return 0
	}

	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, w := range want {
		got := restartAfter(crash(i, time.Second))
		if got != w {
			t.Fatalf("crash %d: restarted after %s, want %s", i, got, w)
		}
		clk.Step(time.Second) // the new run lasts a second
	}
	// A run of over 10 minutes resets the back-off.
	clk.Step(11 * time.Minute)
	if got := restartAfter(crash(len(want), 11*time.Minute)); got != 0 {
		t.Fatalf("after a long run: restarted after %s, want at once", got)
	}
}

// TestNewSandboxKeepsCrashLoopBackOff: the kubelet applies the crash-loop
// back-off to every start (SyncPod's start() calls doBackOff, which looks
// at the newest exited run of the name, in any sandbox), so also to the
// starts into a new sandbox, made after the old one died: a container
// crash-looping in the old sandbox waits out its back-off, in the sync
// that makes the new sandbox and in the syncs after it, while the others
// start.
func TestNewSandboxKeepsCrashLoopBackOff(t *testing.T) {
	now := t0.Add(time.Hour)
	finished := now.Add(-2 * time.Second)
	// crashLooped adds the third crash of name, 2 s ago, in sandbox s, with
	// the back-off (at 40 s) its restarts have built.
	crashLooped := func(pod *v1.Pod, st *podState, bo *flowcontrol.Backoff, name string) {
		c := findContainer(pod, name)
		typ := engine.ContainerTypeApp
		if len(pod.Spec.InitContainers) > 0 && pod.Spec.InitContainers[0].Name == name {
			typ = engine.ContainerTypeInit
		}
		st.Containers = append(st.Containers, &engine.Container{ID: name + "-3", SandboxID: "s", Name: name, Type: typ,
			Attempt: 3, State: engine.StateExited, ExitCode: 1, Hash: ContainerHash(c), ResourcesHash: ResourcesHash(c),
			CreatedAt: finished.Add(-time.Second), StartedAt: finished.Add(-time.Second), FinishedAt: finished})
		st.sort()
		for range 3 {
			bo.Next(backoffKey(pod, c), finished)
		}
	}
	always := v1.RestartPolicyAlways
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		crashing string
		state    func(*v1.Pod) *podState
		newSB    bool
		init     string
		apps     []string
	}{
		{
			name:     "app, sync that makes the new sandbox",
			pod:      testPod(always, nil, "a", "b"),
			crashing: "a",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "b", 0, engine.StateExited, 137).build()
			},
			newSB: true,
			apps:  []string{"b"},
		},
		{
			name:     "app, sync in the new sandbox",
			pod:      testPod(always, nil, "a", "b"),
			crashing: "a",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).container("s", "b", 0, engine.StateExited, 137).
					sandbox("s2", 1, engine.StateRunning).container("s2", "b", 4, engine.StateRunning, 0).build()
			},
		},
		{
			name:     "first init container, sync that makes the new sandbox",
			pod:      testPod(always, []string{"i"}, "a"),
			crashing: "i",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).build()
			},
			newSB: true,
		},
		{
			name:     "first init container, sync in the new sandbox",
			pod:      testPod(always, []string{"i"}, "a"),
			crashing: "i",
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateExited).sandbox("s2", 1, engine.StateRunning).build()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bo := newBackoff(testclock.NewFakeClock(now))
			st := tc.state(tc.pod)
			crashLooped(tc.pod, st, bo, tc.crashing)
			a := computePodActions(tc.pod, st, bo, nil)
			if a.CreateSandbox != tc.newSB {
				t.Fatalf("precondition: CreateSandbox %v, want %v", a.CreateSandbox, tc.newSB)
			}
			if w := a.Waiting[tc.crashing]; w.Reason != "CrashLoopBackOff" || w.Retry != 38*time.Second {
				t.Errorf("%s waits %+v, want CrashLoopBackOff for 38s", tc.crashing, w)
			}
			if got := strings.Join(names(a.initStarts()), ","); got != tc.init || !eq(names(a.StartApps), tc.apps) {
				t.Errorf("starts init %q, apps %v; want init %q, apps %v", got, names(a.StartApps), tc.init, tc.apps)
			}
		})
	}
}

func mustQty(s string) resource.Quantity { return resource.MustParse(s) }

func containerIDs(cs []*engine.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func sandboxIDs(sbs []*engine.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

// TestReconcileSandboxes: a pod left with more than one sandbox (a killed
// podrun's start completed after the next podrun made the pod anew) is
// brought to exactly one, and what older attempts left is removed, by the
// sync's own actions.
func TestReconcileSandboxes(t *testing.T) {
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	type want struct {
		killPod, createSandbox bool
		sandboxAttempt         int
		apps, kill             []string
		stopSandboxes          []string
		remove                 []string
		removeSandboxes        []string
		converged              bool
	}
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(*v1.Pod) *podState
		want  want
	}{
		{
			name: "two running sandboxes, the latest running: the older one and its containers are stopped",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateRunning).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateRunning, 0).container("s0", "b", 0, engine.StateCreated, 0).
					container("s1", "a", 1, engine.StateRunning, 0).container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			// b-0 never ran: removed, not stopped; s0 still runs, so it
			// is not removed yet.
			want: want{kill: []string{"a-0"}, stopSandboxes: []string{"s0"}, remove: []string{"b-0"}},
		},
		{
			name: "older sandbox running, the latest created: the pod is made again in the latest",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateRunning).sandbox("s1", 1, engine.StateCreated).
					container("s0", "a", 0, engine.StateRunning, 0).container("s0", "b", 0, engine.StateRunning, 0).build()
			},
			// KillPod stops every sandbox that has not exited, s0 too;
			// the created s1 is adopted (RunSandbox with its attempt)
			// rather than attempt 2 made.
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a", "b"}},
		},
		{
			name: "the latest sandbox died with containers created in it: they and it go as the pod is made anew",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).
					container("s0", "a", 0, engine.StateCreated, 0).container("s0", "b", 0, engine.StateCreated, 0).build()
			},
			// The sync that makes s1 is the last `once` may run: nothing
			// is left for a later one.
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a", "b"},
				remove: []string{"a-0", "b-0"}, removeSandboxes: []string{"s0"}},
		},
		{
			name: "the latest sandbox died: its exited runs stay for the status, and so does it",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).
					container("s0", "a", 0, engine.StateExited, 137).container("s0", "b", 0, engine.StateCreated, 0).build()
			},
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 1, apps: []string{"a", "b"}, remove: []string{"b-0"}},
		},
		{
			name: "the latest sandbox died: older dead sandboxes go with what the status does not read",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateExited).
					sandbox("s2", 2, engine.StateCreated).sandbox("s3", 3, engine.StateExited).
					container("s0", "a", 0, engine.StateExited, 1).container("s1", "a", 1, engine.StateExited, 1).
					container("s1", "a", 2, engine.StateExited, 1).container("s2", "a", 3, engine.StateCreated, 0).build()
			},
			// a-3 never ran; a-2 is a's lastState once a-4 runs, and
			// keeps s1; s3 is replaced by attempt 4.
			want: want{killPod: true, createSandbox: true, sandboxAttempt: 4, apps: []string{"a"},
				remove: []string{"a-3", "a-1", "a-0"}, removeSandboxes: []string{"s3", "s2", "s0"}},
		},
		{
			name: "older dead sandbox whose containers are superseded twice: all removed",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateExited, 137).container("s0", "b", 0, engine.StateExited, 137).
					container("s1", "a", 1, engine.StateExited, 1).container("s1", "b", 1, engine.StateExited, 1).
					container("s1", "a", 2, engine.StateRunning, 0).container("s1", "b", 2, engine.StateRunning, 0).build()
			},
			want: want{remove: []string{"a-0", "b-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "older dead sandbox keeps the run before the newest (lastState, logs --previous), and so is kept",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateExited, 137).container("s0", "b", 0, engine.StateExited, 137).
					container("s1", "a", 1, engine.StateRunning, 0).container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			// As the kubelet's status, which reads every container of the
			// pod whatever its sandbox; garbage collection trims them.
			want: want{converged: true},
		},
		{
			name: "older dead sandbox keeps the latest container of a name, and so is kept",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateExited, 137).container("s0", "b", 0, engine.StateExited, 137).
					container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			// a-0 is a's state in the status until a runs in s1, b-0
			// b's lastState.
			want: want{apps: []string{"a"}, converged: true},
		},
		{
			name: "dead container of an older sandbox no longer in the spec is removed",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				b := newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s1", "a", 1, engine.StateRunning, 0)
				b.st.Containers = append(b.st.Containers, &engine.Container{ID: "gone-0", SandboxID: "s0", Name: "gone", State: engine.StateExited})
				return b.build()
			},
			want: want{remove: []string{"gone-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "created containers of an older sandbox are removed, even the latest of their name",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateCreated, 0).container("s0", "b", 0, engine.StateCreated, 0).
					container("s1", "a", 1, engine.StateRunning, 0).build()
			},
			want: want{apps: []string{"b"}, remove: []string{"a-0", "b-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "failed starts in an older dead sandbox are no runs before: they go, and it with them",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateCreated, 0).failedStart().
					container("s0", "b", 0, engine.StateCreated, 0).failedStart().
					container("s1", "a", 1, engine.StateRunning, 0).container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			want: want{remove: []string{"a-0", "b-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "the newest run of a name is kept though its start failed",
			pod:  testPod(always, nil, "a", "b"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateCreated, 0).failedStart().
					container("s1", "b", 1, engine.StateRunning, 0).build()
			},
			// a-0 is a's state in the status until a runs in s1.
			want: want{apps: []string{"a"}, converged: true},
		},
		{
			name: "a run that ended with the runtime's error is a run before, kept",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				b := newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateExited, 255).container("s1", "a", 1, engine.StateRunning, 0)
				b.st.Containers[0].StartedAt = b.st.Containers[0].CreatedAt
				b.st.Containers[0].Message = "Unknown: the runtime restarted"
				return b.build()
			},
			want: want{converged: true},
		},
		{
			name: "an older sandbox created and never started is removed with its created containers",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateCreated).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateCreated, 0).container("s1", "a", 1, engine.StateRunning, 0).build()
			},
			want: want{remove: []string{"a-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "a superseded created container in the latest sandbox is removed, not stopped",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "a", 0, engine.StateCreated, 0).container("s", "a", 1, engine.StateRunning, 0).build()
			},
			want: want{remove: []string{"a-0"}, converged: true},
		},
		{
			name: "dead containers of the latest sandbox are left to garbage collection",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateRunning).
					container("s0", "a", 0, engine.StateExited, 1).container("s1", "a", 1, engine.StateExited, 1).
					container("s1", "a", 2, engine.StateRunning, 0).build()
			},
			want: want{remove: []string{"a-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "a finished pod's older sandbox that runs is stopped",
			pod:  testPod(never, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateRunning).sandbox("s1", 1, engine.StateExited).
					container("s1", "a", 1, engine.StateExited, 0).build()
			},
			want: want{stopSandboxes: []string{"s0"}},
		},
		{
			name: "a finished pod's older dead sandbox goes with the container created in it",
			pod:  testPod(never, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s0", 0, engine.StateExited).sandbox("s1", 1, engine.StateExited).
					container("s0", "a", 0, engine.StateCreated, 0).container("s1", "a", 1, engine.StateExited, 0).build()
			},
			want: want{remove: []string{"a-0"}, removeSandboxes: []string{"s0"}, converged: true},
		},
		{
			name: "a running container of an older attempt in the latest sandbox is not converged",
			pod:  testPod(always, nil, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "a", 0, engine.StateRunning, 0).container("s", "a", 1, engine.StateRunning, 0).build()
			},
			want: want{kill: []string{"a-0"}},
		},
		{
			name: "steady pod is converged and needs nothing",
			pod:  testPod(always, []string{"i1"}, "a"),
			state: func(p *v1.Pod) *podState {
				return newState(p).sandbox("s", 0, engine.StateRunning).
					container("s", "i1", 0, engine.StateExited, 0).container("s", "a", 0, engine.StateRunning, 0).build()
			},
			want: want{converged: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state(tc.pod)
			a := computePodActions(tc.pod, st, newBackoff(testclock.NewFakeClock(t0.Add(time.Hour))), nil)
			got := want{
				killPod: a.KillPod, createSandbox: a.CreateSandbox, sandboxAttempt: a.SandboxAttempt,
				apps: names(a.StartApps), kill: killNames(a.Kill), stopSandboxes: sandboxIDs(a.StopSandboxes),
				remove: containerIDs(a.Remove), removeSandboxes: sandboxIDs(a.RemoveSandboxes), converged: a.Converged(),
			}
			w := tc.want
			if got.killPod != w.killPod || got.createSandbox != w.createSandbox || got.sandboxAttempt != w.sandboxAttempt ||
				!eq(got.apps, w.apps) || !eq(got.kill, w.kill) || !eq(got.stopSandboxes, w.stopSandboxes) ||
				!eq(got.remove, w.remove) || !eq(got.removeSandboxes, w.removeSandboxes) || got.converged != w.converged {
				t.Errorf("actions:\n got %+v\nwant %+v", got, w)
			}
			// Nothing is both stopped and removed, and nothing that runs is
			// removed.
			for _, c := range a.Remove {
				if c.State == engine.StateRunning {
					t.Errorf("removes running container %s", c.ID)
				}
				for _, k := range a.Kill {
					if k.Container == c {
						t.Errorf("%s both stopped and removed", c.ID)
					}
				}
			}
			// The latest sandbox goes only when a new one replaces it.
			for _, sb := range a.RemoveSandboxes {
				if sb.State == engine.StateRunning || sb == st.latestSandbox() && (!a.CreateSandbox || a.AdoptSandbox == sb) {
					t.Errorf("removes sandbox %s (%s)", sb.ID, sb.State)
				}
			}
		})
	}
}
