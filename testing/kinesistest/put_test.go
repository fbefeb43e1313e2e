package kinesistest_test

import (
	"crypto/md5"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// shardFor finds the shard whose hash range holds key.
func shardFor(shards []types.Shard, key *big.Int) string {
	for _, s := range shards {
		if hashKey(*s.HashKeyRange.StartingHashKey).Cmp(key) <= 0 && key.Cmp(hashKey(*s.HashKeyRange.EndingHashKey)) <= 0 {
			return *s.ShardId
		}
	}
	return "none"
}

func TestPutRecordRoutesByPartitionKeyMD5(t *testing.T) {
	e := newEnv(t)
	e.createStream("route", 4)
	shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("route")})
	for i := range 40 {
		pk := fmt.Sprintf("key-%d", i)
		sum := md5.Sum([]byte(pk))
		want := shardFor(shards, new(big.Int).SetBytes(sum[:]))
		if got := *e.put("route", pk, "x").ShardId; got != want {
			t.Errorf("partition key %s went to %s, want %s", pk, got, want)
		}
	}
}

func TestPutRecordRoutesByExplicitHashKey(t *testing.T) {
	e := newEnv(t)
	e.createStream("ehk", 4)
	for _, tc := range []struct{ ehk, shard string }{
		{"0", sid(0)},
		{"85070591730234615865843651857942052863", sid(0)}, // 2^126-1, last key of shard 0
		{"85070591730234615865843651857942052864", sid(1)},
		{"340282366920938463463374607431768211455", sid(3)},
	} {
		out := e.putEHK("ehk", tc.ehk, "x")
		if *out.ShardId != tc.shard {
			t.Errorf("ExplicitHashKey %s went to %s, want %s", tc.ehk, *out.ShardId, tc.shard)
		}
	}
	recs, err := e.srv.StreamRecords("ehk")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0].ExplicitHashKey != "0" || recs[0].PartitionKey != "pk" {
		t.Errorf("stored %+v", recs)
	}
}

func TestPutRecordsStoresEntriesInOrderWithGrowingSequenceNumbers(t *testing.T) {
	e := newEnv(t)
	e.createStream("batch", 2)
	var entries []types.PutRecordsRequestEntry
	for i := range 20 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%d", i%3)), Data: []byte(fmt.Sprintf("d%02d", i))})
	}
	out, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("batch"), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if *out.FailedRecordCount != 0 || len(out.Records) != 20 {
		t.Fatalf("FailedRecordCount %d, %d results", *out.FailedRecordCount, len(out.Records))
	}
	last := map[string]string{}
	for i, r := range out.Records {
		if r.ErrorCode != nil || len(*r.SequenceNumber) != 56 {
			t.Fatalf("entry %d = %+v", i, r)
		}
		if prev, ok := last[*r.ShardId]; ok && !seqLess(prev, *r.SequenceNumber) {
			t.Errorf("entry %d: sequence number %s not above %s in %s", i, *r.SequenceNumber, prev, *r.ShardId)
		}
		last[*r.ShardId] = *r.SequenceNumber
	}

	stored, err := e.srv.StreamRecords("batch")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 20 {
		t.Fatalf("stored %d records, want 20", len(stored))
	}
	bySeq := map[string]kinesistestRecord{}
	for _, s := range stored {
		bySeq[s.SequenceNumber] = kinesistestRecord{s.ShardID, string(s.Data), s.PartitionKey, s.ArrivalTime}
	}
	for i, r := range out.Records {
		got := bySeq[*r.SequenceNumber]
		if got.shard != *r.ShardId || got.data != fmt.Sprintf("d%02d", i) || got.pk != fmt.Sprintf("k%d", i%3) || !got.arrival.Equal(t0) {
			t.Errorf("entry %d stored as %+v", i, got)
		}
	}
	// StreamRecords lists shard 0 first, then shard 1, each in sequence order.
	for i := 1; i < len(stored); i++ {
		a, b := stored[i-1], stored[i]
		if a.ShardID > b.ShardID || (a.ShardID == b.ShardID && !seqLess(a.SequenceNumber, b.SequenceNumber)) {
			t.Errorf("StreamRecords out of order at %d: %s/%s then %s/%s", i, a.ShardID, a.SequenceNumber, b.ShardID, b.SequenceNumber)
		}
	}
	one, err := e.srv.ShardRecords("batch", sid(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range one {
		if r.ShardID != sid(1) {
			t.Errorf("ShardRecords(shard 1) returned a record of %s", r.ShardID)
		}
	}
	if _, err := e.srv.ShardRecords("batch", sid(9)); err == nil {
		t.Error("ShardRecords of a missing shard succeeded")
	}
}

type kinesistestRecord struct {
	shard, data, pk string
	arrival         time.Time
}

func TestPutRecordsValidationRejectsTheWholeRequest(t *testing.T) {
	e := newEnv(t)
	e.createStream("v", 1)
	entry := func(pk string, n int) types.PutRecordsRequestEntry {
		return types.PutRecordsRequestEntry{PartitionKey: aws.String(pk), Data: make([]byte, n)}
	}
	many := func(n, size int) []types.PutRecordsRequestEntry {
		out := make([]types.PutRecordsRequestEntry, n)
		for i := range out {
			out[i] = entry(fmt.Sprint(i), size)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		records []types.PutRecordsRequestEntry
		code    string
		message string
	}{
		{"empty partition key", []types.PutRecordsRequestEntry{entry("ok", 1), entry("", 1)}, "ValidationException",
			"1 validation error detected: Value '' at 'records.2.member.partitionKey' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"partition key of 257 characters", []types.PutRecordsRequestEntry{entry(strings.Repeat("é", 257), 1)}, "ValidationException", ""},
		{"explicit hash key not a number", []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x"), ExplicitHashKey: aws.String("12a")}}, "ValidationException",
			`1 validation error detected: Value '12a' at 'records.1.member.explicitHashKey' failed to satisfy constraint: Member must satisfy regular expression pattern: 0|([1-9]\d{0,38})`},
		{"explicit hash key 2^128", []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x"), ExplicitHashKey: aws.String("340282366920938463463374607431768211456")}}, "InvalidArgumentException",
			"Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was 340282366920938463463374607431768211456"},
		{"record over 1 MiB with its key", []types.PutRecordsRequestEntry{entry("key", 1<<20-2)}, "InvalidArgumentException", ""},
		{"no entries", []types.PutRecordsRequestEntry{}, "ValidationException", ""},
		{"501 entries", many(501, 1), "ValidationException",
			"1 validation error detected: Value '[501 records]' at 'records' failed to satisfy constraint: Member must have length less than or equal to 500"},
		{"request over 10 MiB", many(11, 1000000), "InvalidArgumentException", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("v"), Records: tc.records})
			wantAPIError(t, err, tc.code, tc.message)
		})
	}
	if recs, _ := e.srv.StreamRecords("v"); len(recs) != 0 {
		t.Errorf("rejected requests stored %d records", len(recs))
	}
	// Exactly at the limit is fine: data plus key of 1 MiB.
	_, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("v"), Records: []types.PutRecordsRequestEntry{entry("key", 1<<20-3)}})
	if err != nil {
		t.Fatalf("record of exactly 1 MiB: %v", err)
	}
}

