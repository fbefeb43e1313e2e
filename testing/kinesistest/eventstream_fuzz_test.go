package kinesistest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/fxamacker/cbor/v2"
)

// FuzzEventStreamRoundTrip encodes arbitrary SubscribeToShardEvents with the
// server's encoder (encodeEvent, the one subscriptions use) and decodes them
// with code that is not ours: in JSON, the AWS SDK for Go's own Kinesis client
// reads them from a SubscribeToShard response; in CBOR, which that SDK does not
// speak, the SDK's event-stream decoder reads the frame and a generic CBOR
// decode reads the payload. Every field must come back as it went in.
func FuzzEventStreamRoundTrip(f *testing.F) {
	f.Add(false, []byte("data"), "key", uint64(49_000_000_000), int64(1_764_600_000_123), int64(0), true, true, uint8(1))
	f.Add(true, []byte{}, "k", uint64(1), int64(0), int64(86_400_000), false, false, uint8(0))
	f.Add(false, bytes.Repeat([]byte{0xff, 0}, 600), "ключ-日本", uint64(1<<63), int64(999), int64(5), true, false, uint8(3))
	f.Add(true, []byte("\x00\x01"), strings.Repeat("p", 256), uint64(7), int64(1_764_600_000_000), int64(1), false, true, uint8(2))

	var frame atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request to its end before answering, as the server does: an answer
		// that overtakes the request body trips aws/aws-sdk-go-v2#1825.
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		initial, err := initialResponseFrame(codec{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", eventStreamContentType)
		w.Write(initial)       //nolint:errcheck // the client reports what it did not get
		w.Write(*frame.Load()) //nolint:errcheck
	}))
	defer srv.Close()
	client := kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFUZZ", "fuzz", ""),
		// The body shield of HTTPClient as well, as the package's clients have.
		HTTPClient: newHTTPClient(nil),
	})

	f.Fuzz(func(t *testing.T, useCBOR bool, data []byte, key string, seq uint64, arrivalMs, behindMs int64, withChild, ended bool, nRecords uint8) {
		// What the server can hold: partition keys are Unicode (both decoders
		// make them so), times are after the epoch and before year 3000, and
		// MillisBehindLatest is not negative.
		key = strings.ToValidUTF8(key, "\uFFFD")
		arrivalMs = min(max(arrivalMs, 0), 32_503_680_000_000)
		behindMs = max(behindMs, 0)
		ev := subscribeEvent{MillisBehindLatest: behindMs}
		for i := range int(nRecords % 4) {
			ev.Records = append(ev.Records, recordJSON{
				SequenceNumber:              strconv.FormatUint(seq, 10) + strconv.Itoa(i),
				ApproximateArrivalTimestamp: epochMillis(arrivalMs),
				Data:                        data[:len(data)*(i+1)/max(int(nRecords%4), 1)],
				PartitionKey:                key,
			})
		}
		if !ended {
			cont := strconv.FormatUint(seq, 10) + "9"
			ev.ContinuationSequenceNumber = &cont
		}
		if withChild {
			ev.ChildShards = []childShardJSON{{
				ShardId:      "shardId-000000000007",
				ParentShards: []string{"shardId-000000000003", "shardId-000000000004"},
				HashKeyRange: hashKeyRangeJSON{StartingHashKey: "0", EndingHashKey: strconv.FormatUint(seq, 10)},
			}}
		}
		var buf bytes.Buffer
		encoded, err := encodeEvent(&buf, &ev, codec{cbor: useCBOR})
		if err != nil {
			t.Fatalf("encoding %+v: %v", ev, err)
		}
		if useCBOR {
			checkCBOREvent(t, encoded, ev)
			return
		}
		frame.Store(&encoded)
		checkSDKEvent(t, client, ev)
	})
}

