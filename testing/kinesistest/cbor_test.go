package kinesistest_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/fxamacker/cbor/v2"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// stringMaps decodes CBOR maps as map[string]any.
var stringMaps, _ = cbor.DecOptions{DefaultMapType: reflect.TypeFor[map[string]any]()}.DecMode()

// cborCall sends one CBOR request as the Java SDK v2 frames it and returns
// the status, the error-type header and the decoded body.
func cborCall(t *testing.T, srv *kinesistest.Server, op string, in any) (int, string, map[string]any, http.Header) {
	t.Helper()
	body, err := cbor.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-cbor-1.1")
	req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
	resp, err := kinesistest.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := stringMaps.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: the response (%s) is not CBOR: %v (%x)", op, resp.Header.Get("Content-Type"), err, raw)
		}
		out["raw"] = raw
	}
	return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), out, resp.Header
}

// TestCBORProtocol speaks CBOR as the Java SDKs do: byte-string blobs, tag 1
// over epoch milliseconds for timestamps, errors as CBOR maps.
func TestCBORProtocol(t *testing.T) {
	e := newEnv(t)
	e.createStream("cbor", 1)
	data := []byte{0x00, 0x0a, 0xff, '\n'} // a trailing newline byte must survive
	status, _, out, h := cborCall(t, e.srv, "PutRecord", map[string]any{
		"StreamName": "cbor", "PartitionKey": "k", "Data": data,
	})
	if status != 200 || h.Get("Content-Type") != "application/x-amz-cbor-1.1" {
		t.Fatalf("PutRecord: %d %s %v", status, h.Get("Content-Type"), out)
	}
	seq, _ := out["SequenceNumber"].(string)
	if seq == "" || out["ShardId"] != "shardId-000000000000" {
		t.Fatalf("PutRecord output %v", out)
	}

	// AT_TIMESTAMP with tag 1 over milliseconds: the record arrived at t0.
	e.clock.Advance(time.Second)
	for _, c := range []struct {
		name string
		ts   any
		want int
	}{
		{"millis at arrival", cbor.Tag{Number: 1, Content: t0.UnixMilli()}, 1},
		{"millis after arrival", cbor.Tag{Number: 1, Content: t0.UnixMilli() + 1}, 0},
		{"float seconds", cbor.Tag{Number: 1, Content: float64(t0.UnixMilli()-500) / 1000}, 1},
	} {
		status, _, it, _ := cborCall(t, e.srv, "GetShardIterator", map[string]any{
			"StreamName": "cbor", "ShardId": "shardId-000000000000", "ShardIteratorType": "AT_TIMESTAMP", "Timestamp": c.ts,
		})
		if status != 200 {
			t.Fatalf("%s: GetShardIterator: %d %v", c.name, status, it)
		}
		status, _, got, _ := cborCall(t, e.srv, "GetRecords", map[string]any{"ShardIterator": it["ShardIterator"]})
		if status != 200 {
			t.Fatalf("%s: GetRecords: %d %v", c.name, status, got)
		}
		recs, _ := got["Records"].([]any)
		if len(recs) != c.want {
			t.Fatalf("%s: %d records, want %d (%v)", c.name, len(recs), c.want, got)
		}
		if c.want == 0 {
			continue
		}
		r := recs[0].(map[string]any)
		if d, ok := r["Data"].([]byte); !ok || !bytes.Equal(d, data) {
			t.Errorf("Data is %T %v, want the byte string %x", r["Data"], r["Data"], data)
		}
		if r["SequenceNumber"] != seq {
			t.Errorf("SequenceNumber %v, want %s", r["SequenceNumber"], seq)
		}
		// Decoded into any, tag 1 becomes a time.Time of seconds; read the
		// raw tag instead.
		var typed struct {
			Records []struct{ ApproximateArrivalTimestamp cbor.RawTag }
		}
		if err := cbor.Unmarshal(got["raw"].([]byte), &typed); err != nil {
			t.Fatal(err)
		}
		ts := typed.Records[0].ApproximateArrivalTimestamp
		var ms int64
		if err := cbor.Unmarshal(ts.Content, &ms); ts.Number != 1 || err != nil || ms != t0.UnixMilli() {
			t.Errorf("ApproximateArrivalTimestamp is tag %d over %x (%v), want tag 1 over %d", ts.Number, []byte(ts.Content), err, t0.UnixMilli())
		}
	}

	// Errors are CBOR maps too, with the header the SDKs read first.
	status, code, body, h := cborCall(t, e.srv, "DescribeStreamSummary", map[string]any{"StreamName": "missing"})
	if status != 400 || code != "ResourceNotFoundException" || body["__type"] != "ResourceNotFoundException" || body["message"] == "" ||
		h.Get("Content-Type") != "application/x-amz-cbor-1.1" {
		t.Errorf("error: %d %s %v %s", status, code, body, h.Get("Content-Type"))
	}
	status, code, _, _ = cborCall(t, e.srv, "PutRecord", map[string]any{"StreamName": 7})
	if status != 400 || code != "SerializationException" {
		t.Errorf("a number for StreamName: %d %s, want 400 SerializationException", status, code)
	}
}

// TestCBORSubscribeToShard subscribes with a CBOR request (no real client
// does: the Java SDK v2 sends SubscribeToShard in JSON even with CBOR on) and
// checks that the frames carry CBOR payloads with the CBOR content type, up
// to the closed shard's last event.
func TestCBORSubscribeToShard(t *testing.T) {
	e := newEnv(t)
	e.createStream("cbor-sub", 1)
	e.put("cbor-sub", "k", "one")
	arn, err := e.srv.RegisterConsumer("cbor-sub", "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("cbor-sub"), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String("1000")}); err != nil {
		t.Fatal(err)
	}
	body, err := cbor.Marshal(map[string]any{"ConsumerARN": arn, "ShardId": sid(0), "StartingPosition": map[string]any{"Type": "TRIM_HORIZON"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-cbor-1.1")
	req.Header.Set("X-Amz-Target", "Kinesis_20131202.SubscribeToShard")
	resp, err := kinesistest.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := eventstream.NewDecoder()
	var types, records, children []string
	for {
		m, err := dec.Decode(resp.Body, nil)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding a frame: %v", err)
		}
		if ct := m.Headers.Get(":content-type"); ct == nil || ct.String() != "application/x-amz-cbor-1.1" {
			t.Errorf("frame content type %v, want application/x-amz-cbor-1.1", ct)
		}
		types = append(types, m.Headers.Get(":event-type").String())
		var ev struct {
			Records     []struct{ Data []byte }
			ChildShards []struct{ ShardId string } //nolint:revive // the model's member name
		}
		if err := cbor.Unmarshal(m.Payload, &ev); err != nil {
			t.Fatalf("frame payload %x is not CBOR: %v", m.Payload, err)
		}
		for _, r := range ev.Records {
			records = append(records, string(r.Data))
		}
		for _, c := range ev.ChildShards {
			children = append(children, c.ShardId)
		}
	}
	if len(types) < 2 || types[0] != "initial-response" || types[len(types)-1] != "SubscribeToShardEvent" ||
		!slices.Equal(records, []string{"one"}) || !slices.Equal(children, []string{sid(1), sid(2)}) {
		t.Errorf("frames %v, records %q, children %v; want initial-response then events with [one] and children 1, 2", types, records, children)
	}
}
