package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// TokenAPI requests service-account tokens (the serviceaccounts/token
// subresource; kubeclient.Client is one).
type TokenAPI interface {
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest,
		opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// TokenManager gives the service account tokens of pods' projected
// volumes (serviceAccountToken sources) from the apiserver's TokenRequest
// API, as the kubelet's token manager does: each token bound to its pod
// (boundObjectRef), which is what the node authorizer requires of a node
// that asks for one (and only for the service account of a pod bound to
// it), so the token dies with the pod. A token is cached by namespace,
// service account, audience, expiration and pod, and given again until 80
// % of its life has passed, or 24 h after it was issued (the kubelet's
// rule, and the runner's, which asks for a new one then).
//
// It is runner.TokenSource; the zero value with Client set is ready.
// Safe for concurrent use.
type TokenManager struct {
	// Client returns the apiserver's client, or why there is none yet
	// (the kubeconfig file does not exist yet): Token fails then, and the
	// runner tries again. The first client returned is kept.
	Client func() (TokenAPI, error)
	// Clock is the time the cache goes by; nil is the real clock.
	Clock clock.PassiveClock
	// Timeout bounds one TokenRequest (default 30 s).
	Timeout time.Duration

	mu     sync.Mutex
	client TokenAPI
	cache  map[tokenKey]issuedToken
}

// Token lifetimes, as the kubelet's token manager (and the runner's).
const (
	maxTokenAge         = 24 * time.Hour
	defaultTokenTimeout = 30 * time.Second
)

type tokenKey struct {
	namespace, serviceAccount, audience string
	expirationSeconds                   int64
	podName                             string
	podUID                              types.UID
}

type issuedToken struct {
	token           string
	issued, expires time.Time
}

// tokenRefreshTime is when a token must be replaced: at 80 % of its life,
// or 24 h after it was issued at the latest.
func tokenRefreshTime(issued, expires time.Time) time.Time {
	at := issued.Add(expires.Sub(issued) * 8 / 10)
	if latest := issued.Add(maxTokenAge); latest.Before(at) {
		return latest
	}
	return at
}

// Token returns a token of the service account serviceAccount in the pod's
// namespace, for audience ("": the apiserver's own audiences), bound to
// the pod, asked to be valid for expirationSeconds; with when it was
// issued and when it expires, as the apiserver says (it may shorten the
// life it was asked for). A cached token is returned until its refresh
// time.
func (m *TokenManager) Token(ctx context.Context, pod *v1.Pod, serviceAccount, audience string, expirationSeconds int64) (string, time.Time, time.Time, error) {
	key := tokenKey{namespace: pod.Namespace, serviceAccount: serviceAccount, audience: audience,
		expirationSeconds: expirationSeconds, podName: pod.Name, podUID: pod.UID}
	now := m.now()
	m.mu.Lock()
	m.forgetExpired(now)
	if t, ok := m.cache[key]; ok && now.Before(tokenRefreshTime(t.issued, t.expires)) {
		m.mu.Unlock()
		return t.token, t.issued, t.expires, nil
	}
	m.mu.Unlock()

	client, err := m.getClient()
	if err != nil {
		return "", time.Time{}, time.Time{}, err
	}
	var audiences []string
	if audience != "" {
		audiences = []string{audience}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = defaultTokenTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr, err := client.CreateToken(rctx, pod.Namespace, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, time.Time{}, fmt.Errorf("token request for %s/%s: %w", pod.Namespace, serviceAccount, err)
	}
	if tr.Status.Token == "" || tr.Status.ExpirationTimestamp.IsZero() {
		return "", time.Time{}, time.Time{}, fmt.Errorf("token request for %s/%s: the apiserver returned no token", pod.Namespace, serviceAccount)
	}
	// The life the apiserver granted is in its answer's spec (it may
	// have shortened the one asked for); it was issued that long before
	// it expires, by the apiserver's clock.
	life := expirationSeconds
	if tr.Spec.ExpirationSeconds != nil {
		life = *tr.Spec.ExpirationSeconds
	}
	t := issuedToken{token: tr.Status.Token, expires: tr.Status.ExpirationTimestamp.Time}
	t.issued = t.expires.Add(-time.Duration(life) * time.Second)
	m.mu.Lock()
	if m.cache == nil {
		m.cache = map[tokenKey]issuedToken{}
	}
	m.cache[key] = t
	m.mu.Unlock()
	return t.token, t.issued, t.expires, nil
}

func (m *TokenManager) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// forgetExpired drops the cached tokens that have expired: those of pods
// gone, whose tokens nobody asks for again.
func (m *TokenManager) forgetExpired(now time.Time) {
	for k, t := range m.cache {
		if !now.Before(t.expires) {
			delete(m.cache, k)
		}
	}
}

func (m *TokenManager) getClient() (TokenAPI, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client != nil {
		return m.client, nil
	}
	if m.Client == nil {
		return nil, errors.New("no apiserver client")
	}
	c, err := m.Client()
	if err != nil {
		return nil, fmt.Errorf("connect to the apiserver: %w", err)
	}
	m.client = c
	return c, nil
}
