package clustertest

import (
	"context"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestStartListsNamespaces starts etcd and kube-apiserver, lists
// namespaces as the admin, and checks that a node kubeconfig has the node
// authorizer's rights: it may get its own Node, not list Secrets.
func TestStartListsNamespaces(t *testing.T) {
	c := Start(t, Options{})
	ctx := context.Background()
	nss, err := c.Client(t).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	for _, want := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !slices.Contains(names, want) {
			t.Errorf("namespaces %v lack %s", names, want)
		}
	}

	_, cfg := c.NodeKubeconfig(t, "n1")
	node, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attr authorizationv1.ResourceAttributes
		want bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: "n1"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "n1"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "kube-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces", Name: "default"}, false},
	} {
		attr := tc.attr
		r, err := node.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.want {
			t.Errorf("node n1 %s %s/%s %q: allowed=%v, want %v (%s)", attr.Verb, attr.Namespace, attr.Resource, attr.Name, r.Status.Allowed, tc.want, r.Status.Reason)
		}
	}
	// The identity the apiserver sees is the node's.
	who, err := node.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := who.Status.UserInfo; u.Username != "system:node:n1" || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("node kubeconfig authenticates as %s %v", u.Username, u.Groups)
	}

	// The apiserver can be stopped and started again, on the same port.
	c.StopAPIServer()
	if _, err := c.Client(t).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("apiserver answered while stopped")
	}
	c.StartAPIServer()
	if _, err := c.Client(t).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("after restart: %v", err)
	}
}
