package runner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPortConflictMessageNamesAURLWithoutCredentials: the refused pod's
// status message (in /pods and its mirror, for whoever may read pods)
// names the holder's URL source without its userinfo and query.
func TestPortConflictMessageNamesAURLWithoutCredentials(t *testing.T) {
	port := HostPort{Protocol: v1.ProtocolTCP, HostIP: anyHostIP, Port: 8080, Container: "app", Field: "spec.containers[0].ports[0]"}
	c := PortConflict{
		Pod:  &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b-node1"}},
		Port: port,
		Holder: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a-node1",
			Annotations: map[string]string{annotationSource: "https://deploy:S3CRET@config.example/pods.yaml?sig=x"}}},
		HolderPort: port,
	}
	msg := c.statusMessage()
	if !strings.Contains(msg, "(spec.containers[0].ports[0].hostPort in https://config.example/pods.yaml)") ||
		strings.Contains(msg, "S3CRET") || strings.Contains(msg, "sig=x") {
		t.Errorf("message %q, want the holder's URL without its credentials", msg)
	}
}
