package enginetest

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// engineImagesLock is the file that HoldEngineImages locks: at a fixed
// path, not under $TMPDIR, so that test binaries run with other
// environments (go test runs packages at once; e2e runs apart) share it.
const engineImagesLock = "/tmp/podrun-test-engine-images.lock"

// HoldEngineImages takes, until the test ends, the lock of the tests on
// this machine whose use of the shared engine's images the others would
// disturb, waiting for it as long as another test holds it. Two such tests
// cannot run at once: e2e's TestImagesGC holds every image it did not make
// in use, with a container each, while it forces image GC; a test that
// removes an image it made and expects it gone (RunImageService with
// MakeImage) would find it in use by one of those containers.
func HoldEngineImages(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(engineImagesLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("the engine images lock: %v", err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		t.Logf("waiting for another test's hold of the engine's images (%s)", engineImagesLock)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		f.Close()
		t.Fatalf("the engine images lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // the lock goes with the file
}
