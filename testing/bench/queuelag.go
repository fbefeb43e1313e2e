package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// ackLagRecorder stands in front of the test server and measures the ack lag of a queue
// read as the service would see it: per record, from the response of the receive that
// delivered it to the response of the AcknowledgeQueueRecords call that acknowledged it
// (its Successful entries), by receipt handle. It reads the bodies of those two operations
// only and passes every request on unchanged.
type ackLagRecorder struct {
	next http.Handler
	srv  *http.Server
	url  string

	mu       sync.Mutex
	received map[string]time.Time
	lags     []time.Duration
}

// startAckLagRecorder serves next on a loopback port of its own.
func startAckLagRecorder(next http.Handler) (*ackLagRecorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the ack lag recorder: %w", err)
	}
	r := &ackLagRecorder{next: next, url: "http://" + ln.Addr().String(), received: map[string]time.Time{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the recorder.
func (r *ackLagRecorder) Close() error { return r.srv.Close() }

// capture is a ResponseWriter that keeps a copy of the body.
type capture struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) {
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (r *ackLagRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	op := req.Header.Get("X-Amz-Target")
	receive, ack := strings.HasSuffix(op, ".ReceiveQueueRecords"), strings.HasSuffix(op, ".AcknowledgeQueueRecords")
	if !receive && !ack {
		r.next.ServeHTTP(w, req)
		return
	}
	c := &capture{ResponseWriter: w}
	r.next.ServeHTTP(c, req)
	now := time.Now()
	field := "QueueRecords"
	if ack {
		field = "Successful"
	}
	handles := receiptHandles(req.Header.Get("Content-Type"), c.body.Bytes(), field)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range handles {
		if receive {
			r.received[h] = now
		} else if at, ok := r.received[h]; ok {
			r.lags = append(r.lags, now.Sub(at))
			delete(r.received, h)
		}
	}
}

// receiptHandles returns the ReceiptHandle of every entry of body's list field (JSON or
// CBOR, as the content type says); nothing for an error response.
func receiptHandles(contentType string, body []byte, field string) []string {
	var doc map[string][]map[string]any
	var err error
	if strings.Contains(contentType, "cbor") {
		err = cbor.Unmarshal(body, &doc)
	} else {
		err = json.Unmarshal(body, &doc)
	}
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range doc[field] {
		if h, ok := e["ReceiptHandle"].(string); ok {
			out = append(out, h)
		}
	}
	return out
}

// lagQuantiles returns how many records were acknowledged since the last call and their
// ack lag's p50, p99 and maximum, and starts a new measurement.
func (r *ackLagRecorder) lagQuantiles() (n int, p50, p99, max time.Duration) {
	r.mu.Lock()
	lags := r.lags
	r.lags = nil
	r.mu.Unlock()
	if len(lags) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(lags)
	q := func(f float64) time.Duration { return lags[min(len(lags)-1, int(f*float64(len(lags))))] }
	return len(lags), q(0.50), q(0.99), lags[len(lags)-1]
}
