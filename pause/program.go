package pause

// Program is the pause program podrun's built infra image runs as each
// sandbox's PID 1: a static executable of a few hundred bytes for the
// architecture podrun was built for (pause/asm), which does what Run does
// without a Go runtime, so that a sandbox costs kilobytes rather than a
// podrun's worth of memory. It is nil where none is assembled; the image
// then runs `podrun pause`. The slice is shared: do not modify it.
func Program() []byte { return program }
