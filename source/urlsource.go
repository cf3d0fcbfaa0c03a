package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/podrun/podrun/manifest"
)

// URLSource polls a manifest URL for `podrun watch`.
//
// It keeps the last good content: an error status, a timeout, a TLS
// failure, a body over MaxFileSize, a body whose end cannot be told from a
// dropped connection (see unframed), an empty body (blank or only
// comments) and invalid content are reported in Update.Err and change
// nothing that runs. A body that is explicitly an empty List (`kind: List`,
// `items: []`) is good and removes the URL's pods.
type URLSource struct {
	// URL is the manifest URL as configured (--manifest-url); it is the
	// identity source of its pods.
	URL string
	// Header is sent with every request (--manifest-url-header); see
	// ParseHeaders. A Host entry sets the request's Host. It goes only to
	// the URL's host and port: a redirect elsewhere is followed without it
	// (and without Authorization and Cookie), one from https to http is
	// refused.
	Header http.Header
	// Client makes the requests; nil means NewHTTPClient(""). Its Timeout
	// bounds a whole request, body included. Its CheckRedirect, if any,
	// is asked after the rules of Header.
	Client *http.Client
	// Interval is --http-check-frequency; zero means
	// DefaultHTTPCheckFrequency. The first fetch is at once.
	Interval time.Duration
	// Options for reading the manifests.
	Options manifest.Options
	// Logger hears about errors (once when they appear, once when they
	// clear) and changes; nil means slog.Default().
	Logger *slog.Logger

	hooks *sourceHooks
}

// NewHTTPClient returns the client for manifest URLs: a DefaultHTTPTimeout
// limit on a whole request (body included, so a server that drips bytes
// cannot hold a poll forever), TLS verification on, proxies from the
// environment. caFile, if not empty, is a PEM file of CA certificates
// trusted in addition to the system's (--manifest-url-ca).
func NewHTTPClient(caFile string) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			// No system pool on this machine: the private CA alone.
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read manifest URL CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("manifest URL CA file %s: no PEM certificate in it (want -----BEGIN CERTIFICATE-----)", caFile)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &http.Client{Timeout: DefaultHTTPTimeout, Transport: transport}, nil
}

// ParseHeaders parses --manifest-url-header values, each "Key: Value".
// A key given more than once is sent with each value.
func ParseHeaders(pairs []string) (http.Header, error) {
	h := http.Header{}
	for n, pair := range pairs {
		// A header that does not parse is not quoted: it may be a
		// token that lost its "Authorization:" (or its colon).
		which := fmt.Sprintf("manifest URL header #%d (not shown: it may hold a secret)", n+1)
		key, value, ok := strings.Cut(pair, ":")
		if !ok {
			return nil, fmt.Errorf("%s: want \"Key: Value\", e.g. \"Authorization: Bearer <token>\"", which)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if key == "" {
			return nil, fmt.Errorf("%s: the name before the colon is empty", which)
		}
		if i := strings.IndexFunc(key, func(r rune) bool { return !isTokenChar(r) }); i >= 0 {
			return nil, fmt.Errorf("%s: the name before the colon may not contain %q", which, key[i:i+1])
		}
		if strings.ContainsFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			return nil, fmt.Errorf("manifest URL header %s: the value contains a control character (a line break?)", key)
		}
		h.Add(key, value)
	}
	return h, nil
}

