package kinesistest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// FuzzRequestDecoding sends arbitrary bodies to every operation, in the JSON and the CBOR
// protocol, to a server holding one stream. Whatever the body, the server must not panic,
// must answer (no 5xx: no fault is injected), and every error must be the service's error
// shape, a __type and a message, in the request's protocol.
func FuzzRequestDecoding(f *testing.F) {
	ops := slices.Sorted(func(yield func(string) bool) {
		for op := range handlers {
			if !yield(op) {
				return
			}
		}
	})
	for i := range ops {
		for _, body := range []string{
			`{}`, `{"StreamName":"s"}`, `{"StreamName":"s","ShardId":"shardId-000000000000","ShardIteratorType":"TRIM_HORIZON"}`,
			`{"StreamName":"s","Records":[{"PartitionKey":"k","Data":"ZGF0YQ=="}]}`, `{"StreamName":"s","PartitionKey":"k","Data":"ZGF0YQ=="}`,
			`{"ShardIterator":"x"}`, `{"StreamName":"s","ShardToSplit":"shardId-000000000000","NewStartingHashKey":"1"}`,
			`{"StreamName":"s","ShardFilter":{"Type":"AT_TIMESTAMP","Timestamp":1.5}}`, `{"StreamName":7}`, `[`, ``,
		} {
			f.Add(uint8(i), false, []byte(body))
		}
		var m any
		_ = json.Unmarshal([]byte(`{"StreamName":"s","Limit":10}`), &m)
		b, _ := cbor.Marshal(m)
		f.Add(uint8(i), true, b)
	}
	srv, err := Start(WithClock(NewManualClock(time.UnixMilli(1764600000000))))
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 2); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, opIndex uint8, useCBOR bool, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		if op == "SubscribeToShard" || op == "DeleteStream" {
			// A subscription streams for minutes; deleting the stream would end the corpus'
			// meaning for the other operations. Both decode their input like the rest.
			op = "DescribeStreamConsumer"
		}
		ct := jsonContentType
		if useCBOR {
			ct = cborContentType
		}
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("X-Amz-Target", targetPrefix+op)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s with %q: status %d: %s", ct, op, body, rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusOK {
			return
		}
		var e map[string]any
		var derr error
		if useCBOR {
			derr = cbor.Unmarshal(rec.Body.Bytes(), &e)
		} else {
			derr = json.Unmarshal(rec.Body.Bytes(), &e)
		}
		if derr != nil {
			t.Fatalf("%s %s with %q: status %d with a body that does not decode (%v): %q", ct, op, body, rec.Code, derr, rec.Body.String())
		}
		typ, _ := e["__type"].(string)
		msg, _ := e["message"].(string)
		if typ == "" || strings.TrimSpace(msg) == "" {
			t.Fatalf("%s %s with %q: status %d error %v, want a __type and a message", ct, op, body, rec.Code, e)
		}
	})
}
