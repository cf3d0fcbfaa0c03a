package nodeapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podrun/podrun/kubeclient"
)

// Defaults of the kubelet's KubeletConfiguration (authentication.webhook.
// cacheTTL, authorization.webhook.cacheAuthorizedTTL and
// cacheUnauthorizedTTL). The kubelet caches a refused token as long as an
// accepted one; podrun forgets it sooner, so a token that was just made
// works at once.
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultTokenFailureCacheTTL = 10 * time.Second
	DefaultAuthorizedTTL        = 5 * time.Minute
	DefaultUnauthorizedTTL      = 30 * time.Second
	// DefaultReviewTimeout bounds one TokenReview or SubjectAccessReview.
	DefaultReviewTimeout = 10 * time.Second
)

// ClientFunc returns the cluster's client, or an error while there is none
// yet (on a kubeadm box the kubeconfig is written after podrun starts).
// It is asked at every review that the cache does not answer.
type ClientFunc func() (Client, error)

// Client is what the node API asks of the apiserver: who a bearer token
// is and what a user may do (kubeclient.Client is one).
type Client interface {
	TokenReviews() *kubeclient.TokenReviews
	SubjectAccessReviews() *kubeclient.SubjectAccessReviews
}

// AuthenticatorOptions configure the node API's authentication, as the
// kubelet's KubeletConfiguration.authentication does. Anonymous requests
// are always refused.
type AuthenticatorOptions struct {
	// ClientCAFile is the CA bundle client certificates are verified
	// against (authentication.x509.clientCAFile): the user is the
	// certificate's CommonName, its groups its Organizations. The file is
	// read again when it changes, and may not exist yet: until it does, no
	// certificate is accepted. Empty: client certificates are ignored.
	ClientCAFile string
	// Client verifies bearer tokens with a TokenReview
	// (authentication.webhook.enabled). Nil: bearer tokens are refused.
	Client ClientFunc
	// CacheTTL is how long an accepted token is remembered
	// (DefaultTokenCacheTTL when 0); FailureCacheTTL a refused one
	// (DefaultTokenFailureCacheTTL when 0). Errors are never cached.
	CacheTTL        time.Duration
	FailureCacheTTL time.Duration
	// Timeout bounds one TokenReview (DefaultReviewTimeout when 0).
	Timeout time.Duration
}

// NewAuthenticator returns the node API's authenticator: a client
// certificate verified against ClientCAFile, else a bearer token verified
// by TokenReview (cached). A request with neither is not authenticated.
// As the kubelet's (DelegatingAuthenticatorConfig.New wraps its union in
// group.NewAuthenticatedGroupAdder), an authenticated user is also in the
// group system:authenticated, which RBAC bindings to "every authenticated
// user" name.
func NewAuthenticator(o AuthenticatorOptions) authenticator.Request {
	var all []authenticator.Request
	if o.ClientCAFile != "" {
		all = append(all, NewX509Authenticator(o.ClientCAFile))
	}
	if o.Client != nil {
		ttl, failTTL := o.CacheTTL, o.FailureCacheTTL
		if ttl <= 0 {
			ttl = DefaultTokenCacheTTL
		}
		if failTTL <= 0 {
			failTTL = DefaultTokenFailureCacheTTL
		}
		tr := &TokenReviewAuthenticator{Client: o.Client, Timeout: o.Timeout}
		all = append(all, bearertoken.New(tokencache.New(tr, false, ttl, failTTL)))
	}
	if len(all) == 0 {
		return authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
			return nil, false, nil
		})
	}
	return group.NewAuthenticatedGroupAdder(union.New(all...))
}

// NewX509Authenticator authenticates requests by their client certificate,
// verified against the CA bundle in caFile (read again when the file
// changes): user = CommonName, groups = Organizations, as the kubelet and
// the apiserver do.
func NewX509Authenticator(caFile string) authenticator.Request {
	ca := &caBundle{path: caFile}
	return x509request.NewDynamic(func() (x509.VerifyOptions, bool) {
		pool := ca.pool()
		if pool == nil {
			return x509.VerifyOptions{}, false
		}
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = pool
		return opts, true
	}, x509request.CommonNameUserConversion)
}

// caBundle is a CA file, read again when its size or modification time
// changes. A file that is missing or holds no certificate gives no pool.
type caBundle struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	cached  *x509.CertPool
}

func (c *caBundle) pool() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(c.path)
	if err != nil {
		c.cached, c.modTime, c.size = nil, time.Time{}, 0
		return nil
	}
	if c.cached != nil && fi.ModTime().Equal(c.modTime) && fi.Size() == c.size {
		return c.cached
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return nil
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		return nil
	}
	c.cached, c.modTime, c.size = p, fi.ModTime(), fi.Size()
	return p
}

// TokenReviewAuthenticator verifies a bearer token by a TokenReview
// (authentication.k8s.io/v1), as the kubelet's webhook authenticator does.
// It caches nothing: NewAuthenticator puts a cache in front of it.
type TokenReviewAuthenticator struct {
	Client ClientFunc
	// Timeout bounds one review (DefaultReviewTimeout when 0).
	Timeout time.Duration
}

