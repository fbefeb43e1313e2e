package kinesistest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// fiveRecords writes r0..r4 to a one-shard stream, one second apart from t0,
// and returns their sequence numbers.
func fiveRecords(e *env, stream string) []string {
	e.createStream(stream, 1)
	var seqs []string
	for i := range 5 {
		seqs = append(seqs, *e.put(stream, "k", fmt.Sprintf("r%d", i)).SequenceNumber)
		e.clock.Advance(time.Second)
	}
	return seqs
}

func TestShardIteratorTypesStartWhereTheyShould(t *testing.T) {
	e := newEnv(t)
	seqs := fiveRecords(e, "it")
	at := func(seq string) func(*kinesis.GetShardIteratorInput) {
		return func(in *kinesis.GetShardIteratorInput) { in.StartingSequenceNumber = aws.String(seq) }
	}
	ts := func(ti time.Time) func(*kinesis.GetShardIteratorInput) {
		return func(in *kinesis.GetShardIteratorInput) { in.Timestamp = aws.Time(ti) }
	}
	for _, tc := range []struct {
		name string
		typ  types.ShardIteratorType
		opt  func(*kinesis.GetShardIteratorInput)
		want string
	}{
		{"TRIM_HORIZON", types.ShardIteratorTypeTrimHorizon, nil, "r0 r1 r2 r3 r4"},
		{"LATEST", types.ShardIteratorTypeLatest, nil, ""},
		{"AT_SEQUENCE_NUMBER r2", types.ShardIteratorTypeAtSequenceNumber, at(seqs[2]), "r2 r3 r4"},
		{"AFTER_SEQUENCE_NUMBER r2", types.ShardIteratorTypeAfterSequenceNumber, at(seqs[2]), "r3 r4"},
		{"AFTER_SEQUENCE_NUMBER r4", types.ShardIteratorTypeAfterSequenceNumber, at(seqs[4]), ""},
		{"AT_TIMESTAMP of r3", types.ShardIteratorTypeAtTimestamp, ts(t0.Add(3 * time.Second)), "r3 r4"},
		{"AT_TIMESTAMP between r1 and r2", types.ShardIteratorTypeAtTimestamp, ts(t0.Add(1500 * time.Millisecond)), "r2 r3 r4"},
		{"AT_TIMESTAMP before the stream", types.ShardIteratorTypeAtTimestamp, ts(t0.Add(-time.Hour)), "r0 r1 r2 r3 r4"},
		{"AT_TIMESTAMP after the last record", types.ShardIteratorTypeAtTimestamp, ts(t0.Add(4500 * time.Millisecond)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*kinesis.GetShardIteratorInput)
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			got, _ := e.readToTip(e.iterator("it", sid(0), tc.typ, opts...))
			if strings.Join(got, " ") != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLatestIteratorSeesOnlyLaterRecords(t *testing.T) {
	e := newEnv(t)
	fiveRecords(e, "latest")
	it := e.iterator("latest", sid(0), types.ShardIteratorTypeLatest)
	e.put("latest", "k", "r5")
	got, last := e.readToTip(it)
	if strings.Join(got, " ") != "r5" || *last.MillisBehindLatest != 0 {
		t.Errorf("read %q (MillisBehindLatest %d), want r5 and 0", got, *last.MillisBehindLatest)
	}
}

func TestGetRecordsReturnsArrivalTimestampsAndPartitionKeys(t *testing.T) {
	e := newEnv(t)
	seqs := fiveRecords(e, "meta")
	out := e.getRecords(e.iterator("meta", sid(0), types.ShardIteratorTypeTrimHorizon), 0)
	for i, r := range out.Records {
		if !r.ApproximateArrivalTimestamp.Equal(t0.Add(time.Duration(i)*time.Second)) || *r.PartitionKey != "k" || *r.SequenceNumber != seqs[i] {
			t.Errorf("record %d = %v %s %s", i, r.ApproximateArrivalTimestamp, *r.PartitionKey, *r.SequenceNumber)
		}
	}
}

func TestGetShardIteratorValidation(t *testing.T) {
	e := newEnv(t)
	e.createStream("gsi", 2)
	seq0 := *e.putEHK("gsi", "0", "x").SequenceNumber
	get := func(typ types.ShardIteratorType, shard string, mutate func(*kinesis.GetShardIteratorInput)) error {
		in := &kinesis.GetShardIteratorInput{StreamName: aws.String("gsi"), ShardId: aws.String(shard), ShardIteratorType: typ}
		if mutate != nil {
			mutate(in)
		}
		_, err := e.kc.GetShardIterator(e.ctx, in)
		return err
	}
	seq := func(s string) func(*kinesis.GetShardIteratorInput) {
		return func(in *kinesis.GetShardIteratorInput) { in.StartingSequenceNumber = aws.String(s) }
	}
	for _, tc := range []struct {
		name    string
		err     error
		code    string
		message string
	}{
		{"AT_SEQUENCE_NUMBER without a number", get(types.ShardIteratorTypeAtSequenceNumber, sid(0), nil), "InvalidArgumentException",
			"Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or (2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. Request specified AT_SEQUENCE_NUMBER and no StartingSequenceNumber."},
		{"TRIM_HORIZON with a number", get(types.ShardIteratorTypeTrimHorizon, sid(0), seq(seq0)), "InvalidArgumentException", ""},
		{"number of another shard", get(types.ShardIteratorTypeAtSequenceNumber, sid(1), seq(seq0)), "InvalidArgumentException",
			"Invalid StartingSequenceNumber. It encodes shardId-000000000000, while it was used in a call to a shard with shardId-000000000001"},
		{"number of no shard", get(types.ShardIteratorTypeAtSequenceNumber, sid(0), seq("12345")), "InvalidArgumentException",
			"StartingSequenceNumber 12345 used in GetShardIterator on shard shardId-000000000000 in stream gsi under account 123456789012 is invalid."},
		{"malformed number", get(types.ShardIteratorTypeAtSequenceNumber, sid(0), seq("01")), "ValidationException", ""},
		{"AT_TIMESTAMP without a time", get(types.ShardIteratorTypeAtTimestamp, sid(0), nil), "InvalidArgumentException", ""},
		{"AT_TIMESTAMP in the future", get(types.ShardIteratorTypeAtTimestamp, sid(0), func(in *kinesis.GetShardIteratorInput) { in.Timestamp = aws.Time(t0.Add(time.Minute)) }),
			"InvalidArgumentException", ""},
		{"unknown shard", get(types.ShardIteratorTypeTrimHorizon, sid(7), nil), "ResourceNotFoundException",
			"Shard shardId-000000000007 in stream gsi under account 123456789012 does not exist"},
		{"unknown iterator type", get("SOMEWHERE", sid(0), nil), "ValidationException", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantAPIError(t, tc.err, tc.code, tc.message) })
	}
	_, err := e.kc.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("nope"), ShardId: aws.String(sid(0)), ShardIteratorType: types.ShardIteratorTypeLatest})
	wantErrorType[*types.ResourceNotFoundException](t, err)
}

