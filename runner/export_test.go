package runner

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