// AuthenticateToken asks the apiserver who token belongs to. A token the
// apiserver does not accept is (nil, false, nil); an apiserver that cannot
// be asked is an error.
func (a *TokenReviewAuthenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	client, err := a.Client()
	if err != nil {
		return nil, false, fmt.Errorf("token review: no cluster client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(a.Timeout, DefaultReviewTimeout))
	defer cancel()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if auds, ok := authenticator.AudiencesFrom(ctx); ok {
		review.Spec.Audiences = auds
	}
	got, err := client.TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	if !got.Status.Authenticated {
		if got.Status.Error != "" {
			return nil, false, fmt.Errorf("token review: %s", got.Status.Error)
		}
		return nil, false, nil
	}
	u := got.Status.User
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	return &authenticator.Response{
		Audiences: got.Status.Audiences,
		User:      &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra},
	}, true, nil
}

// Authorizer decides whether a user may do what a request asks. It is the
// part of k8s.io/apiserver's authorizer.Authorizer that the node API uses,
// so any of its authorizers fits.
type Authorizer interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
}

// AlwaysAllow allows every authenticated request (the kubelet's
// authorization.mode AlwaysAllow).
var AlwaysAllow Authorizer = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
})

// AuthorizerOptions configure authorization by SubjectAccessReview (the
// kubelet's authorization.mode Webhook).
type AuthorizerOptions struct {
	Client ClientFunc
	// AuthorizedTTL is how long an allowed decision is remembered
	// (DefaultAuthorizedTTL when 0), UnauthorizedTTL a denied one
	// (DefaultUnauthorizedTTL when 0). Errors are never cached.
	AuthorizedTTL   time.Duration
	UnauthorizedTTL time.Duration
	// Timeout bounds one review (DefaultReviewTimeout when 0).
	Timeout time.Duration
}

// SARAuthorizer authorizes by SubjectAccessReview (authorization.k8s.io/v1),
// caching decisions as the kubelet's webhook authorizer does.
type SARAuthorizer struct {
	opts  AuthorizerOptions
	cache *cache.LRUExpireCache
}

// NewAuthorizer returns an authorizer that asks the apiserver.
func NewAuthorizer(o AuthorizerOptions) *SARAuthorizer {
	o.AuthorizedTTL = orDefault(o.AuthorizedTTL, DefaultAuthorizedTTL)
	o.UnauthorizedTTL = orDefault(o.UnauthorizedTTL, DefaultUnauthorizedTTL)
	o.Timeout = orDefault(o.Timeout, DefaultReviewTimeout)
	return &SARAuthorizer{opts: o, cache: cache.NewLRUExpireCache(8192)}
}

// Authorize asks the apiserver whether a's user may do a. Allowed is
// DecisionAllow, denied DecisionDeny, neither DecisionNoOpinion; an
// apiserver that cannot be asked is an error.
func (s *SARAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := sarSpec(a)
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
	}
	if v, ok := s.cache.Get(string(key)); ok {
		st := v.(authorizationv1.SubjectAccessReviewStatus)
		return decision(st), st.Reason, nil
	}
	client, err := s.opts.Client()
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: no cluster client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	got, err := client.SubjectAccessReviews().Create(ctx,
		&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
	}
	st := got.Status
	if st.Allowed {
		s.cache.Add(string(key), st, s.opts.AuthorizedTTL)
	} else if st.EvaluationError == "" {
		s.cache.Add(string(key), st, s.opts.UnauthorizedTTL)
	}
	return decision(st), st.Reason, nil
}

func decision(st authorizationv1.SubjectAccessReviewStatus) authorizer.Decision {
	switch {
	case st.Allowed:
		return authorizer.DecisionAllow
	case st.Denied:
		return authorizer.DecisionDeny
	default:
		return authorizer.DecisionNoOpinion
	}
}

func sarSpec(a authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{}
	if u := a.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if ex := u.GetExtra(); len(ex) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(ex))
			for k, v := range ex {
				spec.Extra[k] = v
			}
		}
	}
	if a.IsResourceRequest() {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace:   a.GetNamespace(),
			Verb:        a.GetVerb(),
			Group:       a.GetAPIGroup(),
			Version:     a.GetAPIVersion(),
			Resource:    a.GetResource(),
			Subresource: a.GetSubresource(),
			Name:        a.GetName(),
		}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	return spec
}

// requestAttributes maps a node API request to what is authorized, as the
// kubelet does (pkg/kubelet/server/auth.go, with its fine-grained
// authorization): the resource is the node, the subresource follows the
// path, the verb the method. Where there are two, the first allowed one
// wins: /pods and /healthz may be allowed as nodes/pods and nodes/healthz,
// or as nodes/proxy like everything else.
func requestAttributes(u user.Info, r *http.Request, nodeName string) []authorizer.Attributes {
	verb := verbFor(r.Method)
	path := r.URL.Path
	var subresources []string
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/spec"):
		subresources = append(subresources, "spec")
	case isSubpath(path, "/checkpoint"):
		subresources = append(subresources, "checkpoint")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, sub := range subresources {
		attrs = append(attrs, authorizer.AttributesRecord{
			User:            u,
			Verb:            verb,
			APIVersion:      "v1",
			Resource:        "nodes",
			Subresource:     sub,
			Name:            nodeName,
			ResourceRequest: true,
			Path:            path,
		})
	}
	return attrs
}

// verbFor is the API verb of an HTTP method, as the kubelet maps it
// (nodeAuthorizerAttributesGetter.GetRequestAttributes): any other method,
// HEAD among them, has the verb "".
func verbFor(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// isSubpath: path is sub or below it (/stats, /stats/summary; not /statsx).
func isSubpath(path, sub string) bool {
	return path == sub || (strings.HasPrefix(path, sub) && path[len(sub)] == '/')
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// errUnauthenticated is why a request with no credential is refused.
var errUnauthenticated = errors.New("no client certificate or bearer token")

// describeUser is a user for a log line: name [groups].
func describeUser(u user.Info) string {
	if g := u.GetGroups(); len(g) > 0 {
		return fmt.Sprintf("%s %v", u.GetName(), g)
	}
	return u.GetName()
}