// checkSDKEvent has the AWS SDK's Kinesis client read the frame and compares
// the event it decodes with ev.
func checkSDKEvent(t *testing.T, client *kinesis.Client, ev subscribeEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1"),
		ShardId:          aws.String("shardId-000000000000"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	})
	if err != nil {
		t.Fatalf("SubscribeToShard: %v", err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var got []types.SubscribeToShardEvent
	for e := range stream.Events() {
		v, ok := e.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			t.Fatalf("the SDK decoded a %T, want a SubscribeToShardEvent", e)
		}
		got = append(got, v.Value)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the SDK failed to decode the stream: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("the SDK decoded %d events, want 1", len(got))
	}
	g := got[0]
	if aws.ToInt64(g.MillisBehindLatest) != ev.MillisBehindLatest {
		t.Errorf("MillisBehindLatest %d, want %d", aws.ToInt64(g.MillisBehindLatest), ev.MillisBehindLatest)
	}
	if (g.ContinuationSequenceNumber == nil) != (ev.ContinuationSequenceNumber == nil) ||
		aws.ToString(g.ContinuationSequenceNumber) != aws.ToString(ev.ContinuationSequenceNumber) {
		t.Errorf("ContinuationSequenceNumber %v, want %v", g.ContinuationSequenceNumber, ev.ContinuationSequenceNumber)
	}
	if len(g.Records) != len(ev.Records) {
		t.Fatalf("%d records, want %d", len(g.Records), len(ev.Records))
	}
	for i, r := range g.Records {
		w := ev.Records[i]
		// The JSON protocol writes timestamps as seconds with a fraction, as the service
		// does; the SDK multiplies the float64 by 1,000 and truncates, so 1.011 s comes
		// back as 1,010 ms. One millisecond short is the SDK's reading, not a loss here.
		var lag int64 = -1
		if r.ApproximateArrivalTimestamp != nil {
			lag = int64(w.ApproximateArrivalTimestamp) - r.ApproximateArrivalTimestamp.UnixMilli()
		}
		if aws.ToString(r.SequenceNumber) != w.SequenceNumber || aws.ToString(r.PartitionKey) != w.PartitionKey ||
			!bytes.Equal(r.Data, w.Data) || lag < 0 || lag > 1 {
			t.Errorf("record %d came back as seq %q key %q data %x at %v, want %+v", i,
				aws.ToString(r.SequenceNumber), aws.ToString(r.PartitionKey), r.Data, r.ApproximateArrivalTimestamp, w)
		}
	}
	if len(g.ChildShards) != len(ev.ChildShards) {
		t.Fatalf("%d child shards, want %d", len(g.ChildShards), len(ev.ChildShards))
	}
	for i, c := range g.ChildShards {
		w := ev.ChildShards[i]
		if aws.ToString(c.ShardId) != w.ShardId || !slices.Equal(c.ParentShards, w.ParentShards) || c.HashKeyRange == nil ||
			aws.ToString(c.HashKeyRange.StartingHashKey) != w.HashKeyRange.StartingHashKey ||
			aws.ToString(c.HashKeyRange.EndingHashKey) != w.HashKeyRange.EndingHashKey {
			t.Errorf("child shard %d came back as %+v, want %+v", i, c, w)
		}
	}
}

// checkCBOREvent reads the frame with the SDK's event-stream decoder and the
// payload with a generic CBOR decode, and compares them with ev.
func checkCBOREvent(t *testing.T, frame []byte, ev subscribeEvent) {
	t.Helper()
	r := bytes.NewReader(frame)
	msg, err := eventstream.NewDecoder().Decode(r, nil)
	if err != nil {
		t.Fatalf("the SDK's event-stream decoder rejected the frame: %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes after the frame", r.Len())
	}
	for name, want := range map[string]string{hdrMessageType: msgTypeEvent, hdrEventType: eventSubscribeToShard, hdrContentType: cborContentType} {
		if v := msg.Headers.Get(name); v == nil || v.String() != want {
			t.Errorf("header %s is %v, want %s", name, v, want)
		}
	}
	var m map[string]any
	if err := cbor.Unmarshal(msg.Payload, &m); err != nil {
		t.Fatalf("the payload is not CBOR: %v", err)
	}
	if got, _ := m["MillisBehindLatest"].(uint64); int64(got) != ev.MillisBehindLatest {
		t.Errorf("MillisBehindLatest %v, want %d", m["MillisBehindLatest"], ev.MillisBehindLatest)
	}
	cont, hasCont := m["ContinuationSequenceNumber"]
	if hasCont != (ev.ContinuationSequenceNumber != nil) || (hasCont && cont != *ev.ContinuationSequenceNumber) {
		t.Errorf("ContinuationSequenceNumber %v, want %v", cont, ev.ContinuationSequenceNumber)
	}
	recs, _ := m["Records"].([]any)
	if len(recs) != len(ev.Records) {
		t.Fatalf("%d records, want %d", len(recs), len(ev.Records))
	}
	for i, raw := range recs {
		rec, _ := raw.(map[any]any)
		w := ev.Records[i]
		data, _ := rec["Data"].([]byte)
		key, _ := rec["PartitionKey"].(string)
		// A generic decoder reads tag 1 (epoch) over an integer as seconds; the
		// Java SDKs read the integer as milliseconds.
		at, isTime := rec["ApproximateArrivalTimestamp"].(time.Time)
		if rec["SequenceNumber"] != w.SequenceNumber || key != w.PartitionKey || !utf8.ValidString(key) ||
			!bytes.Equal(data, w.Data) || !isTime || at.Unix() != int64(w.ApproximateArrivalTimestamp) {
			t.Errorf("record %d came back as %v, want %+v", i, rec, w)
		}
	}
	children, _ := m["ChildShards"].([]any)
	if len(children) != len(ev.ChildShards) {
		t.Errorf("%d child shards, want %d", len(children), len(ev.ChildShards))
	}
	if len(children) == 1 {
		c, _ := children[0].(map[any]any)
		if c["ShardId"] != ev.ChildShards[0].ShardId {
			t.Errorf("child shard %v, want %+v", c, ev.ChildShards[0])
		}
	}
}
