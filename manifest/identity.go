package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations podrun sets on every static pod. The kubernetes.io ones are
// the kubelet's (pkg/kubelet/types), so tools that know static pods read
// podrun's too.
const (
	// AnnotationConfigHash holds ContentHash of the pod. (The kubelet stores
	// its content-derived UID here; podrun's UID is not content-derived.)
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigSource is the kind of source: ConfigSourceFile,
	// ConfigSourceHTTP or ConfigSourceAPI.
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigSeen is when the pod was read, RFC 3339 with
	// nanoseconds.
	AnnotationConfigSeen = "kubernetes.io/config.seen"
	// AnnotationSource is the file path or URL the pod was read from.
	AnnotationSource = "podrun.io/source"

	ConfigSourceFile = "file"
	ConfigSourceHTTP = "http"
	ConfigSourceAPI  = "api"
)

// staticPodName is the kubelet's name for a static pod: unique among nodes.
func staticPodName(name, nodeName string) string {
	return name + "-" + nodeName
}

// StaticPodUID is the UID podrun gives a static pod: a hash of where the pod
// is defined (node, source, namespace, name as written) and not of what it
// says, so that editing a manifest updates the pod instead of replacing it.
// It is formatted as an RFC 9562 version 8 UUID (the kind for
// application-defined hashes).
func StaticPodUID(nodeName, source, namespace, name string) types.UID {
	h := sha256.New()
	// Length-prefixed parts, so that no two different tuples hash alike.
	for _, part := range []string{"podrun static pod v1", nodeName, source, namespace, name} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	s := hex.EncodeToString(b[:])
	return types.UID(s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32])
}

// SourceKind is the kubernetes.io/config.source value for a source as given
// on the command line: "http" for http(s) URLs, "file" for the rest
// (paths and "-" for stdin). Pods of the apiserver source are "api" and do
// not come through Parse.
func SourceKind(source string) string {
	lower := strings.ToLower(source)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return ConfigSourceHTTP
	}
	return ConfigSourceFile
}

// FromAPI reports whether obj (a pod, ConfigMap or Secret podrun holds)
// came from the apiserver source. podrun sets kubernetes.io/config.source
// on everything it reads, over what a manifest says, so the answer is
// podrun's, never a manifest's: the apiserver's objects serve only its
// pods, and local objects only local pods.
func FromAPI(obj metav1.Object) bool {
	return obj.GetAnnotations()[AnnotationConfigSource] == ConfigSourceAPI
}

// SetConfigSource records where obj was read (kind: ConfigSourceFile,
// ConfigSourceHTTP or ConfigSourceAPI), in place of any value given.
func SetConfigSource(obj metav1.Object, kind string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationConfigSource] = kind
	obj.SetAnnotations(a)
}

// RedactedSource is source as it may be shown off the node or to others
// than root (a mirror pod's annotation, a metric label, a log line): a
// URL without its userinfo, query and fragment, where a presigned URL or
// user:password@ carries credentials. A path is shown as it is.
func RedactedSource(source string) string {
	if SourceKind(source) != ConfigSourceHTTP {
		return source
	}
	u, err := url.Parse(source)
	if err != nil {
		return "(a manifest URL that does not parse)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// RedactSourceAnnotation sets pod's podrun.io/source to its RedactedSource,
// for a pod shown off the node or to others than root (/pods, a mirror
// pod). pod must be the caller's copy: the pods podrun runs keep the whole
// URL, which names their source and their UIDs.
func RedactSourceAnnotation(pod *v1.Pod) {
	if src, ok := pod.Annotations[AnnotationSource]; ok {
		pod.Annotations[AnnotationSource] = RedactedSource(src)
	}
}

// applyIdentity turns a defaulted, validated pod into the static pod podrun
// runs: name <name>-<node>, spec.nodeName, UID and annotations. source is the
// identity source (an absolute path or a URL), seen the time it was read
// (seenAnnotation).
func applyIdentity(pod *v1.Pod, nodeName, source, seen string) {
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.UID == "" {
		pod.UID = StaticPodUID(nodeName, source, pod.Namespace, pod.Name)
	}
	pod.Name = staticPodName(pod.Name, nodeName)
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationSource] = source
	SetConfigSource(pod, SourceKind(source))
	pod.Annotations[AnnotationConfigHash] = ContentHash(pod)
	pod.Annotations[AnnotationConfigSeen] = seen
}

// seenAnnotation is the kubernetes.io/config.seen value for a read at t.
func seenAnnotation(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ContentHash is the hex SHA-256 of the pod's content as podrun runs it:
// metadata and spec, defaulted, without podrun's own annotations (which
// change on every read) and without status. Two reads of an unchanged
// manifest give the same hash; any change to what the pod says gives
// another. The sync core compares it to decide whether a pod changed.
func ContentHash(pod *v1.Pod) string {
	w := hashWork.Get().(*contentHashWork)
	defer hashWork.Put(w)
	// A shallow copy, read only by the encoder; the annotations kept are a
	// map of their own.
	c := &w.pod
	*c = v1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
	defer func() { *c = v1.Pod{} }() // nothing of the pod stays reachable from the pool
	c.Annotations = nil
	for k, v := range pod.Annotations {
		switch k {
		case AnnotationConfigHash, AnnotationConfigSource, AnnotationConfigSeen, AnnotationSource, "kubernetes.io/config.mirror":
			continue
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[k] = v
	}
	// Metadata that the API server (not the manifest) owns does not count.
	c.ResourceVersion, c.Generation, c.ManagedFields = "", 0, nil
	// encoding/json writes struct fields in a fixed order and map keys
	// sorted: the same pod always gives the same bytes. The Encoder writes
	// what json.Marshal returns, and a newline, which is not hashed.
	w.buf.Reset()
	if err := json.NewEncoder(&w.buf).Encode(c); err != nil {
		// A decoded v1.Pod always marshals; a failure is a programming error.
		panic(fmt.Sprintf("manifest: marshal pod %s/%s: %v", pod.Namespace, pod.Name, err))
	}
	sum := sha256.Sum256(bytes.TrimSuffix(w.buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:])
}

// contentHashWork is what ContentHash needs besides the pod: the copy it
// encodes (a v1.Pod is over a kilobyte) and the buffer it encodes into.
// They are reused: parsing a file of many pods hashes every one of them.
type contentHashWork struct {
	pod v1.Pod
	buf bytes.Buffer
}

var hashWork = sync.Pool{New: func() any { return new(contentHashWork) }}
