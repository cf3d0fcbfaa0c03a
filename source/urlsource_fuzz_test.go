package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/podrun/podrun/manifest"
)

// roundTripFunc answers requests in memory: the URL source's body handling
// is fuzzed without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// failingReader yields data, then fails with errRead.
type failingReader struct {
	r io.Reader
}

var errRead = errors.New("connection reset by fuzz")

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errRead
	}
	return n, err
}

// FuzzURLBody fuzzes what the URL source does with an answer: its status,
// its declared length (which may lie; -1 is a chunked body, less than -1
// one that ends where the connection does), a body that may break off, and
// the body itself. fetch must return (no panic, no hang), and:
//   - a status other than 200 (a 304 too: no request is conditional) is
//     an error naming the URL, and so is a body that breaks off, a
//     declared length over MaxFileSize or a body ended by the connection;
//   - otherwise the result is exactly Parse's of the body, and an empty
//     body (no document) is an error, never an empty snapshot.
func FuzzURLBody(f *testing.F) {
	addManifestSeeds(f, func(b []byte) { f.Add(b, uint16(200), int64(-1), false) })
	f.Add([]byte(""), uint16(200), int64(0), false)
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: []\n"), uint16(200), int64(-1), false)
	f.Add([]byte("oops"), uint16(500), int64(4), false)
	f.Add([]byte(""), uint16(304), int64(0), false)
	f.Add([]byte("kind: Pod"), uint16(200), int64(manifest.MaxFileSize+1), false)
	f.Add([]byte("kind: Pod\n"), uint16(200), int64(-1), true)
	f.Add([]byte("kind: Pod\n"), uint16(200), int64(-2), false)
	const url = "https://manifests.example/pods.yaml"
	f.Fuzz(func(t *testing.T, body []byte, status uint16, declared int64, breaks bool) {
		if status < 100 || status > 999 {
			status = 200
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var rd io.Reader = bytes.NewReader(body)
			if breaks {
				rd = &failingReader{r: rd}
			}
			resp := &http.Response{
				StatusCode:    int(status),
				Status:        http.StatusText(int(status)),
				Proto:         "HTTP/1.1",
				ProtoMajor:    1,
				ProtoMinor:    1,
				Header:        http.Header{"Etag": {`"v1"`}},
				Body:          io.NopCloser(rd),
				ContentLength: max(declared, -1),
				Request:       r,
			}
			if declared == -1 {
				resp.TransferEncoding = []string{"chunked"}
			}
			return resp, nil
		})}
		opts, err := fuzzOptions().Complete()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := fetch(context.Background(), client, url, nil, opts)

		switch {
		case status != http.StatusOK:
			if err == nil {
				t.Fatalf("status %d gave no error", status)
			}
			if !strings.Contains(err.Error(), url) {
				t.Fatalf("the error does not name the URL: %v", err)
			}
			return
		case declared > manifest.MaxFileSize:
			if err == nil {
				t.Fatalf("a declared length of %d gave no error", declared)
			}
			return
		case declared < -1:
			if err == nil || !strings.Contains(err.Error(), "neither Content-Length nor chunked encoding") {
				t.Fatalf("a body ended by the connection gave %v", err)
			}
			return
		case breaks:
			if err == nil || !strings.Contains(err.Error(), errRead.Error()) {
				t.Fatalf("a body that breaks off gave %v", err)
			}
			return
		}
		want, perr := manifest.Parse(url, body, opts)
		if perr != nil {
			if err == nil || err.Error() != perr.Error() {
				t.Fatalf("fetch error %v, Parse error %v: want the same", err, perr)
			}
			return
		}
		if want.Documents() == 0 {
			if err == nil {
				t.Fatalf("an empty body (no document) gave no error: %d pods", len(snap.Pods))
			}
			return
		}
		if err != nil {
			t.Fatalf("fetch: %v, but Parse of the body is fine", err)
		}
		if snap == nil || len(snap.Pods) != len(want.Pods) || len(snap.ConfigMaps) != len(want.ConfigMaps) ||
			len(snap.Secrets) != len(want.Secrets) {
			t.Fatalf("fetch gave other objects than Parse of the body")
		}
		for i := range want.Pods {
			if snap.Pods[i].UID != want.Pods[i].UID {
				t.Fatalf("pod %d: UID %s, Parse gives %s", i, snap.Pods[i].UID, want.Pods[i].UID)
			}
		}
	})
}
