package runner

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that a log and a test share.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// PullWaiters is how many syncs wait for a pull under way, of any image:
// a test waits for pods to have joined a shared pull before it acts.
func PullWaiters(r *Runner) int {
	r.pulls.mu.Lock()
	defer r.pulls.mu.Unlock()
	n := 0
	for _, c := range r.pulls.calls {
		n += c.waiters
	}
	return n
}
