package source

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podrun/podrun/clustertest"

	"github.com/podrun/podrun/kubeclient"
)

// decodeJWT returns the claims of a JWT, unverified.
func decodeJWT(t *testing.T, tok string) clustertest.TokenClaims {
	t.Helper()
	c, err := clustertest.DecodeToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}

// TestTokenManagerAgainstAPIServer: as the node's own identity (the node
// authorizer's rules), the manager gets tokens bound to a pod of the node,
// caches them until 80 % of their life, and is refused those of a pod of
// another node.
func TestTokenManagerAgainstAPIServer(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	admin := c.Client(t)
	core := admin.CoreV1()
	ctx := context.Background()
	mustCreate(t, core.Nodes().Create, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}})
	mustCreate(t, core.ServiceAccounts("default").Create, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	mustCreate(t, core.ServiceAccounts("default").Create, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}})
	// The node authorizer lets a node ask only for the audiences its
	// pod's token volumes name.
	withSA := func(p *v1.Pod) {
		p.Spec.ServiceAccountName = "app"
		exp := int64(3607)
		p.Spec.Volumes = []v1.Volume{{Name: "tokens", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: &exp, Path: "vault-token"}},
			}}}}}
	}
	web := mustCreate(t, core.Pods("default").Create, clusterPod("web", "node1", withSA))
	other := mustCreate(t, core.Pods("default").Create, clusterPod("other", "node2", withSA))

	// The node's client, counting its token requests; no kubeconfig at
	// first.
	_, cfg := c.NodeKubeconfig(t, "node1")
	var requests atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/token") {
				requests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	var ready atomic.Bool
	clk := testingclock.NewFakeClock(time.Now())
	m := &TokenManager{Clock: clk, Client: func() (TokenAPI, error) {
		if !ready.Load() {
			return nil, errors.New("no kubeconfig yet")
		}
		return kubeclient.NewForConfig(cfg)
	}}

	if _, _, _, err := m.Token(ctx, web, "app", "", 3607); err == nil || !strings.Contains(err.Error(), "no kubeconfig yet") {
		t.Fatalf("without a client: %v", err)
	}
	ready.Store(true)
	before := time.Now()
	tok, issued, expires, err := m.Token(ctx, web, "app", "", 3607)
	if err != nil {
		t.Fatal(err)
	}
	if life := expires.Sub(issued); life != 3607*time.Second {
		t.Errorf("issued %s, expires %s: a life of %s", issued, expires, life)
	}
	if issued.Before(before.Add(-time.Minute)) || issued.After(time.Now().Add(time.Minute)) {
		t.Errorf("issued %s, not about now", issued)
	}
	claims := decodeJWT(t, tok)
	if claims.Subject != "system:serviceaccount:default:app" || claims.Kubernetes.Namespace != "default" ||
		claims.Kubernetes.ServiceAccount.Name != "app" {
		t.Errorf("claims %+v", claims)
	}
	if claims.Kubernetes.Pod.Name != "web" || claims.Kubernetes.Pod.UID != string(web.UID) {
		t.Errorf("token bound to pod %+v, want web %s", claims.Kubernetes.Pod, web.UID)
	}
	if !slices.Contains(claims.Audience, "https://kubernetes.default.svc.cluster.local") {
		t.Errorf("audience %v, want the apiserver's", claims.Audience)
	}
	if claims.Kubernetes.Node.Name != "node1" {
		t.Errorf("token's node %q, want node1 (the apiserver infers it from the pod)", claims.Kubernetes.Node.Name)
	}
	// The JWT's exp is a year away for 3607 s (the apiserver's extension
	// of the default token's life, with a warning after 3607 s): the
	// refresh goes by the life in the TokenRequest's answer, from its iat.
	if d := issued.Sub(time.Unix(claims.IssuedAt, 0)); d < -time.Second || d > time.Second {
		t.Errorf("issued %s, the JWT's iat %s", issued, time.Unix(claims.IssuedAt, 0))
	}

	// Cached until 80 % of its life (2885.6 s of 3607 s).
	step := func(to time.Duration) {
		clk.SetTime(issued.Add(to))
	}
	for _, at := range []time.Duration{time.Second, 2885 * time.Second} {
		step(at)
		again, _, _, err := m.Token(ctx, web, "app", "", 3607)
		if err != nil || again != tok || requests.Load() != 1 {
			t.Fatalf("at %s: same token %v, %d requests, %v; want the cached token", at, again == tok, requests.Load(), err)
		}
	}
	// Another audience, another expiration, another pod: other tokens.
	vault, _, _, err := m.Token(ctx, web, "app", "vault", 3607)
	if err != nil {
		t.Fatal(err)
	}
	if aud := decodeJWT(t, vault).Audience; len(aud) != 1 || aud[0] != "vault" {
		t.Errorf("audience %v, want [vault]", aud)
	}
	if _, _, _, err := m.Token(ctx, web, "app", "", 600); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	step(2886 * time.Second)
	renewed, _, _, err := m.Token(ctx, web, "app", "", 3607)
	if err != nil {
		t.Fatal(err)
	}
	if renewed == tok || requests.Load() != 4 {
		t.Errorf("after 80 %% of the life: new token %v, %d requests; want a new one", renewed != tok, requests.Load())
	}

	// A pod bound to another node: the node authorizer refuses.
	if _, _, _, err := m.Token(ctx, other, "app", "", 3607); !apierrors.IsForbidden(err) {
		t.Errorf("token of another node's pod: %v, want Forbidden", err)
	}
	// Nor may the node speak for a service account its pod does not use.
	if _, _, _, err := m.Token(ctx, web, "default", "", 3607); !apierrors.IsForbidden(err) {
		t.Errorf("token of another service account: %v, want Forbidden", err)
	}
}
