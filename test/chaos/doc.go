// Package chaos is podrun's reliability suite: it drives the podrun binary
// against the real dockerd and breaks things on purpose — SIGKILL during
// bring-up, a dockerd restart under `watch`, a corpus of bad manifests,
// faulty manifest URLs, a crash-looping container — and checks that podrun
// converges, never duplicates a container, keeps the last good manifests
// and stays within bounds.
//
// The tests are behind the build tag chaos (`make chaos`, or
// test/chaos/run.sh); docs/reliability.md describes them and their latest
// figures. CHAOS_FULL=1 runs the full counts, the default is the short
// form CI runs.
package chaos
