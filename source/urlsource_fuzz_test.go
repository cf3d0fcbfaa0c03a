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
//   - a status other than 200 (or 304 to a conditional request) is an
//     error naming the URL, and so is a body that breaks off, a declared
//     length over MaxFileSize or a body ended by the connection;
//   - a 304 to a conditional request is "not modified", with no error;
//   - otherwise the result is exactly Parse's of the body, and an empty
//     body (no document) is an error, never an empty snapshot.
func FuzzURLBody(f *testing.F) {
	addManifestSeeds(f, func(b []byte) { f.Add(b, uint16(200), int64(-1), false, false) })
	f.Add([]byte(""), uint16(200), int64(0), false, false)
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: []\n"), uint16(200), int64(-1), false, false)
	f.Add([]byte("oops"), uint16(500), int64(4), false, false)
	f.Add([]byte(""), uint16(304), int64(0), false, true)
	f.Add([]byte("kind: Pod"), uint16(200), int64(manifest.MaxFileSize+1), false, false)
	f.Add([]byte("kind: Pod\n"), uint16(200), int64(-1), true, false)
	f.Add([]byte("kind: Pod\n"), uint16(200), int64(-2), false, false)
	const url = "https://manifests.example/pods.yaml"
	f.Fuzz(func(t *testing.T, body []byte, status uint16, declared int64, breaks, conditional bool) {
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
		val := validators{}
		if conditional {
			val.etag = `"v0"`
		}
		opts, err := fuzzOptions().Complete()
		if err != nil {
			t.Fatal(err)
		}
		res, err := fetch(context.Background(), client, url, nil, val, opts)

		switch {
		case status == http.StatusNotModified && conditional:
			if err != nil || !res.notModified {
				t.Fatalf("304 to a conditional request: %+v, %v; want not modified", res, err)
			}
			return
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
				t.Fatalf("an empty body (no document) gave no error: %d pods", len(res.snap.Pods))
			}
			return
		}
		if err != nil {
			t.Fatalf("fetch: %v, but Parse of the body is fine", err)
		}
		if res.snap == nil || len(res.snap.Pods) != len(want.Pods) || len(res.snap.ConfigMaps) != len(want.ConfigMaps) ||
			len(res.snap.Secrets) != len(want.Secrets) {
			t.Fatalf("fetch gave other objects than Parse of the body")
		}
		for i := range want.Pods {
			if res.snap.Pods[i].UID != want.Pods[i].UID {
				t.Fatalf("pod %d: UID %s, Parse gives %s", i, res.snap.Pods[i].UID, want.Pods[i].UID)
			}
		}
		if res.validators.etag != `"v1"` {
			t.Fatalf("the ETag of a good answer was not kept: %+v", res.validators)
		}
	})
}
