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

func entries(n, size int) []types.PutRecordsRequestEntry {
	out := make([]types.PutRecordsRequestEntry, n)
	for i := range out {
		out[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint(i)), Data: make([]byte, size)}
	}
	return out
}

func (e *env) putRecords(stream string, recs []types.PutRecordsRequestEntry) *kinesis.PutRecordsOutput {
	e.t.Helper()
	out, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: recs})
	if err != nil {
		e.t.Fatalf("PutRecords: %v", err)
	}
	return out
}

func TestLimitsThrottleEntriesBeyond1000RecordsPerSecond(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("rate", 1)
	var failed []int32
	for range 3 {
		failed = append(failed, *e.putRecords("rate", entries(400, 10)).FailedRecordCount)
	}
	if fmt.Sprint(failed) != "[0 0 200]" {
		t.Fatalf("FailedRecordCount of three 400-entry requests in one instant = %v, want [0 0 200]", failed)
	}
	out := e.putRecords("rate", entries(10, 10))
	for i, r := range out.Records {
		if aws.ToString(r.ErrorCode) != "ProvisionedThroughputExceededException" || r.SequenceNumber != nil ||
			aws.ToString(r.ErrorMessage) != "Rate exceeded for shard shardId-000000000000 in stream rate under account 123456789012." {
			t.Fatalf("entry %d = %+v", i, r)
		}
	}
	_, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("rate"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)

	e.clock.Advance(time.Second)
	if n := *e.putRecords("rate", entries(500, 10)).FailedRecordCount; n != 0 {
		t.Errorf("a second later %d entries failed, want 0", n)
	}
	if recs, _ := e.srv.StreamRecords("rate"); len(recs) != 1500 {
		t.Errorf("stored %d records, want 1500", len(recs))
	}
}

func TestLimitsThrottleBeyondOneMiBPerSecondPerShard(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("bytes", 2)
	// Explicit hash keys put both records in shard 0: 1.2 MB is over 1 MiB.
	recs := []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), ExplicitHashKey: aws.String("1"), Data: make([]byte, 600000)},
		{PartitionKey: aws.String("b"), ExplicitHashKey: aws.String("2"), Data: make([]byte, 600000)},
		{PartitionKey: aws.String("c"), ExplicitHashKey: aws.String(half), Data: make([]byte, 600000)},
	}
	out := e.putRecords("bytes", recs)
	if out.Records[0].ErrorCode != nil || aws.ToString(out.Records[1].ErrorCode) != "ProvisionedThroughputExceededException" || out.Records[2].ErrorCode != nil {
		t.Errorf("results %+v %+v %+v; want only the second throttled", out.Records[0], out.Records[1], out.Records[2])
	}
	e.clock.Advance(600 * time.Millisecond) // refills 600 KiB of shard 0's 1 MiB
	if out := e.putRecords("bytes", recs[1:2]); *out.FailedRecordCount != 0 {
		t.Errorf("after 600 ms the record was throttled again")
	}
}

func TestLimitsThrottleTheSixthGetRecordsInASecond(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("reads", 1)
	it := e.iterator("reads", sid(0), types.ShardIteratorTypeTrimHorizon)
	for i := range 5 {
		out, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		if err != nil {
			t.Fatalf("GetRecords %d: %v", i+1, err)
		}
		it = *out.NextShardIterator
	}
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.clock.Advance(200 * time.Millisecond) // one call's worth
	if _, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)}); err != nil {
		t.Errorf("GetRecords 200 ms later: %v", err)
	}
	_, err = e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
}

func TestLimitsThrottleReadsAfterALargePage(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("readbytes", 1)
	for range 3 { // 3 MB, one record a second to stay under the write limit
		e.putRecords("readbytes", entries(1, 1000000))
		e.clock.Advance(time.Second)
	}
	it := e.iterator("readbytes", sid(0), types.ShardIteratorTypeTrimHorizon)
	out := e.getRecords(it, 0)
	if len(out.Records) != 3 {
		t.Fatalf("first page: %d records", len(out.Records))
	}
	// 3 MB read from a 2 MiB/s allowance leaves ~0.86 MiB of debt: ~430 ms.
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.clock.Advance(400 * time.Millisecond)
	_, err = e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.clock.Advance(100 * time.Millisecond)
	if _, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator}); err != nil {
		t.Errorf("GetRecords 500 ms after: %v", err)
	}
}

func TestLimitsThrottleGetShardIteratorAndControlPlane(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("cp", 1)
	for range 5 {
		e.iterator("cp", sid(0), types.ShardIteratorTypeLatest)
	}
	_, err := e.kc.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("cp"), ShardId: aws.String(sid(0)), ShardIteratorType: types.ShardIteratorTypeLatest})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)

	for i := range 5 {
		if _, err := e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{}); err != nil {
			t.Fatalf("ListStreams %d: %v", i+1, err)
		}
	}
	_, err = e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{})
	wantErrorType[*types.LimitExceededException](t, err)
	e.clock.Advance(time.Second)
	if _, err := e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Errorf("ListStreams a second later: %v", err)
	}
}

func TestLimitsApplyUpdateShardCountQuotas(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("quota", 2)
	update := func(n int32) error {
		e.clock.Advance(time.Second) // stay under 10 calls per second
		_, err := e.kc.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("quota"), TargetShardCount: aws.Int32(n), ScalingType: types.ScalingTypeUniformScaling})
		return err
	}
	wantErrorType[*types.LimitExceededException](t, update(5)) // more than double
	for i := range 10 {
		if err := update(int32(3 - i%2)); err != nil { // 3, 2, 3, ...
			t.Fatalf("scaling %d: %v", i+1, err)
		}
	}
	wantErrorType[*types.LimitExceededException](t, update(3)) // 11th in 24 h
	e.clock.Advance(24 * time.Hour)
	if err := update(1); err != nil {
		t.Fatalf("a day later: %v", err)
	}
	wantErrorType[*types.LimitExceededException](t, update(3)) // more than double of 1
}

func TestLimitsAreOffByDefaultAndSwitchable(t *testing.T) {
	e := newEnv(t)
	e.createStream("free", 1)
	for range 4 {
		if n := *e.putRecords("free", entries(500, 10)).FailedRecordCount; n != 0 {
			t.Fatalf("without limits %d entries failed", n)
		}
	}
	e.srv.SetLimits(true)
	e.clock.Advance(time.Second)
	if n := *e.putRecords("free", entries(500, 10)).FailedRecordCount; n != 0 {
		t.Fatalf("first 500 with limits: %d failed", n)
	}
	if n := *e.putRecords("free", entries(501-1, 10)).FailedRecordCount; n != 0 {
		t.Fatalf("second 500 with limits: %d failed", n)
	}
	if n := *e.putRecords("free", entries(1, 10)).FailedRecordCount; n != 1 {
		t.Fatalf("1001st record with limits: %d failed, want 1", n)
	}
	e.srv.SetLimits(false)
	if n := *e.putRecords("free", entries(500, 10)).FailedRecordCount; n != 0 {
		t.Errorf("limits off again: %d failed", n)
	}
}