// isTokenChar reports whether r may be in a header name (RFC 9110 token).
func isTokenChar(r rune) bool {
	return r < 0x7f && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// FetchURL fetches and parses url once, with the limits of URLSource, for
// `podrun once URL` and `podrun down URL`: client's timeout, a body of at
// most MaxFileSize, an empty body an error. As with Parse, a Snapshot
// returned with an error (invalid content) is for reporting only.
func FetchURL(ctx context.Context, client *http.Client, url string, header http.Header, opts manifest.Options) (*manifest.Snapshot, error) {
	opts, err := opts.Complete()
	if err != nil {
		return nil, err
	}
	return fetch(ctx, client, url, header, opts)
}

// fetch makes one request. Its errors name url as RedactedSource shows it:
// they reach /pods, `podrun ps` and logs.
//
// The request is not conditional (no If-Modified-Since, no If-None-Match),
// as the kubelet's (pkg/kubelet/config/http.go, extractFromURL): the body
// is fetched every time and compared. Last-Modified has a resolution of
// one second, and nginx's ETag is the mtime's seconds and the size, so a
// manifest changed twice within one second would be answered 304 and its
// last version never seen.
func fetch(ctx context.Context, client *http.Client, url string, header http.Header, opts manifest.Options) (*manifest.Snapshot, error) {
	shown := manifest.RedactedSource(url)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		if !parses(url) {
			return nil, errUnparsableManifestURL // there is nothing to show of it
		}
		return nil, fmt.Errorf("manifest URL %q: %w", shown, redactURLError(err))
	}
	for key, values := range header {
		if http.CanonicalHeaderKey(key) == "Host" && len(values) > 0 {
			req.Host = values[0]
			continue
		}
		for _, v := range values {
			req.Header.Add(key, v)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "podrun")
	}
	if client == nil {
		if client, err = NewHTTPClient(""); err != nil {
			return nil, err
		}
	}
	resp, err := guardRedirects(client, header).Do(req)
	if err != nil {
		// The error names the method and URL: Get "https://...": ...
		return nil, fmt.Errorf("fetch manifests: %w", redactURLError(err))
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("fetch manifests from %s: the server answered %s, want 200 OK", shown, resp.Status)
	case resp.ContentLength > manifest.MaxFileSize:
		return nil, tooLarge(shown, resp.ContentLength)
	case unframed(resp):
		return nil, fmt.Errorf("fetch manifests from %s: the server sent neither Content-Length nor chunked encoding, "+
			"so a body cut short by a dropped connection could not be told from a whole one: the body is refused and "+
			"the last good pods are kept; have the server send Content-Length or Transfer-Encoding: chunked", shown)
	}
	// The timeout covers the body too: Client.Timeout ends a slow read.
	data, err := io.ReadAll(io.LimitReader(resp.Body, manifest.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetch manifests from %s: read body: %w", shown, err)
	}
	if len(data) > manifest.MaxFileSize {
		return nil, tooLarge(shown, -1)
	}
	snap, err := manifest.Parse(url, data, opts)
	if err != nil {
		return snap, err
	}
	if snap.Documents() == 0 {
		// A server that lost its files, a proxy's empty answer: not a
		// reason to stop every pod. Saying "no pods" takes an empty List.
		return nil, manifest.ErrorList{{Source: shown, Message: "the body is empty (no document): the last good pods are kept; " +
			"to remove them, serve an empty List (kind: List, items: [])"}}
	}
	return snap, nil
}

// guardRedirects returns a copy of client (sharing its transport) whose
// redirects keep header, the --manifest-url-header values, to the host
// they were given for. Go follows a redirect with the request's headers to
// any host, and Authorization and Cookie to any port of the same name or
// its subdomains, so a token meant for the manifest server would go
// wherever a redirect pointed. The policy is set here, where header is
// put on the request, so that no client can be handed one without it.
// Nor does the Referer Go adds go elsewhere: it is the previous URL, with
// its query (a presigned URL's signature).
func guardRedirects(client *http.Client, header http.Header) *http.Client {
	guarded := *client
	next := client.CheckRedirect
	guarded.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		prev := via[len(via)-1].URL
		if prev.Scheme == "https" && req.URL.Scheme == "http" {
			return fmt.Errorf("refused a redirect from %s to %s: it would send the request, and its headers, unencrypted",
				manifest.RedactedSource(prev.String()), manifest.RedactedSource(req.URL.String()))
		}
		// Once the chain has left the first host, even a way back is one
		// that another host chose: the headers stay behind from then on.
		origin := hostPort(via[0].URL)
		elsewhere := func(r *http.Request) bool { return hostPort(r.URL) != origin }
		if elsewhere(req) || slices.ContainsFunc(via, elsewhere) {
			for key := range header {
				req.Header.Del(key)
			}
			req.Header.Del("Authorization")
			req.Header.Del("Cookie")
			// Go sets the previous URL as Referer, query and all: a
			// presigned URL's signature would go with it.
			req.Header.Del("Referer")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 { // Go's own limit, which a CheckRedirect replaces
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &guarded
}

// hostPort is u's host and port, the port filled in from the scheme, so
// that http://example.com and http://example.com:80 are one host.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redactURLError hides the credentials in the URL of an *url.Error in err
// (net/http's hide only a password, not a username or a presigned query).
// Of a URL that does not parse, net/url's own message quotes the part it
// could not read, which may be a password with an unescaped '/', '?' or
// '#': it is replaced too.
func redactURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if !parses(uerr.URL) {
			uerr.Err = errUnparsableURL
		}
		uerr.URL = manifest.RedactedSource(uerr.URL)
	}
	return err
}

var (
	errUnparsableURL         = errors.New("the URL does not parse (an unescaped '/', '?', '#' or '@' in its userinfo?)")
	errUnparsableManifestURL = errors.New("a manifest URL does not parse (an unescaped '/', '?', '#' or '@' in its userinfo?); " +
		"it is not shown, as it may hold a password")
)

func parses(rawURL string) bool {
	_, err := url.Parse(rawURL)
	return err == nil
}

// unframed reports whether resp's body ends only where the connection
// closes (HTTP/1.x with neither Content-Length nor chunked encoding), so
// that a body cut short reads as a whole one: a cut at a "---" would
// silently remove the pods after it. HTTP/2 frames the end of a stream, and
// a gzip body that the transport decompressed carries its own length and
// CRC: a cut one fails to read.
func unframed(resp *http.Response) bool {
	return resp.ProtoMajor == 1 && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && !resp.Uncompressed
}

// tooLarge is the error of a body over MaxFileSize from shown, the URL as
// RedactedSource shows it.
func tooLarge(shown string, size int64) error {
	what := "more"
	if size > 0 {
		what = fmt.Sprintf("%.1f MiB", float64(size)/(1<<20))
	}
	return manifest.ErrorList{{Source: shown, Message: fmt.Sprintf(
		"the body is %s, over the %d MiB limit for manifests: is it really a manifest?", what, manifest.MaxFileSize>>20)}}
}

// Run polls the URL until ctx ends. It sends an update after the first
// fetch and then whenever the result changes (an unchanged body sends
// nothing). A consumer that falls behind gets only the newest update.
func (s *URLSource) Run(ctx context.Context, out chan<- Update) {
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("source", manifest.RedactedSource(s.URL))
	opts := s.Options
	if opts.Logger == nil {
		opts.Logger = logger
	}
	opts, err := opts.Complete()
	if err == nil && s.URL == "" {
		err = errors.New("no URL given")
	}
	client := s.Client
	if err == nil && client == nil {
		client, err = NewHTTPClient("")
	}
	if err != nil {
		err = fmt.Errorf("watch manifest URL %s: %w", manifest.RedactedSource(s.URL), err)
		logger.Error("cannot watch manifest URL", "error", err)
		sendUntilDone(ctx, out, Update{Source: s.URL, Err: err, Failing: []string{s.URL}})
		return
	}

	var (
		q        latest
		good     *manifest.Snapshot
		goodKey  string
		problems = problemLog{logger: logger}
	)
	poll := func() {
		snap, err := fetch(ctx, client, s.URL, s.Header, opts)
		if ctx.Err() != nil {
			return // shutting down: an aborted request is not the URL's fault
		}
		if err == nil { // on an error, good is kept
			if key := contentKey(snap); good == nil || key != goodKey {
				good, goodKey = snap, key
				logger.Info("manifest URL read", "pods", len(good.Pods),
					"configMaps", len(good.ConfigMaps), "secrets", len(good.Secrets))
				for _, w := range good.Warnings {
					logger.Warn("manifest warning", "warning", w)
				}
			} else if !slices.Equal(good.Warnings, snap.Warnings) {
				// As the file source: a body whose one change is a
				// misspelt field changes no pod, and its warning is the
				// one that matters.
				for _, w := range snap.Warnings {
					if !slices.Contains(good.Warnings, w) {
						logger.Warn("manifest warning", "warning", w)
					}
				}
				good = snap // the merger keeps the pods as first seen
			}
		}
		u := Update{Source: s.URL, Snapshot: good, Err: err}
		if err != nil && good == nil {
			u.Failing = []string{s.URL}
		}
		now := map[string]error{}
		if err != nil {
			now[s.URL] = err
		}
		problems.update(now, "manifest URL problem")
		s.hooks.onScanned(q.offer(u))
	}

	ticker := time.NewTicker(orDefault(s.Interval, DefaultHTTPCheckFrequency))
	defer ticker.Stop()
	poll()
	for {
		select {
		case <-ctx.Done():
			return
		case q.ch(out) <- q.value():
			q.sent()
		case <-ticker.C:
			poll()
		}
	}
}
