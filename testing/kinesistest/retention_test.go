package kinesistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestRetentionTrimsRecordsOnTheServerClock(t *testing.T) {
	e := newEnv(t)
	e.createStream("trim", 1)
	r0 := *e.put("trim", "k", "r0").SequenceNumber
	e.clock.Advance(12 * time.Hour)
	e.put("trim", "k", "r1")
	e.clock.Advance(12*time.Hour - time.Millisecond)

	if got, _ := e.readToTip(e.iterator("trim", sid(0), types.ShardIteratorTypeTrimHorizon)); strings.Join(got, " ") != "r0 r1" {
		t.Fatalf("just under 24 h: read %q, want r0 r1", got)
	}
	e.clock.Advance(time.Millisecond) // r0 is now 24 h old
	if got, _ := e.readToTip(e.iterator("trim", sid(0), types.ShardIteratorTypeTrimHorizon)); strings.Join(got, " ") != "r1" {
		t.Errorf("at 24 h: TRIM_HORIZON read %q, want r1", got)
	}
	// A position in trimmed data starts at the trim horizon.
	at := e.iterator("trim", sid(0), types.ShardIteratorTypeAtSequenceNumber, func(in *kinesis.GetShardIteratorInput) { in.StartingSequenceNumber = aws.String(r0) })
	if got, _ := e.readToTip(at); strings.Join(got, " ") != "r1" {
		t.Errorf("AT_SEQUENCE_NUMBER of trimmed r0 read %q, want r1", got)
	}
	if recs, _ := e.srv.StreamRecords("trim"); len(recs) != 1 || string(recs[0].Data) != "r1" {
		t.Errorf("StreamRecords after trimming = %+v", recs)
	}
	e.clock.Advance(12 * time.Hour)
	if got, _ := e.readToTip(e.iterator("trim", sid(0), types.ShardIteratorTypeTrimHorizon)); len(got) != 0 {
		t.Errorf("at 36 h: read %q, want nothing", got)
	}
}

func TestIncreasingRetentionDoesNotRestoreTrimmedRecords(t *testing.T) {
	e := newEnv(t)
	e.createStream("restore", 1)
	e.put("restore", "k", "old")
	e.clock.Advance(25 * time.Hour)
	e.put("restore", "k", "new")
	if _, err := e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: aws.String("restore"), RetentionPeriodHours: aws.Int32(48)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.readToTip(e.iterator("restore", sid(0), types.ShardIteratorTypeTrimHorizon)); strings.Join(got, " ") != "new" {
		t.Errorf("read %q, want only new", got)
	}
}

func TestDecreasingRetentionTrimsOlderRecords(t *testing.T) {
	e := newEnv(t)
	e.createStream("shrink", 1)
	if _, err := e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: aws.String("shrink"), RetentionPeriodHours: aws.Int32(48)}); err != nil {
		t.Fatal(err)
	}
	e.put("shrink", "k", "a")
	e.clock.Advance(30 * time.Hour)
	if got, _ := e.readToTip(e.iterator("shrink", sid(0), types.ShardIteratorTypeTrimHorizon)); len(got) != 1 {
		t.Fatalf("with 48 h retention after 30 h: read %q", got)
	}
	if _, err := e.kc.DecreaseStreamRetentionPeriod(e.ctx, &kinesis.DecreaseStreamRetentionPeriodInput{StreamName: aws.String("shrink"), RetentionPeriodHours: aws.Int32(24)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.readToTip(e.iterator("shrink", sid(0), types.ShardIteratorTypeTrimHorizon)); len(got) != 0 {
		t.Errorf("with 24 h retention after 30 h: read %q", got)
	}
}

func TestClosedShardsExpireAfterRetention(t *testing.T) {
	e := newEnv(t)
	e.createStream("expire", 1)
	e.put("expire", "k", "in parent")
	it := e.iterator("expire", sid(0), types.ShardIteratorTypeTrimHorizon)
	if _, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("expire"), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String(half)}); err != nil {
		t.Fatal(err)
	}
	atTrim := &kinesis.ListShardsInput{StreamName: aws.String("expire"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}}
	if got := shardIDs(e.listShards(atTrim)); got != "0" {
		t.Errorf("AT_TRIM_HORIZON before expiry: %s, want 0", got)
	}
	e.clock.Advance(24 * time.Hour)
	if got := shardIDs(e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("expire")})); got != "1,2" {
		t.Errorf("shards 24 h after the split: %s, want 1,2", got)
	}
	if got := shardIDs(e.listShards(atTrim)); got != "1,2" {
		t.Errorf("AT_TRIM_HORIZON after expiry: %s, want 1,2", got)
	}
	_, err := e.kc.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("expire"), ShardId: aws.String(sid(0)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	_, err = e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantAPIError(t, err, "ExpiredIteratorException", "") // expiry of the iterator is checked first
	out, err := e.kc.DescribeStream(e.ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("expire")})
	if err != nil || shardIDs(out.StreamDescription.Shards) != "1,2" {
		t.Errorf("DescribeStream after expiry: %v %v", err, out)
	}
}
