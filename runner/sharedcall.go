package runner

import (
	"context"
	"sync"
)

// sharedCalls runs one call of a key for every caller that asks for it
// while it runs (as singleflight), but each caller waits on its own
// context: one that goes (its pod removed) leaves the call to the others,
// and the call's context ends only once every caller has gone.
type sharedCalls struct {
	mu    sync.Mutex
	calls map[string]*sharedCall
}

type sharedCall struct {
	done    chan struct{} // closed when val and err are set
	val     any
	err     error
	waiters int // guarded by sharedCalls.mu
	cancel  context.CancelFunc
}

// do returns the outcome of fn for key: of the call under way for key,
// or of a new one. fn runs on a goroutine of its own with a context that
// keeps ctx's values and ends when every caller waiting for it has gone.
// A caller whose ctx ends first returns ctx's error.
func (s *sharedCalls) do(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]*sharedCall{}
	}
	c := s.calls[key]
	if c == nil {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &sharedCall{done: make(chan struct{}), cancel: cancel}
		s.calls[key] = c
		go func() {
			defer close(c.done)
			defer cancel()
			v, err := fn(cctx)
			s.mu.Lock()
			c.val, c.err = v, err
			s.forgetLocked(key, c)
			s.mu.Unlock()
		}()
	}
	c.waiters++
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		s.mu.Lock()
		c.waiters--
		if c.waiters == 0 {
			// Nobody waits for it any more: a later caller makes a new
			// call rather than join one that is ending.
			c.cancel()
			s.forgetLocked(key, c)
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// forgetLocked drops c as key's call under way, if it still is (s.mu held).
func (s *sharedCalls) forgetLocked(key string, c *sharedCall) {
	if s.calls[key] == c {
		delete(s.calls, key)
	}
}
