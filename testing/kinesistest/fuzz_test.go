package kinesistest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	srv, err := Start(WithClock(NewManualClock(time.UnixMilli(1764600000000))))
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 2); err != nil {
		f.Fatal(err)
	}
	if err := srv.CreateOnDemandStream("od", 2, ""); err != nil {
		f.Fatal(err)
	}
	queueARN, err := srv.CreateQueue("fq", "od", QueueConfig{StartingPosition: "TRIM_HORIZON"})
	if err != nil {
		f.Fatal(err)
	}
	odARN := srv.StreamARN("od")
	queueBodies := []string{
		`{"QueueARN":"` + queueARN + `","WaitTimeSeconds":0,"Limit":2,"VisibilityTimeoutSeconds":0}`,
		`{"QueueARN":"` + queueARN + `","Entries":[{"ReceiptHandle":"x","VisibilityTimeoutSeconds":1},{"ReceiptHandle":""}]}`,
		`{"QueueARN":"` + queueARN + `","QueueAttributes":{"VisibilityTimeoutSeconds":5,"DeadLetterConfiguration":{"TargetType":"NONE"}}}`,
		`{"QueueName":"q2","StreamConfigurationList":[{"StreamARN":"` + odARN + `","StartingPosition":{"Type":"AT_TIMESTAMP","Timestamp":1.5}}],` +
			`"QueueAttributes":{"VisibilityTimeoutSeconds":5,"DeadLetterConfiguration":{"TargetType":"BUILT_IN","MaxReceiveCount":2}},"Tags":{"k":"v"}}`,
		`{"StreamFilter":[{"StreamARN":"` + odARN + `","StreamCreationTimestamp":1764600000}],"MaxResults":1,"NextToken":"x"}`,
		`{"StreamARN":"` + odARN + `","StreamModeDetails":{"StreamMode":"PROVISIONED"},"WarmThroughputMiBps":1}`,
	}
	for i := range ops {
		for _, body := range append([]string{
			`{}`, `{"StreamName":"s"}`, `{"StreamName":"s","ShardId":"shardId-000000000000","ShardIteratorType":"TRIM_HORIZON"}`,
			`{"StreamName":"s","Records":[{"PartitionKey":"k","Data":"ZGF0YQ=="}]}`, `{"StreamName":"s","PartitionKey":"k","Data":"ZGF0YQ=="}`,
			`{"ShardIterator":"x"}`, `{"StreamName":"s","ShardToSplit":"shardId-000000000000","NewStartingHashKey":"1"}`,
			`{"StreamName":"s","ShardFilter":{"Type":"AT_TIMESTAMP","Timestamp":1.5}}`, `{"StreamName":7}`, `[`, ``,
		}, queueBodies...) {
			f.Add(uint8(i), false, []byte(body))
		}
		var m any
		_ = json.Unmarshal([]byte(`{"StreamName":"s","Limit":10}`), &m)
		b, _ := cbor.Marshal(m)
		f.Add(uint8(i), true, b)
		b, _ = cbor.Marshal(map[string]any{"QueueARN": queueARN, "WaitTimeSeconds": 0,
			"Entries": []any{map[string]any{"ReceiptHandle": "x", "VisibilityTimeoutSeconds": 0}}})
		f.Add(uint8(i), true, b)
	}
	// Some records for the queue to deliver, so receives and entries get past the lookup.
	for i := range 20 {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(fmt.Sprintf(`{"StreamName":"od","PartitionKey":"k%d","Data":"ZGF0YQ=="}`, i)))
		req.Header.Set("Content-Type", jsonContentType)
		req.Header.Set("X-Amz-Target", targetPrefix+"PutRecord")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			f.Fatalf("PutRecord: %d %s", rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, opIndex uint8, useCBOR bool, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		if op == "SubscribeToShard" || op == "DeleteStream" || op == "DeleteQueue" {
			// A subscription streams for minutes; deleting the stream or the queue would end
			// the corpus' meaning for the other operations. They decode their input like the
			// rest.
			op = "DescribeStreamConsumer"
		}
		ct := jsonContentType
		if useCBOR {
			ct = cborContentType
		}
		// A receive waits for records up to 20 s; the client goes away sooner.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
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
