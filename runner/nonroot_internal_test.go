package runner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestImageUser(t *testing.T) {
	for _, tc := range []struct {
		user string
		uid  int64 // -1: no uid
		name string
	}{
		{user: "", uid: 0},
		{user: "0", uid: 0},
		{user: "1000", uid: 1000},
		{user: "1000:1000", uid: 1000},
		{user: "0:1000", uid: 0},
		{user: ":1000", uid: 0}, // a group alone: the user is root
		{user: "nobody", uid: -1, name: "nobody"},
		{user: "nobody:nogroup", uid: -1, name: "nobody"},
		{user: "root", uid: -1, name: "root"}, // a name is never looked up
		{user: "-1", uid: -1},
		{user: "99999999999999999999", uid: -1, name: "99999999999999999999"},
	} {
		uid, name := imageUser(tc.user)
		got := int64(-1)
		if uid != nil {
			got = *uid
		}
		if tc.user == "-1" {
			// Numeric, and invalid: verifyRunAsNonRoot's to refuse.
			if uid == nil || *uid != -1 || name != "" {
				t.Errorf("imageUser(%q) = %v, %q; want uid -1", tc.user, uid, name)
			}
			continue
		}
		if got != tc.uid || name != tc.name {
			t.Errorf("imageUser(%q) = %d, %q; want %d, %q", tc.user, got, name, tc.uid, tc.name)
		}
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	yes, no := true, false
	uid := func(n int64) *int64 { return &n }
	pod := func(podSC, ctrSC *v1.SecurityContext) *v1.Pod {
		p := &v1.Pod{}
		p.Name, p.Namespace, p.UID = "web-node1", "default", "u1"
		if podSC != nil {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: podSC.RunAsNonRoot, RunAsUser: podSC.RunAsUser}
		}
		p.Spec.Containers = []v1.Container{{Name: "app", SecurityContext: ctrSC}}
		return p
	}
	for _, tc := range []struct {
		name         string
		podSC, ctrSC *v1.SecurityContext
		imageUser    string
		want         string // a part of the error; "" for none
	}{
		{name: "not asked", imageUser: ""},
		{name: "false", ctrSC: &v1.SecurityContext{RunAsNonRoot: &no}, imageUser: ""},
		{name: "pod's, image root", podSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "",
			want: `container has runAsNonRoot and image will run as root (pod: "web-node1_default(u1)", container: app)`},
		{name: "image uid 0", ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "0:0",
			want: "image will run as root"},
		{name: "image uid 1000", ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "1000"},
		{name: "image name", ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "nobody",
			want: "image has non-numeric user (nobody), cannot verify user is non-root"},
		{name: "image uid too large", ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "4294967296",
			want: "image has an invalid user id (4294967296)"},
		{name: "runAsUser 0", ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: uid(0)}, imageUser: "1000",
			want: `container's runAsUser breaks non-root policy (pod: "web-node1_default(u1)", container: app)`},
		{name: "pod's runAsUser 0, container's nonroot", podSC: &v1.SecurityContext{RunAsUser: uid(0)},
			ctrSC: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "1000", want: "breaks non-root policy"},
		{name: "runAsUser 1000 over a root image", podSC: &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: uid(1000)},
			imageUser: ""},
		{name: "container's false wins", podSC: &v1.SecurityContext{RunAsNonRoot: &yes},
			ctrSC: &v1.SecurityContext{RunAsNonRoot: &no}, imageUser: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.podSC, tc.ctrSC)
			c := &p.Spec.Containers[0]
			var u *int64
			var name string
			if needsImageUser(p, c) {
				u, name = imageUser(tc.imageUser)
			}
			err := verifyRunAsNonRoot(p, c, u, name)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			case err != nil && errorReason(err) != "CreateContainerConfigError":
				t.Fatalf("reason %s, want CreateContainerConfigError", errorReason(err))
			}
		})
	}
}
