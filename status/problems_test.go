package status

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestProblemLogForgetsGonePods: the problems of a pod gone from the API
// and the runner are dropped (a cluster that makes and deletes pods while
// the apiserver refuses their patches would grow them for good); those of
// live pods, and the client's, stay.
func TestProblemLogForgetsGonePods(t *testing.T) {
	p := &problemLog{logger: slog.New(slog.DiscardHandler)}
	for _, key := range []string{"status ns/live", "mirror ns/live", "status ns/gone", "delete ns/gone", "client"} {
		p.set(key, errors.New("refused"), "test")
	}
	p.forgetPods(map[string]*v1.Pod{"ns/live": {}})
	got := slices.Sorted(maps.Keys(p.msgs))
	if want := []string{"client", "mirror ns/live", "status ns/live"}; !slices.Equal(got, want) {
		t.Errorf("problems kept %v, want %v", got, want)
	}
}
