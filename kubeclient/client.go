// Package kubeclient is podrun's client of the Kubernetes apiserver in
// cluster mode: typed clients of the few resources podrun uses, over
// client-go REST clients whose scheme holds only their API groups.
//
// client-go's clientset (and every typed client it is made of) links
// k8s.io/client-go/kubernetes/scheme, whose init registers all ~60 API
// groups: about 10 MiB of RSS in every podrun process, cluster mode or
// not (docs/memory.md). main_test.go fails when it is linked again.
package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Scheme holds the API groups podrun talks to the apiserver in, and
// nothing else: the objects it sends, receives and records Events about.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, nodev1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kubeclient scheme: %v", err)) // the generated registrations cannot fail
		}
	}
	// As client-go's scheme: the unversioned meta types (Status, options,
	// WatchEvent) in the core group's version.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

// Typed clients of the resources podrun uses.
type (
	Pods           = Resource[*corev1.Pod, *corev1.PodList]
	Nodes          = Resource[*corev1.Node, *corev1.NodeList]
	Services       = Resource[*corev1.Service, *corev1.ServiceList]
	Leases         = Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	RuntimeClasses = Resource[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]
	// Reviews are only created: their lists are never asked for.
	TokenReviews         = Resource[*authenticationv1.TokenReview, *authenticationv1.TokenReview]
	SubjectAccessReviews = Resource[*authorizationv1.SubjectAccessReview, *authorizationv1.SubjectAccessReview]
)

// Client is a client of one apiserver. Its methods are safe for
// concurrent use.
type Client struct {
	core, coordination, node, authentication, authorization *rest.RESTClient
}

// RequestTimeout bounds each request to the apiserver that is answered
// once - get, list, create, update, patch, delete, reviews, tokens, events
// - from its sending to the end of its answer: an apiserver (or a proxy
// before it) that takes a request and never answers must not hold its
// caller (the node status updater, the pod status manager, the event
// sink, an informer's list) for good. A minute is the apiserver's own
// default --request-timeout: a working apiserver answers, or ends the
// request itself with a 504, within it, so the bound cuts short only an
// answer that would never come. Callers that must act sooner bound their
// calls more tightly (the Lease renewal by its renew interval, status
// updates by 30 s). Watches are long-lived and are not bounded here
// (their own timeoutSeconds ends them, and informers watch again); so the
// bound is the HTTP client's per request, not rest.Config.Timeout or
// http.Client.Timeout, which would end every watch after it.
const RequestTimeout = time.Minute

// NewForConfig makes a client as client-go's kubernetes.NewForConfig does:
// one HTTP client (connections) and one QPS/Burst rate limiter shared by
// every API group. Every request but a watch is bounded by RequestTimeout.
func NewForConfig(c *rest.Config) (*Client, error) {
	return newForConfig(c, RequestTimeout)
}

// newForConfig is NewForConfig with each request that is not a watch
// bounded by requestTimeout.
func newForConfig(c *rest.Config, requestTimeout time.Duration) (*Client, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &boundedRequests{next: rt, timeout: requestTimeout}
	})
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("apiserver client: %w", err)
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("apiserver client: burst must be positive with QPS %v", cfg.QPS)
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var cl Client
	for _, g := range []struct {
		to      **rest.RESTClient
		apiPath string
		gv      schema.GroupVersion
	}{
		{&cl.core, "/api", corev1.SchemeGroupVersion},
		{&cl.coordination, "/apis", coordinationv1.SchemeGroupVersion},
		{&cl.node, "/apis", nodev1.SchemeGroupVersion},
		{&cl.authentication, "/apis", authenticationv1.SchemeGroupVersion},
		{&cl.authorization, "/apis", authorizationv1.SchemeGroupVersion},
	} {
		if *g.to, err = newRESTClient(cfg, httpClient, g.apiPath, g.gv); err != nil {
			return nil, err
		}
	}
	return &cl, nil
}

// newRESTClient is one API group's REST client, set up as client-go's
// generated typed clients set theirs up.
func newRESTClient(cfg rest.Config, httpClient *http.Client, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg.APIPath = apiPath
	cfg.GroupVersion = &gv
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(&cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("apiserver client of %s: %w", gv, err)
	}
	return rc, nil
}

// CoreREST is the REST client of the core group (v1), for list-watches of
// resources by name (cache.NewListWatchFromClient).
func (c *Client) CoreREST() rest.Interface { return c.core }

// Pods are the pods in namespace ("": all namespaces, to list and watch).
func (c *Client) Pods(namespace string) *Pods {
	return newResource[corev1.Pod, corev1.PodList](c.core, "pods", namespace)
}

// Services are the Services in namespace ("": all namespaces, to list
// and watch, as the kubelet's service lister).
func (c *Client) Services(namespace string) *Services {
	return newResource[corev1.Service, corev1.ServiceList](c.core, "services", namespace)
}

// Nodes are the cluster's nodes.
func (c *Client) Nodes() *Nodes {
	return newResource[corev1.Node, corev1.NodeList](c.core, "nodes", "")
}

// Leases are the Leases in namespace.
func (c *Client) Leases(namespace string) *Leases {
	return newResource[coordinationv1.Lease, coordinationv1.LeaseList](c.coordination, "leases", namespace)
}

// RuntimeClasses are the cluster's RuntimeClasses.
func (c *Client) RuntimeClasses() *RuntimeClasses {
	return newResource[nodev1.RuntimeClass, nodev1.RuntimeClassList](c.node, "runtimeclasses", "")
}

// TokenReviews ask the apiserver who a bearer token is.
func (c *Client) TokenReviews() *TokenReviews {
	return newResource[authenticationv1.TokenReview, authenticationv1.TokenReview](c.authentication, "tokenreviews", "")
}

// SubjectAccessReviews ask the apiserver whether a user may do a thing.
func (c *Client) SubjectAccessReviews() *SubjectAccessReviews {
	return newResource[authorizationv1.SubjectAccessReview, authorizationv1.SubjectAccessReview](c.authorization,
		"subjectaccessreviews", "")
}

// CreateToken requests a token of the service account namespace/name (the
// serviceaccounts/token subresource, as the typed client's CreateToken).
func (c *Client) CreateToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest,
	opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := c.core.Post().Namespace(namespace).Resource("serviceaccounts").Name(name).SubResource("token").
		VersionedParams(&opts, parameterCodec).Body(req).Do(ctx).Into(out)
	return out, err
}

// EventSink writes Events for client-go's event broadcaster
// (record.EventSink), each in its own namespace, as the typed client's
// EventSinkImpl does. The sink's interface takes no context: each write
// is bounded by the client's RequestTimeout, so that an apiserver that
// never answers one does not stop the broadcaster's delivery of the
// next.
type EventSink struct {
	Client *Client
}

// Create posts a new Event.
func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.Client.core.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Update replaces an Event (a repeat's count and last timestamp).
func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.Client.core.Put().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Patch applies a strategic-merge patch to an Event.
func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.Client.core.Patch(types.StrategicMergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").
		Resource("events").Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
