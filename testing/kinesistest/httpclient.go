package kinesistest

import (
	"io"
	"net/http"
	"time"
)

// HTTPClient returns an HTTP client for aws-sdk-go-v2 clients that talk to a
// kinesistest server (kinesis.Options.HTTPClient); Server.Client uses it.
//
// It works around a race between aws-sdk-go-v2 and net/http
// (aws/aws-sdk-go-v2#1825, #2737) that a server answering within microseconds
// triggers often: the SDK closes the request body as soon as the response
// headers arrive; net/http, still finishing the request, then reads io.EOF
// from the closed body through io.WriterTo, treats it as a write error and
// closes the connection under the response being read. The SDK sees "use of
// closed network connection" while decoding, typically on large GetRecords
// pages. The default SDK retryer retries that error, but not a client with
// RetryMaxAttempts = 1, and a retried PutRecords stores its records twice.
// Hiding WriterTo makes the closed body read as a clean end of body.
func HTTPClient() *http.Client { return newHTTPClient(nil) }

// newHTTPClient returns HTTPClient's client with its transport changed by
// modify, if not nil.
func newHTTPClient(modify func(*http.Transport)) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64 // benchmarks and concurrent tests keep connections
	t.IdleConnTimeout = 90 * time.Second
	if modify != nil {
		modify(t)
	}
	return &http.Client{Transport: bodyShield{next: t}}
}

// bodyShield hands net/http a request body without io.WriterTo.
type bodyShield struct{ next http.RoundTripper }

func (b bodyShield) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context()) // a RoundTripper must not modify its request
		req.Body = plainBody{req.Body}
	}
	return b.next.RoundTrip(req)
}

// plainBody is an io.ReadCloser and nothing else.
type plainBody struct{ io.ReadCloser }