func TestPutRecordErrors(t *testing.T) {
	e := newEnv(t)
	e.createStream("p", 1)
	_, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("missing"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	wantAPIError(t, err, "ResourceNotFoundException", "Stream missing under account 123456789012 not found.")

	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("p"), PartitionKey: aws.String(""), Data: []byte("x")})
	wantErrorType[*types.ValidationException](t, err)
	wantAPIError(t, err, "ValidationException",
		"1 validation error detected: Value '' at 'partitionKey' failed to satisfy constraint: Member must have length greater than or equal to 1")

	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("p"), PartitionKey: aws.String("k"), Data: make([]byte, 1<<20)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	wantAPIError(t, err, "InvalidArgumentException",
		"Record size 1048577 bytes (data plus partition key) exceeds the maximum record size of 1048576 bytes for stream p under account 123456789012.")

	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("p"), PartitionKey: aws.String("k"), Data: []byte("x"), DryRun: aws.Bool(true)})
	wantErrorType[*types.DryRunOperationException](t, err)

	// Empty data is a valid record.
	first := e.put("p", "k", "")
	second := e.put("p", "k", "x")
	if !seqLess(*first.SequenceNumber, *second.SequenceNumber) {
		t.Errorf("sequence numbers %s then %s do not grow", *first.SequenceNumber, *second.SequenceNumber)
	}
	if recs, _ := e.srv.StreamRecords("p"); len(recs) != 2 {
		t.Errorf("stored %d records, want 2", len(recs))
	}
}

func TestUpdateMaxRecordSizeAllowsLargeRecords(t *testing.T) {
	e := newEnv(t)
	e.createStream("large", 1)
	big := make([]byte, 3<<20)
	_, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("large"), PartitionKey: aws.String("k"), Data: big})
	wantErrorType[*types.InvalidArgumentException](t, err)
	if _, err := e.kc.UpdateMaxRecordSize(e.ctx, &kinesis.UpdateMaxRecordSizeInput{StreamARN: aws.String(e.srv.StreamARN("large")), MaxRecordSizeInKiB: aws.Int32(4096)}); err != nil {
		t.Fatalf("UpdateMaxRecordSize: %v", err)
	}
	if _, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("large"), PartitionKey: aws.String("k"), Data: big}); err != nil {
		t.Fatalf("PutRecord of 3 MiB after raising the limit: %v", err)
	}
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("large")})
	if err != nil || *sum.StreamDescriptionSummary.MaxRecordSizeInKiB != 4096 {
		t.Errorf("MaxRecordSizeInKiB after update: %v %v", err, sum)
	}
}
