package kinesisio

import (
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/wire"

	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"google.golang.org/protobuf/proto"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/javacoder"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// internalValues are values of the connector's internal types as they occur in a read: a
// discovery restriction before its first poll (no shards yet: the value that broke on
// Flink), after polls, and finished; shard restrictions of every start kind and end; and
// descriptors of plain and resharded shards.
func internalValues() []any {
	return []any{
		discoveryRestriction{},
		discoveryRestriction{Shards: []string{}},
		discoveryRestriction{Shards: []string{"shardId-000000000000", "shardId-000000000001"}, LastPollMs: 1764600000123, ReadStartMs: 1764599990000, EndTimeMs: 1764600010000},
		discoveryRestriction{Shards: []string{"shardId-000000000002"}, LastPollMs: 1, ReadStartMs: 1, Done: true},
		shardRestriction{},
		shardRestriction{StartKind: startTrimHorizon, EndTimeMs: 1764600010000, MaxRecords: 100, Claimed: 99},
		shardRestriction{StartKind: startAtTimestamp, StartTimeMs: 1764599990000},
		shardRestriction{StartKind: startAfterSubSequence, StartSeq: "49590338271490256608559692538361571095921575989136588898", StartSub: 7, VerifiedMs: 1764600000001},
		shardRestriction{StartKind: startAtSequence, StartSeq: "1", EndSeq: "49590338271490256608559692538361571095921575989136588898", EndSub: maxSubSequence},
		shardRestriction{Empty: true},
		shardDescriptor{},
		shardDescriptor{Stream: "orders", ShardID: "shardId-000000000003", ParentShardID: "shardId-000000000001", AdjacentParentShardID: "shardId-000000000002",
			StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455", StartKind: startAtTimestamp, StartTimeMs: 1764599990000, EndTimeMs: -1},
		shardDescriptor{Stream: "ünïcode-stream", ShardID: "shardId-000000000000", StartKind: startAfterSequence, StartSeq: "49590338271490256608559692538361571095921575989136588898"},
		commitToken{},
		commitToken{Stream: "orders", ShardID: "shardId-000000000003", Seq: "49590338271490256608559692538361571095921575989136588898", Sub: 9, Records: 500, EndMs: 1764600000123, MaxEventMs: 1764600000100},
		commitToken{Stream: "orders", ShardID: "shardId-000000000001", Seq: "SHARD_END", MaxEventMs: -9223372036854775},
	}
}

// normalised is v as its coder gives it back: lists never nil.
func normalised(v any) any {
	switch x := v.(type) {
	case discoveryRestriction:
		if x.Shards == nil {
			x.Shards = []string{}
		}
		return x
	case Record:
		x.Data = orEmpty(x.Data)
		return x
	case Message:
		x.Data = orEmpty(x.Data)
		return x
	case FailedMessage:
		x.Data = orEmpty(x.Data)
		return x
	}
	return v
}

func TestInternalCodersRoundTrip(t *testing.T) {
	for _, v := range internalValues() {
		var (
			got any
			err error
		)
		switch x := v.(type) {
		case discoveryRestriction:
			got, err = decodeDiscoveryRestriction(encodeDiscoveryRestriction(x))
		case shardRestriction:
			got, err = decodeShardRestriction(encodeShardRestriction(x))
		case shardDescriptor:
			got, err = decodeShardDescriptor(encodeShardDescriptor(x))
		case commitToken:
			got, err = decodeCommitToken(encodeCommitToken(x))
		}
		if err != nil {
			t.Errorf("%#v: %v", v, err)
			continue
		}
		if want := normalised(v); !reflect.DeepEqual(got, want) {
			t.Errorf("decoded %#v\nwant %#v", got, want)
		}
	}
}

func TestInternalCodersRejectCorruptInput(t *testing.T) {
	full := encodeShardDescriptor(shardDescriptor{Stream: "orders", ShardID: "shardId-000000000001", StartSeq: "12345"})
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty encoding"},
		{"unknown version", append([]byte{9}, full[1:]...), "unknown format version 9"},
		{"truncated", full[:len(full)-3], "truncated"},
		{"trailing bytes", append(append([]byte{}, full...), 0, 0), "2 bytes left"},
	} {
		_, err := decodeShardDescriptor(c.in)
		if err == nil || !strings.Contains(err.Error(), "decoding a shard descriptor") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one about a shard descriptor saying %q", c.name, err, c.want)
		}
	}
	if _, err := decodeDiscoveryRestriction([]byte{discoveryRestrictionV1, 0x80, 0x80, 0x80, 0x80, 0x10}); err == nil {
		t.Errorf("a discovery restriction claiming 2^32 shards decoded without error")
	}
}

