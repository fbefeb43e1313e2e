package kinesistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

const visibilityDelay = 800 * time.Millisecond

func TestGetRecordsHidesRecordsUntilTheyAreReadable(t *testing.T) {
	e := newEnv(t, kinesistest.WithReadVisibilityDelay(visibilityDelay))
	e.createStream("orders", 1)
	e.put("orders", "k", "r0")
	e.clock.Advance(visibilityDelay / 2)
	e.put("orders", "k", "r1")
	it := e.iterator("orders", sid(0), types.ShardIteratorTypeTrimHorizon)

	// Before r0 is readable the page is empty and caught up, with an iterator
	// that still points before r0.
	out := e.getRecords(it, 0)
	if len(out.Records) != 0 || aws.ToInt64(out.MillisBehindLatest) != 0 || out.NextShardIterator == nil {
		t.Fatalf("page before the delay: %d records, MillisBehindLatest %d, next %v", len(out.Records), aws.ToInt64(out.MillisBehindLatest), out.NextShardIterator)
	}
	e.clock.Advance(visibilityDelay / 2) // r0 readable, r1 not yet
	out = e.getRecords(*out.NextShardIterator, 0)
	if got := fmt.Sprint(dataOf(out.Records)); got != "[r0]" || aws.ToInt64(out.MillisBehindLatest) != 0 {
		t.Fatalf("page after r0's delay: %s, MillisBehindLatest %d; want [r0], 0", got, aws.ToInt64(out.MillisBehindLatest))
	}
	e.clock.Advance(visibilityDelay / 2)
	if got := fmt.Sprint(dataOf(e.getRecords(*out.NextShardIterator, 0).Records)); got != "[r1]" {
		t.Fatalf("page after r1's delay: %s, want [r1]", got)
	}
}

func TestAClosedShardEndsOnlyOnceEveryRecordIsReadable(t *testing.T) {
	e := newEnv(t, kinesistest.WithReadVisibilityDelay(visibilityDelay))
	e.createStream("orders", 1)
	e.put("orders", "k", "last")
	_, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{
		StreamName: aws.String("orders"), ShardToSplit: aws.String(sid(0)),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728"),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := e.getRecords(e.iterator("orders", sid(0), types.ShardIteratorTypeTrimHorizon), 0)
	if len(out.Records) != 0 || len(out.ChildShards) != 0 || out.NextShardIterator == nil {
		t.Fatalf("closed shard before its record is readable: %d records, %d children, next %v", len(out.Records), len(out.ChildShards), out.NextShardIterator)
	}
	e.clock.Advance(visibilityDelay)
	out = e.getRecords(*out.NextShardIterator, 0)
	if got := fmt.Sprint(dataOf(out.Records)); got != "[last]" || len(out.ChildShards) != 2 || out.NextShardIterator != nil {
		t.Fatalf("closed shard after the delay: %s, %d children, next %v; want [last], 2, nil", got, len(out.ChildShards), out.NextShardIterator)
	}
}

func TestSubscribeDeliversARecordOnceItIsReadable(t *testing.T) {
	e := newEnv(t, kinesistest.WithReadVisibilityDelay(visibilityDelay), kinesistest.WithSubscriptionHeartbeat(time.Millisecond))
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	before := *s.next().ContinuationSequenceNumber
	put := e.put("orders", "k", "r0")
	// Heartbeats while r0 waits out the delay: caught up, no records, and a
	// continuation that stays before r0.
	for i := range 3 {
		ev := s.next()
		if len(ev.Records) != 0 || aws.ToInt64(ev.MillisBehindLatest) != 0 || !seqLess(*ev.ContinuationSequenceNumber, *put.SequenceNumber) {
			t.Fatalf("event %d before the delay: %d records, MillisBehindLatest %d, continuation %s (before %s, record %s)",
				i, len(ev.Records), aws.ToInt64(ev.MillisBehindLatest), *ev.ContinuationSequenceNumber, before, *put.SequenceNumber)
		}
	}
	e.clock.Advance(visibilityDelay)
	if got, last := s.records(1); fmt.Sprint(got) != "[r0]" || *last.ContinuationSequenceNumber != *put.SequenceNumber {
		t.Fatalf("after the delay: %v, continuation %s; want [r0], %s", got, *last.ContinuationSequenceNumber, *put.SequenceNumber)
	}
}