func TestGetRecordsHonoursLimit(t *testing.T) {
	e := newEnv(t)
	e.createStream("lim", 1)
	var entries []types.PutRecordsRequestEntry
	for i := range 25 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte(fmt.Sprint(i))})
	}
	if _, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("lim"), Records: entries}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	it := e.iterator("lim", sid(0), types.ShardIteratorTypeTrimHorizon)
	var sizes []int
	var behind []int64
	for {
		out := e.getRecords(it, 10)
		sizes = append(sizes, len(out.Records))
		behind = append(behind, *out.MillisBehindLatest)
		if len(out.Records) == 0 {
			break
		}
		it = *out.NextShardIterator
	}
	if fmt.Sprint(sizes) != "[10 10 5 0]" || fmt.Sprint(behind) != "[2000 2000 0 0]" {
		t.Errorf("pages %v with MillisBehindLatest %v, want [10 10 5 0] and [2000 2000 0 0]", sizes, behind)
	}

	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(10001)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(0)})
	wantErrorType[*types.ValidationException](t, err)
	if out := e.getRecords(it, 10000); len(out.Records) != 0 {
		t.Errorf("Limit 10000 at the tip returned %d records", len(out.Records))
	}
}

func TestGetRecordsCapsAPageAt10MiB(t *testing.T) {
	e := newEnv(t)
	e.createStream("big", 1)
	for range 3 {
		var entries []types.PutRecordsRequestEntry
		for range 4 {
			entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: make([]byte, 1000000)})
		}
		if _, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("big"), Records: entries}); err != nil {
			t.Fatal(err)
		}
	}
	first := e.getRecords(e.iterator("big", sid(0), types.ShardIteratorTypeTrimHorizon), 0)
	// Ten records of 1,000,001 bytes fit in 10 MiB (10,485,760); eleven do not.
	if len(first.Records) != 10 || *first.MillisBehindLatest == 0 {
		t.Fatalf("first page has %d records, MillisBehindLatest %d; want 10 and > 0", len(first.Records), *first.MillisBehindLatest)
	}
	second := e.getRecords(*first.NextShardIterator, 0)
	if len(second.Records) != 2 || *second.MillisBehindLatest != 0 {
		t.Errorf("second page has %d records, MillisBehindLatest %d; want 2 and 0", len(second.Records), *second.MillisBehindLatest)
	}
}

