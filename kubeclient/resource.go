package kubeclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// object is an API object of one kind (*v1.Pod, ...).
type object interface {
	runtime.Object
	GetName() string
}

// Resource is a typed client of one resource, in one namespace or in
// none: the calls of client-go's generated typed clients that podrun
// makes, as they make them. It is not client-go's gentype, which links
// client-go/testing and server-side apply's structured-merge-diff (about
// 0.6 MiB of RSS) for methods podrun never calls.
type Resource[T object, L runtime.Object] struct {
	client    *rest.RESTClient
	resource  string
	namespace string
	newObject func() T
	newList   func() L
}

// newResource is the client of resource (objects O, lists LO) through
// client, in namespace ("": none, or all).
func newResource[O, LO any, T interface {
	*O
	object
}, L interface {
	*LO
	runtime.Object
}](client *rest.RESTClient, resource, namespace string) *Resource[T, L] {
	return &Resource[T, L]{client: client, resource: resource, namespace: namespace,
		newObject: func() T { return T(new(O)) }, newList: func() L { return L(new(LO)) }}
}

func (r *Resource[T, L]) request(req *rest.Request) *rest.Request {
	return req.NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.resource)
}

// timeout is a list's or watch's own timeout, none if not set.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// Get reads the object name.
func (r *Resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Get()).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

// List reads the objects opts select.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.request(r.client.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

// Watch streams the changes of the objects opts select.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request(r.client.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

// Create creates obj.
func (r *Resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Post()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj.
func (r *Resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.put(ctx, obj, opts)
}

// UpdateStatus replaces obj's status subresource.
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.put(ctx, obj, opts, "status")
}

func (r *Resource[T, L]) put(ctx context.Context, obj T, opts metav1.UpdateOptions, subresource ...string) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Put()).Name(obj.GetName()).SubResource(subresource...).
		VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Delete deletes the object name.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.request(r.client.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

// Patch patches the object name (or its subresource).
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions,
	subresources ...string) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Patch(pt)).Name(name).SubResource(subresources...).
		VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}
