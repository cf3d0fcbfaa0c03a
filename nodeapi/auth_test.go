package nodeapi

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestRequestAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "jane"}
	for _, tc := range []struct {
		method, path string
		verb         string
		subresources []string
	}{
		{"GET", "/containerLogs/default/web/app", "get", []string{"proxy"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/syncloop", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/statsx", "get", []string{"proxy"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"GET", "/spec/", "get", []string{"spec"}},
		{"POST", "/checkpoint/default/web/app", "create", []string{"checkpoint"}},
		{"POST", "/exec/default/web/app", "create", []string{"proxy"}},
		{"GET", "/exec/default/web/app", "get", []string{"proxy"}},
		{"POST", "/attach/default/web/app", "create", []string{"proxy"}},
		{"POST", "/run/default/web/app", "create", []string{"proxy"}},
		{"POST", "/portForward/default/web", "create", []string{"proxy"}},
		{"PUT", "/anything", "update", []string{"proxy"}},
		{"PATCH", "/anything", "patch", []string{"proxy"}},
		{"DELETE", "/anything", "delete", []string{"proxy"}},
		// HEAD is no verb the kubelet knows (nodeAuthorizerAttributesGetter).
		{"HEAD", "/healthz", "", []string{"healthz", "proxy"}},
		{"HEAD", "/containerLogs/default/web/app", "", []string{"proxy"}},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		attrs := requestAttributes(u, r, "node1")
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.GetSubresource())
			if a.GetVerb() != tc.verb || a.GetResource() != "nodes" || a.GetAPIVersion() != "v1" || a.GetAPIGroup() != "" ||
				a.GetName() != "node1" || a.GetNamespace() != "" || !a.IsResourceRequest() || a.GetUser() != u || a.GetPath() != tc.path {
				t.Errorf("%s %s: attributes %+v", tc.method, tc.path, a)
			}
		}
		if len(subs) != len(tc.subresources) {
			t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, subs, tc.subresources)
			continue
		}
		for i := range subs {
			if subs[i] != tc.subresources[i] {
				t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, subs, tc.subresources)
			}
		}
	}
}

func TestCABundleReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	a, b := newTestCA(t, "a"), newTestCA(t, "b")
	path := a.writeFile(t, dir)
	ca := &caBundle{path: path}
	p1 := ca.pool()
	if p1 == nil {
		t.Fatal("no pool from a CA file")
	}
	if ca.pool() != p1 {
		t.Error("an unchanged file was read again")
	}
	// Another CA of another size: read again.
	bundle := append(append([]byte{}, a.pem...), b.pem...)
	writeFile(t, path, bundle)
	if p2 := ca.pool(); p2 == nil || p2 == p1 {
		t.Error("a changed file was not read again")
	}
	writeFile(t, path, []byte("not a certificate"))
	if ca.pool() != nil {
		t.Error("a file with no certificate gave a pool")
	}
}