func TestMillisBehindLatestMeasuresTheOldestUnreadRecord(t *testing.T) {
	e := newEnv(t)
	e.createStream("behind", 1)
	e.put("behind", "k", "a")
	e.clock.Advance(10 * time.Second)
	e.put("behind", "k", "b")
	e.clock.Advance(10 * time.Second)
	out := e.getRecords(e.iterator("behind", sid(0), types.ShardIteratorTypeTrimHorizon), 1)
	if len(out.Records) != 1 || *out.MillisBehindLatest != 10000 {
		t.Errorf("after reading a: MillisBehindLatest %d, want 10000 (b arrived 10 s ago)", *out.MillisBehindLatest)
	}
	out = e.getRecords(*out.NextShardIterator, 1)
	if len(out.Records) != 1 || *out.MillisBehindLatest != 0 {
		t.Errorf("after reading b: MillisBehindLatest %d, want 0", *out.MillisBehindLatest)
	}
	// Unread records at the current instant still count as behind.
	e.put("behind", "k", "c")
	out = e.getRecords(*out.NextShardIterator, 0)
	if len(out.Records) != 1 || *out.MillisBehindLatest != 0 {
		t.Errorf("reading c: %d records, MillisBehindLatest %d", len(out.Records), *out.MillisBehindLatest)
	}
}

func TestGetRecordsRejectsBadIterators(t *testing.T) {
	e := newEnv(t)
	e.createStream("bad", 1)
	it := e.iterator("bad", sid(0), types.ShardIteratorTypeTrimHorizon)
	tampered := []byte(it)
	tampered[10] ^= 1
	if tampered[10] == '+' || tampered[10] == '/' || tampered[10] == '=' {
		tampered[10] = 'A'
	}
	for _, bad := range []string{"not-an-iterator", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", string(tampered)} {
		_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(bad)})
		wantErrorType[*types.InvalidArgumentException](t, err)
		wantAPIError(t, err, "InvalidArgumentException", "Invalid ShardIterator.")
	}
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/other")})
	wantErrorType[*types.InvalidArgumentException](t, err)
}

func TestIteratorsExpireAfterTheirTTL(t *testing.T) {
	e := newEnv(t)
	e.createStream("ttl", 1)
	e.put("ttl", "k", "a")
	it := e.iterator("ttl", sid(0), types.ShardIteratorTypeTrimHorizon)
	e.clock.Advance(5 * time.Minute)
	out := e.getRecords(it, 0) // exactly 5 minutes old: still valid
	next := *out.NextShardIterator
	e.clock.Advance(time.Millisecond)
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ExpiredIteratorException](t, err)
	wantAPIError(t, err, "ExpiredIteratorException",
		"Iterator expired. The iterator was created at time Sun Mar 01 12:00:00 UTC 2026 while right now it is Sun Mar 01 12:05:00 UTC 2026 which is further in the future than the tolerated delay of 300000 milliseconds.")
	// The iterator GetRecords returned is new and still valid.
	e.getRecords(next, 0)
}

func TestIteratorTTLIsConfigurable(t *testing.T) {
	e := newEnv(t, kinesistest.WithIteratorTTL(time.Minute))
	e.createStream("short", 1)
	it := e.iterator("short", sid(0), types.ShardIteratorTypeLatest)
	e.clock.Advance(time.Minute + time.Millisecond)
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ExpiredIteratorException](t, err)
}
