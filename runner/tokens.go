package runner

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TokenSource gives the tokens of projected volumes' serviceAccountToken
// sources: in cluster mode the apiserver's TokenRequest
// (source.TokenManager). It is Config.Tokens; without one such volumes are
// refused (a static pod has no service account to speak for).
type TokenSource interface {
	// Token returns a token of the service account serviceAccount of the
	// pod's namespace for audience ("": the apiserver's own), bound to
	// the pod, asked to be valid for expirationSeconds; with when it was
	// issued and when it expires (the issuer may shorten its life). It
	// may return a token it returned before, until 80 % of that token's
	// life has passed (tokenRefreshTime). An error keeps the pod's
	// containers from starting, and is tried again.
	Token(ctx context.Context, pod *v1.Pod, serviceAccount, audience string, expirationSeconds int64) (token string, issued, expires time.Time, err error)
}

// maxTokenAge is the age at which a token is replaced whatever its life.
const maxTokenAge = 24 * time.Hour

// minTokenRefresh is the least time until a token just fetched is
// fetched again, should its issuer give one already near its end: not in
// a loop.
const minTokenRefresh = 10 * time.Second

// defaultTokenExpiration is the life asked for a token whose projection
// says none (the API's default).
const defaultTokenExpiration = 3600

// tokenRefreshTime is when a token issued at issued that expires at
// expires must be replaced: when 80 % of its life has passed, or 24 h
// after it was issued at the latest (the kubelet's rule, without its
// jitter).
func tokenRefreshTime(issued, expires time.Time) time.Time {
	at := issued.Add(expires.Sub(issued) * 8 / 10)
	if latest := issued.Add(maxTokenAge); latest.Before(at) {
		return latest
	}
	return at
}

// tokenFetch gets the tokens of one writing of a pod's volume files, and
// keeps when the first of them must be replaced.
type tokenFetch struct {
	ctx context.Context
	src TokenSource
	pod *v1.Pod
	now func() time.Time
	// refreshAt is when the first token got must be replaced; zero: none
	// was got.
	refreshAt time.Time
}

// newTokenFetch returns the token fetch of pod with src, nil without src.
func newTokenFetch(ctx context.Context, src TokenSource, pod *v1.Pod, now func() time.Time) *tokenFetch {
	if src == nil {
		return nil
	}
	return &tokenFetch{ctx: ctx, src: src, pod: pod, now: now}
}

// tokenFunc is podEnv.Token of the fetch: nil when there is none.
func (f *tokenFetch) tokenFunc() func(*v1.ServiceAccountTokenProjection) (string, error) {
	if f == nil {
		return nil
	}
	return f.get
}

// refresh is when the first token got must be replaced; zero: none.
func (f *tokenFetch) refresh() time.Time {
	if f == nil {
		return time.Time{}
	}
	return f.refreshAt
}

func (f *tokenFetch) get(tp *v1.ServiceAccountTokenProjection) (string, error) {
	sa := f.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(defaultTokenExpiration)
	if tp.ExpirationSeconds != nil {
		exp = *tp.ExpirationSeconds
	}
	tok, issued, expires, err := f.src.Token(f.ctx, f.pod, sa, tp.Audience, exp)
	if err != nil {
		return "", &tokenError{err: fmt.Errorf("failed to fetch token of service account %q: %w", sa, err)}
	}
	at := tokenRefreshTime(issued, expires)
	if soonest := f.now().Add(minTokenRefresh); at.Before(soonest) {
		at = soonest
	}
	if f.refreshAt.IsZero() || at.Before(f.refreshAt) {
		f.refreshAt = at
	}
	return tok, nil
}

// tokenError is a service account token the TokenSource did not give
// (the apiserver unreachable or refusing, no kubeconfig yet). The pod's
// containers wait as the kubelet shows a volume it cannot set up yet,
// with the default waiting reason (ContainerCreating, or PodInitializing
// in a pod with init containers) and this error as the message, and are tried again
// every 10 s: a start error with an AdmitReason (starterrors.go) is
// shown with that reason and retried without an exponential back-off,
// which suits a cause outside the pod that may end at any time.
type tokenError struct{ err error }

func (e *tokenError) Error() string       { return e.err.Error() }
func (e *tokenError) Unwrap() error       { return e.err }
func (e *tokenError) AdmitReason() string { return reasonContainerCreating }