// TestReadSendsItsInternalValuesAsOpaqueBytes marshals Read and ReadBounded as a runner
// receives them and checks that the restrictions of both splittable DoFns and the shard
// descriptors between discovery and the readers use the connector's own coders, which the
// SDK length-prefixes so that runners do not look inside. No Java needed: with Beam's row
// coder for any of them (as before), a Java runner would decode and re-encode the value.
func TestReadSendsItsInternalValuesAsOpaqueBytes(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	opts := []ReadOption{WithEndpoint("http://127.0.0.1:1"), WithRegion("us-east-1"), WithStaticCredentials("test", "test")}
	Read(s, "orders", opts...)
	ReadBounded(s, "orders", opts...)
	edges, _, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:external:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	comps := pipe.GetComponents()
	opaque := func(what, id string) {
		c := comps.GetCoders()[id]
		if c.GetSpec().GetUrn() != "beam:coder:length_prefix:v1" || len(c.GetComponentCoderIds()) != 1 ||
			comps.GetCoders()[c.GetComponentCoderIds()[0]].GetSpec().GetUrn() != "beam:go:coder:custom:v1" {
			t.Errorf("%s has coder %v, want a length-prefixed Go custom coder", what, c)
		}
	}
	restrictions := 0
	for _, tr := range comps.GetTransforms() {
		if tr.GetSpec().GetUrn() != "beam:transform:pardo:v1" {
			continue
		}
		var pardo pipepb.ParDoPayload
		if err := proto.Unmarshal(tr.GetSpec().GetPayload(), &pardo); err != nil {
			t.Fatal(err)
		}
		if id := pardo.GetRestrictionCoderId(); id != "" {
			// The Go SDK codes the restriction together with the watermark estimator's state.
			restrictions++
			kv := comps.GetCoders()[id]
			if kv.GetSpec().GetUrn() != "beam:coder:kv:v1" || len(kv.GetComponentCoderIds()) != 2 {
				t.Errorf("the restriction of %s has coder %v, want a KV of restriction and watermark state", tr.GetUniqueName(), kv)
				continue
			}
			opaque("the restriction of "+tr.GetUniqueName(), kv.GetComponentCoderIds()[0])
		}
		if strings.Contains(tr.GetUniqueName(), "discover") {
			for _, pc := range tr.GetOutputs() {
				opaque("the output of "+tr.GetUniqueName(), comps.GetPcollections()[pc].GetCoderId())
			}
		}
	}
	// discovery and the reader of Read, the reader of ReadBounded
	if restrictions != 3 {
		t.Errorf("found %d splittable DoFns, want 3", restrictions)
	}
}

// TestValuesSurviveAJavaRunner sends the connector's internal values, and its user types as
// it emits them, through Beam Java's coders as a Java runner (Flink, Dataflow) builds them
// from the pipeline, and checks that Java encodes each back to the bytes the Go SDK wrote.
func TestValuesSurviveAJavaRunner(t *testing.T) {
	arrival := time.UnixMilli(1764600000123).UTC()
	// User values as users build them: nil Data included, which Go's row coder alone writes
	// as a null that Beam Java's RowCoder re-encodes without its null bit.
	user := []any{
		Record{StreamName: "s", ShardID: "shardId-000000000000", PartitionKey: "k", SequenceNumber: "1", ApproximateArrivalTimestamp: arrival},
		Record{StreamName: "s", ShardID: "shardId-000000000000", PartitionKey: "k", SequenceNumber: "2", ApproximateArrivalTimestamp: arrival, Data: []byte{}},
		Record{StreamName: "s", ShardID: "shardId-000000000001", PartitionKey: "k", ExplicitHashKey: "340282366920938463463374607431768211455",
			SequenceNumber: "49590338271490256608559692538361571095921575989136588898", SubSequenceNumber: 3, ApproximateArrivalTimestamp: arrival, Data: []byte("payload"), Aggregated: true},
		Message{PartitionKey: "k"},
		Message{PartitionKey: "k", ExplicitHashKey: "1", Data: []byte{0, 1, 2}},
		FailedMessage{Message: Message{PartitionKey: "k"}, Reason: "why", ErrorCode: ErrorCodeInvalidMessage},
		FailedMessage{Message: Message{PartitionKey: "k", Data: []byte("x")}, Reason: "throttled", ErrorCode: "ProvisionedThroughputExceededException", Attempts: 4},
	}
	values := append(internalValues(), user...)
	for _, c := range javacoder.Cross(t, values...) {
		c.Check(t)
		if c.Back == nil {
			continue
		}
		if want := normalised(c.Value); !reflect.DeepEqual(c.Back, want) {
			t.Errorf("after Java, Go decodes %#v\nwant %#v", c.Back, want)
		}
	}
}

// TestReadEmitsEmptyDataAsEmptySlices reads a record with no data and a KPL aggregate
// holding an empty user record, by polling and by enhanced fan-out, and checks that the
// Records carry an empty, non-nil Data (which the row coder writes as a zero-length value
// that survives a Java runner, where nil would not).
func TestReadEmitsEmptyDataAsEmptySlices(t *testing.T) {
	const stream = "empty-data"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	agg := kpl.NewAggregator(51200, 10)
	for _, u := range []kpl.UserRecord{{PartitionKey: "a", Data: nil}, {PartitionKey: "b", Data: []byte("b")}} {
		if err := agg.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	kr, err := agg.Build()
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, srv.Client(), stream, []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("plain"), Data: []byte{}},
		{PartitionKey: aws.String(kr.PartitionKey), ExplicitHashKey: aws.String(kr.ExplicitHashKey), Data: kr.Data},
	})
	for _, efo := range []bool{false, true} {
		opts := connect(srv)
		if efo {
			arn, err := srv.RegisterConsumer(stream, "empty-data")
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, WithEnhancedFanOutConsumerARN(arn))
		}
		ctx := context.Background()
		r, err := newShardReader(ctx, newReadSpec(stream, buildConfig(targetRead, opts)))
		if err != nil {
			t.Fatal(err)
		}
		d := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon, EndTimeMs: time.Now().Add(time.Second).UnixMilli()}
		rt := sdf.NewLockRTracker(newShardTracker(initialRestriction(d, 3)))
		var got []Record
		if _, err := r.process(ctx, nil, rt, d, func(_ beam.EventTime, rec Record) { got = append(got, rec) }); err != nil {
			t.Fatalf("efo=%t: %v", efo, err)
		}
		r.closeSubscriptions()
		if len(got) != 3 {
			t.Fatalf("efo=%t: read %d records, want 3: %+v", efo, len(got), got)
		}
		for _, rec := range got {
			wantLen := map[string]int{"plain": 0, "a": 0, "b": 1}[rec.PartitionKey]
			if rec.Data == nil || len(rec.Data) != wantLen {
				t.Errorf("efo=%t: record %q has Data %#v (nil %t), want %d bytes, never nil", efo, rec.PartitionKey, rec.Data, rec.Data == nil, wantLen)
			}
		}
	}
}

// TestCommitTokenDecodesTheFirstFormat: a token written before MaxEventMs existed (v1, in a
// checkpoint or savepoint of an earlier release) decodes with its end as its event time.
func TestCommitTokenDecodesTheFirstFormat(t *testing.T) {
	w := wire.NewWriter(commitTokenV1)
	for _, s := range []string{"orders", "shardId-000000000003", "4959"} {
		w.String(s)
	}
	for _, n := range []int64{9, 500, 1764600000123} {
		w.Int(n)
	}
	got, err := decodeCommitToken(w.Bytes())
	want := commitToken{Stream: "orders", ShardID: "shardId-000000000003", Seq: "4959", Sub: 9, Records: 500, EndMs: 1764600000123, MaxEventMs: 1764600000123}
	if err != nil || got != want {
		t.Fatalf("decoding a v1 token = %+v, %v; want %+v", got, err, want)
	}
}
